"""Text-classification files read, checked and vectorised into `Dataset`s.

UTF-8 (a byte-order mark is allowed) CSV or TSV with a header naming a `text`
and a `label` column, or JSON Lines with one `{"text": ..., "label": ...}`
object a line. Labels are class ids `0 .. num_classes - 1` (see
`count_classes`) or names such as `pos`/`neg`, mapped to ids in sorted order
(see `labels`). Every problem (bad UTF-8, missing column, bad label, ids and
names mixed, malformed line, no examples or no words at all) raises
`DataError` naming the file and line, before any training starts.
"""

from __future__ import annotations

import csv
import io
import json
import os

import numpy as np

from tfnorm._errors import setting_key
from tfnorm.training.config.train_defaults import FILE_VOCAB
from tfnorm.training.data.dataset import DataError, Dataset, read_utf8_bytes
from tfnorm.training.data.labels import (
    check_one_kind,
    check_saved_names,
    id_label_names,
    label_names,
    parse_label,
)
from tfnorm.training.data.preparation import (
    split_indices,
    split_note,
    truncation_report,
)
from tfnorm.training.data.vocabulary import (
    get_vocabulary,
    make_vectorizer,
    token_counts,
    vectorize,
)

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
        A list of texts and a list of labels, in file order: int class ids,
        or str names (a file holds one kind or the other).

    Raises:
        DataError: the file is missing, a line is malformed, a column or key
            is missing, a label is neither a non-negative integer nor a
            name, ids and names are mixed, or the file holds no examples.
            The message names the file and line.
    """
    texts, labels, _ = _read_numbered(path)
    return texts, labels


def _read_numbered(path):
    """`read_examples` plus each example's line number."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: no such file. Received: path={path!r}")
    text = read_utf8_bytes(path).decode("utf-8")
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
    check_one_kind(path, labels, lines)
    return texts, labels, lines


def _read_delimited(path, text, delimiter):
    texts, labels, lines = [], [], []
    with io.StringIO(text, newline="") as handle:
        reader = csv.reader(handle, delimiter=delimiter, strict=True)
        # The line the record being read began on: an unclosed quote makes
        # the reader run on to the end of the file, whose line it would name.
        record_start = 1
        try:
            header = next(reader, None)
            while header is not None and not any(cell.strip() for cell in header):
                record_start = reader.line_num + 1
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
                labels.append(parse_label(path, line_number, row[label_index]))
                lines.append(line_number)
        except csv.Error as error:
            if "unexpected end of data" in str(error):
                raise DataError(
                    f"{path}, line {record_start}: a quoted field opened on this "
                    f"line is never closed (the file ends inside it, at line "
                    f'{reader.line_num}); close the quote or double it ("").'
                ) from None
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
        labels.append(parse_label(path, line_number, record["label"]))
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
                f"{where}: label {largest} is not below {setting_key('num_classes')} "
                f"{num_classes}; labels are class ids 0..{num_classes - 1}. "
                f"Received: label={largest}"
            )
        return num_classes
    inferred = max(largest + 1, 2)
    distinct = len(set(labels))
    if inferred > MAX_INFERRED_CLASSES or inferred > MAX_UNSEEN_CLASS_RATIO * distinct:
        advice = "Renumber them"
        if inferred <= MAX_INFERRED_CLASSES:
            advice += (
                f", or give {setting_key('num_classes', inferred)} if that is meant"
            )
        raise DataError(
            f"{where}: the largest label is {largest} but only {distinct} distinct "
            f"label(s) occur; labels are class ids 0..N-1. {advice}. "
            f"Received: label={largest}"
        )
    return inferred


def _vectorizer(train_path, train_texts, max_len, max_tokens, vocabulary):
    """The vectoriser of a run and its vocabulary: `vocabulary` when an
    earlier run saved one, else adapted to the training texts."""
    if vocabulary is not None:
        return make_vectorizer(max_len, vocabulary=list(vocabulary)), vocabulary
    vectorizer = make_vectorizer(max_len, max_tokens=max_tokens)
    from tfnorm._keras import tf

    vectorizer.adapt(tf.data.Dataset.from_tensor_slices(train_texts).batch(256))
    vocabulary = get_vocabulary(vectorizer)
    if not vocabulary:
        raise DataError(
            f"{train_path}: the texts hold no words (after lower-casing and "
            "removing punctuation); there is nothing to train on."
        )
    return vectorizer, vocabulary


