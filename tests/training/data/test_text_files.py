"""Reading text-classification files: formats, errors by file and line, classes."""

from __future__ import annotations

import json

import pytest

from tests.training.data.files import write
from tfnorm.training.data import (
    DataError,
    count_classes,
    load_text_data,
    read_examples,
)


def test_csv_reads_text_and_label_columns_in_any_order(tmp_path):
    path = write(
        tmp_path,
        "train.csv",
        'id,label,text\n1,0,"hello, world"\n2,1,good day\n\n3,2,"say ""hi"""\n',
    )
    texts, labels = read_examples(path)
    assert texts == ["hello, world", "good day", 'say "hi"']
    assert labels == [0, 1, 2]


def test_tsv_and_jsonl_are_chosen_by_suffix(tmp_path):
    tsv = write(tmp_path, "train.tsv", "text\tlabel\na, b\t1\nc\t0\n")
    assert read_examples(tsv) == (["a, b", "c"], [1, 0])
    jsonl = write(
        tmp_path,
        "train.jsonl",
        json.dumps({"text": "x y", "label": 1})
        + "\n\n"
        + '{"label": 0, "text": "z"}\n',
    )
    assert read_examples(jsonl) == (["x y", "z"], [1, 0])


def test_missing_column_names_file_and_header_line(tmp_path):
    path = write(tmp_path, "train.csv", "\ntext,target\nhello,1\n")
    with pytest.raises(
        DataError, match=r"train\.csv, line 2: the header has no `label`"
    ):
        read_examples(path)


@pytest.mark.parametrize("label", ["abc", "-1", "1.5", ""])
def test_bad_label_names_file_and_line(tmp_path, label):
    path = write(
        tmp_path, "train.csv", f"text,label\nfine,0\nalso fine,1\nbad,{label}\n"
    )
    with pytest.raises(DataError, match=r"train\.csv, line 4: the label must be"):
        read_examples(path)


def test_row_with_wrong_field_count_names_file_and_line(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na,0\nb,1,extra\n")
    with pytest.raises(DataError, match=r"train\.csv, line 3: expected 2 fields"):
        read_examples(path)


def test_line_numbers_count_physical_lines_of_quoted_newlines(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\n"two\nlines",0\nbad,x\n')
    with pytest.raises(DataError, match=r"line 4:"):
        read_examples(path)


def test_malformed_quoting_is_a_bad_line(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\nok,0\n"broken"quote,1\n')
    with pytest.raises(DataError, match=r"train\.csv, line 3: malformed line"):
        read_examples(path)


def test_jsonl_errors_name_file_and_line(tmp_path):
    bad_json = write(tmp_path, "a.jsonl", '{"text": "x", "label": 0}\n{"text": \n')
    with pytest.raises(DataError, match=r"a\.jsonl, line 2: not valid JSON"):
        read_examples(bad_json)
    missing = write(tmp_path, "b.jsonl", '{"text": "x", "label": 0}\n{"text": "y"}\n')
    with pytest.raises(DataError, match=r"b\.jsonl, line 2: the object has no `label`"):
        read_examples(missing)
    bad_label = write(tmp_path, "c.jsonl", '{"text": "x", "label": true}\n')
    with pytest.raises(DataError, match=r"c\.jsonl, line 1: the label"):
        read_examples(bad_label)


@pytest.mark.parametrize(
    "name, content",
    [("empty.csv", ""), ("header.csv", "text,label\n\n"), ("blank.jsonl", "\n\n")],
)
def test_empty_dataset_is_an_error(tmp_path, name, content):
    path = write(tmp_path, name, content)
    with pytest.raises(DataError, match=r"empty"):
        read_examples(path)


def test_missing_file_is_an_error(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_examples(str(tmp_path / "nope.csv"))


def test_validation_label_unknown_to_training_is_an_error(tmp_path):
    train = write(tmp_path, "train.csv", "text,label\na,0\nb,1\n")
    val = write(tmp_path, "val.csv", "text,label\na,0\nc,5\n")
    with pytest.raises(
        DataError,
        match=r"val\.csv, line 3: label 5 is not a class of the training file",
    ):
        load_text_data(train, val, max_len=4)


# ------------------------------------------------------------ vectorising


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    # Excel's "CSV UTF-8" starts with a BOM; the header must still be found.
    path = tmp_path / "train.csv"
    path.write_bytes("\ufefftext,label\nhello,1\n".encode())
    assert read_examples(str(path)) == (["hello"], [1])
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_bytes('\ufeff{"text": "x", "label": 0}\n'.encode())
    assert read_examples(str(jsonl)) == (["x"], [0])


@pytest.mark.parametrize("name", ["train.csv", "train.jsonl"])
def test_bad_utf8_is_reported_by_line(tmp_path, name):
    path = tmp_path / name
    lines = (
        [b"text,label", b"fine,0", b"caf\xe9,1"]
        if name.endswith(".csv")
        else [b'{"text": "fine", "label": 0}', b'{"text": "caf\xe9", "label": 1}']
    )
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DataError, match=rf"{name}, line {len(lines)}: not UTF-8"):
        read_examples(str(path))


def test_all_empty_texts_are_an_error(tmp_path):
    path = write(tmp_path, "train.csv", 'text,label\n"",0\n"  ",1\n')
    with pytest.raises(DataError, match=r"train\.csv: every text is empty"):
        read_examples(path)


def test_texts_without_words_are_an_error(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\n!!,0\n?,1\n")
    with pytest.raises(DataError, match=r"train\.csv: the texts hold no words"):
        load_text_data(path, max_len=4)


def test_classes_are_inferred_from_the_largest_label():
    assert count_classes([0, 1, 4], "f.csv") == 5
    assert count_classes([0, 0], "f.csv") == 2


@pytest.mark.parametrize("labels", [[1000000, 0], [0, 2**31], [0, 1, 40]])
def test_a_head_mostly_of_unseen_classes_is_refused(labels):
    lines = [10 + index for index in range(len(labels))]
    line = lines[labels.index(max(labels))]
    with pytest.raises(
        DataError, match=rf"line {line}: the largest label .*Renumber them"
    ):
        count_classes(labels, "f.csv", lines=lines)


def test_a_few_unseen_classes_are_allowed():
    assert count_classes([0, 1, 29], "f.csv") == 30


def test_given_num_classes_bounds_the_labels():
    assert count_classes([0, 1], "f.csv", num_classes=5) == 5
    with pytest.raises(
        DataError, match=r"f\.csv, line 4: label 7 is not below num_classes .* 5"
    ):
        count_classes([0, 1, 7], "f.csv", num_classes=5, lines=[2, 3, 4])


def test_load_text_data_uses_the_given_num_classes(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na b,0\nc d,1\n")
    train, _, _ = load_text_data(path, max_len=4, num_classes=4)
    assert train.num_classes == 4
    with pytest.raises(DataError, match=r"label 1 is not below num_classes"):
        load_text_data(path, max_len=4, num_classes=1)
