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


@pytest.mark.parametrize("label", ["-1", ""])
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
    with pytest.raises(
        DataError, match=rf"{name}, line {len(lines)}, byte \d+: not UTF-8"
    ):
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
        DataError, match=r"f\.csv, line 4: label 7 is not below num_classes 5;"
    ):
        count_classes([0, 1, 7], "f.csv", num_classes=5, lines=[2, 3, 4])


def test_load_text_data_uses_the_given_num_classes(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na b,0\nc d,1\n")
    train, _, _ = load_text_data(path, max_len=4, num_classes=4)
    assert train.num_classes == 4
    with pytest.raises(DataError, match=r"label 1 is not below num_classes"):
        load_text_data(path, max_len=4, num_classes=1)


# ------------------------------------------------------------ name labels


@pytest.mark.parametrize("name", ["train.csv", "train.jsonl"])
def test_name_labels_map_to_ids_in_sorted_order(tmp_path, name):
    rows = [("good", "pos"), ("bad", "neg"), ("fine", "pos"), ("meh", "neutral")]
    if name.endswith(".csv"):
        content = "text,label\n" + "".join(f"{t},{label}\n" for t, label in rows)
    else:
        content = "".join(
            json.dumps({"text": t, "label": lab}) + "\n" for t, lab in rows
        )
    train, val, _ = load_text_data(write(tmp_path, name, content), max_len=4)
    assert train.label_names == ["neg", "neutral", "pos"]
    assert train.labels.tolist() == [2, 0, 2, 1]
    assert train.num_classes == 3 and val is None


def test_id_labels_keep_their_meaning_and_are_named_by_number(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na,2\nb,0\n")
    train, _, _ = load_text_data(path, max_len=4)
    assert train.labels.tolist() == [2, 0]
    assert train.label_names == ["0", "1", "2"]


@pytest.mark.parametrize(
    "name, content, line, label",
    [
        ("t.csv", "text,label\na,pos\nb,neg\nc,1\n", 4, "1"),
        ("t.csv", "text,label\na,0\nb,1\nc,1.5\n", 4, "'1.5'"),
        ("t.jsonl", '{"text": "a", "label": 0}\n{"text": "b", "label": "pos"}\n', 2, "'pos'"),
    ],
)  # fmt: skip
def test_ids_and_names_mixed_are_one_error_naming_file_and_line(
    tmp_path, name, content, line, label
):
    path = write(tmp_path, name, content)
    with pytest.raises(
        DataError,
        match=rf"{name}, line {line}: the labels mix class ids and names .*"
        rf"Received: label={label}$",
    ):
        read_examples(path)


@pytest.mark.parametrize("label", ["1.5", "true", "null", "[1]"])
def test_jsonl_label_of_another_type_is_an_error(tmp_path, label):
    path = write(tmp_path, "t.jsonl", '{"text": "a", "label": ' + label + "}\n")
    with pytest.raises(DataError, match=r"t\.jsonl, line 1: the label must be"):
        read_examples(path)


def test_validation_name_unknown_to_training_names_file_and_line(tmp_path):
    train = write(tmp_path, "train.csv", "text,label\na,pos\nb,neg\n")
    val = write(tmp_path, "val.csv", "text,label\na,pos\nc,neutral\n")
    with pytest.raises(
        DataError,
        match=r"val\.csv, line 3: label 'neutral' is not a class of the training "
        r"file .*train\.csv \(its labels are neg, pos\)",
    ):
        load_text_data(train, val, max_len=4)
    ids = write(tmp_path, "ids.csv", "text,label\na,0\n")
    with pytest.raises(DataError, match=r"ids\.csv, line 2: label 0 is not a class"):
        load_text_data(train, ids, max_len=4)


def test_validation_names_use_the_training_mapping(tmp_path):
    train = write(tmp_path, "train.csv", "text,label\na,pos\nb,neg\nc,zed\n")
    val = write(tmp_path, "val.csv", "text,label\nx,zed\ny,neg\n")
    _, val_set, _ = load_text_data(train, val, max_len=4)
    assert val_set.labels.tolist() == [2, 0]
    assert val_set.label_names == ["neg", "pos", "zed"]


def test_num_classes_must_match_the_names(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na,pos\nb,neg\n")
    assert load_text_data(path, max_len=4, num_classes=2)[0].num_classes == 2
    with pytest.raises(
        DataError, match=r"the labels are 2 names \(neg, pos\).*not num_classes"
    ):
        load_text_data(path, max_len=4, num_classes=3)


def test_saved_label_names_must_match_on_resume(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na,pos\nb,neg\n")
    train, _, _ = load_text_data(path, max_len=4, label_names=["neg", "pos"])
    assert train.label_names == ["neg", "pos"]
    with pytest.raises(
        DataError,
        match=r"train\.csv: its labels \(neg, pos\) differ from those the run's "
        r"checkpoints were trained with \(bad, good, neutral",
    ):
        load_text_data(path, max_len=4, label_names=["bad", "good", "neutral"])


# ------------------------------------------------------- split and truncation


def numbered_rows(count):
    return "text,label\n" + "".join(
        f"word{i} {'yes' if i % 2 else 'no'},{'b' if i % 2 else 'a'}\n"
        for i in range(count)
    )


def test_val_split_holds_out_a_seeded_share_of_the_file(tmp_path):
    path = write(tmp_path, "train.csv", numbered_rows(40))
    train, val, vocabulary = load_text_data(path, max_len=4, val_split=0.25, seed=3)
    assert (len(train), len(val)) == (30, 10)
    assert val.source.endswith("train.csv (held out)")
    again = load_text_data(path, max_len=4, val_split=0.25, seed=3)
    assert again[1].ids.tolist() == val.ids.tolist()
    other = load_text_data(path, max_len=4, val_split=0.25, seed=4)
    assert other[1].ids.tolist() != val.ids.tolist()
    # The vocabulary is adapted on the training part only.
    held_out_words = {f"word{i}" for i in range(40)} - set(vocabulary)
    assert len(held_out_words) == 10
    assert "validation: 10 of the 40 examples" in train.notes[0]
    assert train.report["val_split"] == 0.25


def test_a_file_too_small_is_not_split_and_says_so(tmp_path):
    path = write(tmp_path, "train.csv", numbered_rows(9))
    train, val, _ = load_text_data(path, max_len=4, val_split=0.1)
    assert len(train) == 9 and val is None
    assert "no validation: " in train.notes[0] and "fewer than the 10" in train.notes[0]
    train, val, _ = load_text_data(
        write(tmp_path, "t.csv", numbered_rows(10)), max_len=4, val_split=0.1
    )
    assert (len(train), len(val)) == (9, 1)


def test_val_split_0_and_a_validation_file_hold_nothing_out(tmp_path):
    path = write(tmp_path, "train.csv", numbered_rows(40))
    train, val, _ = load_text_data(path, max_len=4, val_split=0.0)
    assert len(train) == 40 and val is None
    assert train.notes[0].startswith("no validation: val_split is 0")
    val_path = write(tmp_path, "val.csv", "text,label\nx,a\n")
    train, val, _ = load_text_data(path, val_path, max_len=4, val_split=0.5)
    assert (len(train), len(val)) == (40, 1)
    assert train.report["val_split"] is None


def test_truncation_is_counted_and_reported(tmp_path):
    texts = [" ".join(["w"] * n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 30)]
    content = "text,label\n" + "".join(
        f'"{t}, ok!",{i % 2}\n' for i, t in enumerate(texts)
    )
    val = write(tmp_path, "val.csv", "text,label\nw w w w w w,0\nw,1\n")
    train, _, _ = load_text_data(write(tmp_path, "t.csv", content), val, max_len=6)
    # ", ok!" adds one token ("ok"); punctuation is no token.
    assert train.report["truncation"] == {
        "max_len": 6,
        "train_texts": 10,
        "train_cut": 5,
        "val_texts": 2,
        "val_cut": 0,
        "max_len_95": 31,
        "longest": 31,
    }
    assert train.notes[-1].startswith(
        "max_len 6 cuts 5 of 10 training texts (50.0%) and 0 of 2 validation "
        "texts; max_len 31 would keep 95% of the training texts whole"
    )


@pytest.mark.parametrize(
    "content, line",
    [
        ('text,label\na,0\n"b,1\nc,0\nd,1\n', 3),
        ('text,label\na,0\nb,1\n"c,1\n', 4),
        ('\n"text,label\na,0\n', 2),
    ],
)
def test_an_unclosed_quote_is_reported_at_the_line_it_opens(tmp_path, content, line):
    # The reader runs on to the end of the file; that is not where to look.
    path = write(tmp_path, "train.csv", content)
    with pytest.raises(DataError, match=rf"train\.csv, line {line}: a quoted field"):
        read_examples(path)


def test_a_file_of_underscore_labels_is_refused_at_the_first(tmp_path):
    path = write(tmp_path, "train.csv", "text,label\na,1_0\nb,0_1\n")
    with pytest.raises(DataError, match=r"train\.csv, line 2: the label is digits"):
        read_examples(path)