def load_text_data(
    train_path,
    val_path=None,
    max_len=64,
    max_tokens=FILE_VOCAB,
    vocabulary=None,
    num_classes=None,
    val_split=0.0,
    seed=0,
    label_names=None,
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
            training labels (see `count_classes`; with name labels, the
            number of names, which a given `num_classes` must equal).
        val_split: without `val_path`, the share of the training file held
            out for validation by a split seeded with `seed` (see
            `preparation.split_indices`); 0 for none.
        seed: the split's seed.
        label_names: the class names saved by an earlier run of the same
            training; the file's must be the same.

    Returns:
        `(train, val, vocabulary)`: two `Dataset`s (val may be None) and the
        vocabulary list to save with the run. Both datasets carry the class
        names (`label_names`); the training set also carries the `report`
        for `summary.json` and the `notes` to log (the split, the texts cut
        by `max_len`).
    """
    train_texts, train_labels, train_lines = _read_numbered(train_path)
    val_examples = _read_numbered(val_path) if val_path else None
    named = isinstance(train_labels[0], str)
    names, train_ids = _class_ids(train_path, train_labels, train_lines, num_classes)
    check_saved_names(train_path, names, label_names)
    num_classes = len(names)
    notes, report = [], {"label_names": names, "val_split": None}
    if val_examples is not None:
        val_texts = val_examples[0]
        val_ids = _val_class_ids(val_path, train_path, names, named, *val_examples[1:])
    else:
        train_index, val_index = split_indices(len(train_texts), val_split, seed)
        notes.append(
            split_note(train_path, len(train_texts), len(val_index), val_split, seed)
        )
        report["val_split"] = val_split
        val_texts = [train_texts[i] for i in val_index] or None
        val_ids = [train_ids[i] for i in val_index]
        train_texts = [train_texts[i] for i in train_index]
        train_ids = [train_ids[i] for i in train_index]
    vectorizer, vocabulary = _vectorizer(
        train_path, train_texts, max_len, max_tokens, vocabulary
    )
    vocab_size = len(vocabulary) + 2
    report["truncation"], line = truncation_report(
        max_len,
        token_counts(train_texts),
        token_counts(val_texts) if val_texts else None,
    )
    notes.append(line)

    def as_dataset(source, texts, labels, **extra):
        return Dataset(
            ids=vectorize(vectorizer, texts),
            labels=np.asarray(labels, dtype=np.int32),
            vocab_size=vocab_size,
            num_classes=num_classes,
            source=source,
            label_names=names,
            **extra,
        )

    train_source = os.fspath(train_path)
    train = as_dataset(train_source, train_texts, train_ids, report=report, notes=notes)
    val = None
    if val_examples is not None:
        val = as_dataset(os.fspath(val_path), val_texts, val_ids)
    elif val_texts:
        val = as_dataset(f"{train_source} (held out)", val_texts, val_ids)
    return train, val, vocabulary


def _class_ids(path, labels, lines, num_classes):
    """`(class names in id order, the labels as class ids)` of a training file."""
    if not isinstance(labels[0], str):
        num_classes = count_classes(labels, path, num_classes, lines)
        return id_label_names(num_classes), list(labels)
    names = label_names(labels)
    if num_classes is not None and num_classes != len(names):
        raise DataError(
            f"{path}: the labels are {len(names)} names ({', '.join(names[:10])}"
            f"{', ...' if len(names) > 10 else ''}), so there are {len(names)} "
            f"classes, not {setting_key('num_classes', num_classes)}; leave "
            f"{setting_key('num_classes')} out for name labels. "
            f"Received: num_classes={num_classes}"
        )
    index = {name: position for position, name in enumerate(names)}
    return names, [index[label] for label in labels]


def _val_class_ids(val_path, train_path, names, named, labels, lines):
    """The validation labels as the training file's class ids, or `DataError`."""
    index = {name: position for position, name in enumerate(names)}
    ids = []
    for label, line in zip(labels, lines):
        key = label if isinstance(label, str) else str(label)
        if isinstance(label, str) != named or key not in index:
            known = (
                ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
                if named
                else f"the class ids 0..{len(names) - 1}"
            )
            raise DataError(
                f"{val_path}, line {line}: label {label!r} is not a class of the "
                f"training file {train_path} (its labels are {known}). "
                f"Received: label={label!r}"
            )
        ids.append(index[key])
    return ids
