"""Text-classification files read, checked and vectorised into `Dataset`s.

UTF-8 (a byte-order mark is allowed) CSV or TSV with a header naming a `text`
and a `label` column, or JSON Lines with one `{"text": ..., "label": ...}`
object a line. Labels are class ids `0 .. num_classes - 1` (see
`count_classes`). Every problem (bad UTF-8, missing column, bad label,
malformed line, no examples or no words at all) raises `DataError` naming the
file and line, before any training starts.
"""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np

from tfnorm.training.data.dataset import DataError, Dataset
from tfnorm.training.data.vocabulary import get_vocabulary, make_vectorizer, vectorize

#: File suffixes read as JSON Lines; everything else is CSV, or TSV for ".tsv".
_JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")

#: Without `num_classes`, the classes are inferred as `max(label) + 1`; a
#: label this large (or a head mostly of classes no example has, see
#: `count_classes`) is refused as a likely typo or a non-id label.
MAX_INFERRED_CLASSES = 100000
#: The most inferred classes allowed per distinct label seen.
MAX_UNSEEN_CLASS_RATIO = 10


def read_examples(path):
    """Reads `(texts, labels)` from a CSV, TSV or JSON Lines file.

    The format follows the suffix: `.tsv` is tab-separated, `.jsonl`,
    `.ndjson` and `.json` are JSON Lines, anything else is CSV. CSV and TSV
    files need a header row with `text` and `label` columns (other columns are
    ignored). Blank lines are skipped.

    Args:
        path: the file to read.

    Returns:
        A list of texts and a list of int labels, in file order.

    Raises:
        DataError: the file is missing, a line is malformed, a column or key
            is missing, a label is not a non-negative integer, or the file
            holds no examples. The message names the file and line.
    """
    texts, labels, _ = _read_numbered(path)
    return texts, labels


def _read_numbered(path):
    """`read_examples` plus each example's line number."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file. Received: path={path!r}")
    text = _read_utf8(path)
    if path.lower().endswith(_JSONL_SUFFIXES):
        texts, labels, lines = _read_jsonl(path, text)
    else:
        delimiter = "\t" if path.lower().endswith(".tsv") else ","
        texts, labels, lines = _read_delimited(path, text, delimiter)
    if not texts:
        raise DataError(
            f"{path}: the file holds no examples (only a header or blank lines); "
            "an empty dataset cannot be trained on."
        )
    if not any(text.strip() for text in texts):
        raise DataError(f"{path}: every text is empty; there are no words to train on.")
    return texts, labels, lines


def _read_utf8(path):
    """The file's text; a UTF-8 byte-order mark (as Excel writes) is dropped."""
    with open(path, "rb") as handle:
        raw = handle.read()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataError(
            f"{path}, line {line}: not UTF-8 text ({error.reason}: byte "
            f"{raw[error.start : error.start + 1]!r}); save the file as UTF-8."
        ) from None


def _parse_label(path, line_number, raw):
    text = str(raw).strip()
    try:
        label = int(text)
    except ValueError:
        label = None
    if isinstance(raw, bool) or label is None or label < 0:
        raise DataError(
            f"{path}, line {line_number}: the label must be a non-negative "
            f"integer class id. Received: label={raw!r}"
        )
    return label


def _read_delimited(path, text, delimiter):
    texts, labels, lines = [], [], []
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        try:
            header = next(reader, None)
            while header is not None and not any(cell.strip() for cell in header):
                header = next(reader, None)
            if header is None:
                raise DataError(
                    f"{path}: the file is empty; an empty dataset cannot be "
                    "trained on (expected a header with `text` and `label`)."
                )
            names = [cell.strip().lower() for cell in header]
            for column in ("text", "label"):
                if column not in names:
                    raise DataError(
                        f"{path}, line {reader.line_num}: the header has no "
                        f"`{column}` column. Received: header={header!r}"
                    )
            text_index, label_index = names.index("text"), names.index("label")
            record_start = reader.line_num + 1
            for row in reader:
                line_number = record_start
                record_start = reader.line_num + 1
                if not row or not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"{path}, line {line_number}: expected {len(header)} "
                        f"fields like the header, found {len(row)}. "
                        f"Received: row={row!r}"
                    )
                texts.append(row[text_index])
                labels.append(_parse_label(path, line_number, row[label_index]))
                lines.append(line_number)
        except csv.Error as error:
            raise DataError(
                f"{path}, line {reader.line_num}: malformed line ({error})."
            ) from None
    return texts, labels, lines


