"""The language model's text reader: bytes, files, directories, the split, bad text."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm.training.data import DataError
from tfnorm.training.data.byte_text import (
    END_OF_TEXT,
    VOCAB_SIZE,
    decode,
    encode,
    read_corpus,
)


def write(path, content):
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def stream(corpus):
    """Every token of the corpus, training part then validation part."""
    parts = [corpus.train.tokens]
    if corpus.val is not None:
        parts.append(corpus.val.tokens)
    return np.concatenate(parts).tolist()


def test_tokens_are_the_utf8_bytes_then_end_of_text(tmp_path):
    corpus = read_corpus(write(tmp_path / "a.txt", "héllo"), max_len=2)
    assert stream(corpus) == list("héllo".encode()) + [END_OF_TEXT]
    assert VOCAB_SIZE == END_OF_TEXT + 1 == 257
    assert decode(encode("naïve ✓")) == "naïve ✓"
    assert decode([104, 105, END_OF_TEXT, 104]) == "hi"


def test_windows_are_inputs_and_targets_shifted_by_one(tmp_path):
    corpus = read_corpus(write(tmp_path / "a.txt", "abcdefghij"), max_len=4)
    # 11 tokens: whole windows of 5 start at 0 and 4; 8..10 is left over.
    assert len(corpus.train) == 2
    inputs, targets = corpus.train.batch([1, 0])
    assert inputs.dtype == np.int32 and inputs.shape == targets.shape == (2, 4)
    assert decode(inputs[0]) == "efgh" and decode(targets[0]) == "fghi"
    assert decode(inputs[1]) == "abcd" and decode(targets[1]) == "bcde"


def test_several_files_join_in_the_order_given(tmp_path):
    first = write(tmp_path / "b.txt", "one")
    second = write(tmp_path / "a.txt", "two")
    corpus = read_corpus([first, second], max_len=3)
    assert stream(corpus) == [*b"one", END_OF_TEXT, *b"two", END_OF_TEXT]
    assert corpus.files == [first, second]
    swapped = read_corpus([second, first], max_len=3)
    assert swapped.sha256 != corpus.sha256


def test_a_directory_gives_its_txt_files_in_sorted_order(tmp_path):
    write(tmp_path / "b.txt", "bee")
    write(tmp_path / "a.txt", "ay")
    write(tmp_path / "notes.md", "ignored")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "c.txt", "not read")
    corpus = read_corpus(str(tmp_path), max_len=3)
    assert [p.rsplit("/", 1)[-1] for p in corpus.files] == ["a.txt", "b.txt"]
    assert stream(corpus) == [*b"ay", END_OF_TEXT, *b"bee", END_OF_TEXT]


def test_the_split_holds_out_the_end_of_the_text_by_position(tmp_path):
    text = "".join(chr(ord("a") + i % 26) for i in range(199))
    corpus = read_corpus(write(tmp_path / "a.txt", text), max_len=8, val_split=0.1)
    tokens = [*text.encode(), END_OF_TEXT]
    assert corpus.val.tokens.tolist() == tokens[180:]
    assert corpus.train.tokens.tolist() == tokens[:180]
    assert corpus.report["val_tokens"] == 20 and corpus.report["train_tokens"] == 180
    # 20 validation tokens: two whole windows of 9, and a last piece of 4.
    assert len(corpus.val) == 2 and corpus.val.tail.tolist() == tokens[196:]
    assert read_corpus(write(tmp_path / "b.txt", text), max_len=8).val is None


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", r"a\.txt: the file is empty"),
        (b"\xef\xbb\xbf", r"a\.txt: the file is empty"),
        (
            b"good\nline\xff two",
            r"a\.txt, line 2, byte 9: not UTF-8 text .*b'\\xff'",
        ),
        (b"abc", r"a\.txt: the training text is 4 tokens .* window of 9 tokens"),
    ],
    ids=["empty", "only-a-bom", "not-utf8", "shorter-than-a-context"],
)
def test_bad_text_is_one_line_naming_the_file(tmp_path, content, expected):
    path = write(tmp_path / "a.txt", content)
    with pytest.raises(DataError, match=expected) as info:
        read_corpus(path, max_len=8)
    assert "\n" not in str(info.value)


def test_a_bad_file_among_several_is_the_one_named(tmp_path):
    good = write(tmp_path / "good.txt", "plenty of good text here")
    empty = write(tmp_path / "empty.txt", "")
    with pytest.raises(DataError, match=r"empty\.txt: the file is empty"):
        read_corpus([good, empty], max_len=4)


def test_a_directory_without_text_files_is_refused(tmp_path):
    write(tmp_path / "notes.md", "x")
    with pytest.raises(DataError, match=r"holds no \.txt files"):
        read_corpus(str(tmp_path), max_len=4)


@pytest.mark.parametrize("val_split, held_out", [(0.02, 1), (0.13, 4)])
def test_a_validation_share_shorter_than_one_context_is_refused(
    tmp_path, val_split, held_out
):
    path = write(tmp_path / "a.txt", "x" * 30)
    expected = (
        rf"\(val_split={val_split}\) is {held_out} tokens, shorter than one window of 5"
    )
    with pytest.raises(DataError, match=expected):
        read_corpus(path, max_len=4, val_split=val_split)
    assert len(read_corpus(path, max_len=4, val_split=0.17).val) == 1  # 5 tokens


def test_the_same_text_is_read_once_until_it_changes(tmp_path, monkeypatch):
    path = write(tmp_path / "a.txt", "x" * 30)
    first = read_corpus(path, max_len=4, val_split=0.2)
    assert read_corpus(path, max_len=4, val_split=0.2) is first
    assert read_corpus(path, max_len=5, val_split=0.2) is not first
    write(tmp_path / "a.txt", "y" * 31)
    assert read_corpus(path, max_len=5, val_split=0.2).train.tokens[0] == ord("y")


def test_the_unigram_baseline_is_the_cross_entropy_of_training_frequencies(tmp_path):
    text = "aab" * 30 + "ab"
    corpus = read_corpus(write(tmp_path / "a.txt", text), max_len=4, val_split=0.1)
    train = corpus.train.tokens.tolist()
    counts = {t: train.count(t) + 1 for t in range(VOCAB_SIZE)}
    total = sum(counts.values())
    # The first held-out token is never a target: the windows predict the rest.
    held_out = corpus.val.tokens.tolist()[1:]
    expected = -sum(np.log2(counts[t] / total) for t in held_out) / len(held_out)
    assert corpus.report["val_unigram_bits_per_byte"] == pytest.approx(expected)
    assert (
        read_corpus(write(tmp_path / "b.txt", text), max_len=4).report[
            "val_unigram_bits_per_byte"
        ]
        is None
    )


def test_random_windows_start_anywhere_and_resume_at_any_batch(tmp_path):
    corpus = read_corpus(write(tmp_path / "a.txt", "abcdefghij" * 20), max_len=8)
    stream = corpus.train.random_batches(4, seed=3)
    first = [next(stream) for _ in range(3)]
    inputs, targets = first[0]
    assert inputs.shape == targets.shape == (4, 8)
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])
    # Byte p of the text is "abcdefghij"[p % 10]: windows cut one after the
    # other start at multiples of 8, on a, c, e, g or i only.
    firsts = {chr(batch[0][row, 0]) for batch in first for row in range(4)}
    assert firsts & set("bdfhj"), firsts
    again = next(corpus.train.random_batches(4, seed=3, start_example=8))
    np.testing.assert_array_equal(again[0], first[2][0])
    other = next(corpus.train.random_batches(4, seed=4))
    assert not np.array_equal(other[0], inputs)