def _read_jsonl(path, text):
    texts, labels, lines = [], [], []
    for line_number, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise DataError(
                f"{path}, line {line_number}: not valid JSON ({error})."
            ) from None
        if not isinstance(record, dict):
            raise DataError(
                f"{path}, line {line_number}: expected a JSON object "
                f"with `text` and `label`. Received: {line.strip()[:80]}"
            )
        for key in ("text", "label"):
            if key not in record:
                raise DataError(
                    f"{path}, line {line_number}: the object has no "
                    f"`{key}` key. Received: keys={sorted(record)}"
                )
        if not isinstance(record["text"], str):
            raise DataError(
                f"{path}, line {line_number}: `text` must be a string. "
                f"Received: text={record['text']!r}"
            )
        texts.append(record["text"])
        labels.append(_parse_label(path, line_number, record["label"]))
        lines.append(line_number)
    return texts, labels, lines


def count_classes(labels, path, num_classes=None, lines=None):
    """The number of classes of a file's `labels`, or raises `DataError`.

    With `num_classes` every label must be below it (a head with unused
    classes is fine). Without it the count is `max(label) + 1` (at least 2),
    refused when it exceeds `MAX_INFERRED_CLASSES` or `MAX_UNSEEN_CLASS_RATIO`
    times the number of distinct labels: one label `1000000` would otherwise
    build a 1,000,001-class head without a word. `lines` (the examples'
    line numbers) let the error name the line.
    """
    largest = max(labels)
    where = path
    if lines is not None:
        where = f"{path}, line {lines[labels.index(largest)]}"
    if num_classes is not None:
        if largest >= num_classes:
            raise DataError(
                f"{where}: label {largest} is not below num_classes (--num-classes) "
                f"{num_classes}; labels are class ids 0..{num_classes - 1}. "
                f"Received: label={largest}"
            )
        return num_classes
    inferred = max(largest + 1, 2)
    distinct = len(set(labels))
    if inferred > MAX_INFERRED_CLASSES or inferred > MAX_UNSEEN_CLASS_RATIO * distinct:
        advice = "Renumber them"
        if inferred <= MAX_INFERRED_CLASSES:
            advice += f", or give --num-classes {inferred} if that is meant"
        raise DataError(
            f"{where}: the largest label is {largest} but only {distinct} distinct "
            f"label(s) occur; labels are class ids 0..N-1. {advice}. "
            f"Received: label={largest}"
        )
    return inferred


def load_text_data(
    train_path,
    val_path=None,
    max_len=64,
    max_tokens=20000,
    vocabulary=None,
    num_classes=None,
):
    """Reads, checks and vectorises a training file and an optional validation file.

    Both files are read and checked before the vocabulary is adapted, so a
    malformed validation file fails as fast as a malformed training file.

    Args:
        train_path: CSV/TSV/JSON Lines training file.
        val_path: optional validation file in any of those formats.
        max_len: ids per example.
        max_tokens: vocabulary size limit (padding and unknown included).
        vocabulary: a vocabulary saved by an earlier run of the same training
            (reused instead of adapting, so ids stay stable on resume).
        num_classes: the number of classes, or None to infer it from the
            training labels (see `count_classes`).

    Returns:
        `(train, val, vocabulary)`: two `Dataset`s (val may be None) and the
        vocabulary list to save with the run.
    """
    train_texts, train_labels, train_lines = _read_numbered(train_path)
    val_examples = _read_numbered(val_path) if val_path else None
    num_classes = count_classes(train_labels, train_path, num_classes, train_lines)
    if val_examples is not None:
        for line_label, line in zip(val_examples[1], val_examples[2]):
            if line_label >= num_classes:
                raise DataError(
                    f"{val_path}, line {line}: label {line_label} is not a class "
                    f"of the training file {train_path} (its labels are 0.."
                    f"{num_classes - 1}). Received: label={line_label}"
                )
    if vocabulary is None:
        vectorizer = make_vectorizer(max_len, max_tokens=max_tokens)
        from tfnorm._keras import tf

        vectorizer.adapt(tf.data.Dataset.from_tensor_slices(train_texts).batch(256))
        vocabulary = get_vocabulary(vectorizer)
        if not vocabulary:
            raise DataError(
                f"{train_path}: the texts hold no words (after lower-casing and "
                "removing punctuation); there is nothing to train on."
            )
    else:
        vectorizer = make_vectorizer(max_len, vocabulary=list(vocabulary))
    vocab_size = len(vocabulary) + 2

    def as_dataset(path, texts, labels):
        return Dataset(
            ids=vectorize(vectorizer, texts),
            labels=np.asarray(labels, dtype=np.int32),
            vocab_size=vocab_size,
            num_classes=num_classes,
            source=os.fspath(path),
        )

    train = as_dataset(train_path, train_texts, train_labels)
    val = as_dataset(val_path, *val_examples[:2]) if val_examples else None
    return train, val, vocabulary
