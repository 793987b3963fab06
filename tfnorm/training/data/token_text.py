"""Plain UTF-8 text as the ids of a tokenizer other than tfnorm's bytes.

The counterpart of `byte_text.read_corpus` for a language model with a
Hugging Face tokenizer (`tfnorm train --task lm --init-from DIR`, or
`--tokenizer bpe:N|PATH`): the same files, read and split the same way, by
position in the byte stream (the held-out text is the one a byte model of
the same `val_split` is measured on), then each part's documents tokenized,
each followed by the tokenizer's end-of-text id, and cut into windows as
bytes are. `report["val_bytes"]`, the UTF-8 bytes the validation targets
cover, keeps bits per byte comparable: the loss summed over the held-out
tokens is divided by the bytes they stand for.
"""

from __future__ import annotations

import numpy as np

from tfnorm._errors import setting_key
from tfnorm.training.data import byte_text
from tfnorm.training.data.dataset import DataError


def documents(tokens):
    """The texts of a byte-token stream, split at its end-of-text tokens
    (the part of a file a split cut off is a document too)."""
    cuts = np.flatnonzero(tokens == byte_text.END_OF_TEXT)
    pieces = np.split(tokens, cuts)
    texts = []
    for piece in pieces:
        piece = piece[piece != byte_text.END_OF_TEXT]
        if len(piece):
            texts.append(piece.astype(np.uint8).tobytes().decode("utf-8", "replace"))
    return texts, len(cuts) > 0 and cuts[-1] == len(tokens) - 1


def _ids(texts, ends_with_eos, tokenizer):
    ids, first_bytes = [], None
    for index, text in enumerate(texts):
        encoding = tokenizer.tokenizer.encode(text, add_special_tokens=False)
        if first_bytes is None and encoding.ids:
            first_bytes = len(text[: encoding.offsets[0][1]].encode("utf-8"))
        ids.extend(encoding.ids)
        if index < len(texts) - 1 or ends_with_eos:
            ids.append(tokenizer.eos_id)
    return np.asarray(ids, np.int32), first_bytes or 0


def read_token_corpus(data, max_len, val_split, tokenizer):
    """`(corpus, tokenizer)`: `data` (see `byte_text.text_files`) as a
    `byte_text.Corpus` of `tokenizer`'s ids.

    Args:
        tokenizer: an `HFTokenizer` with an end-of-text id, or a function
            of the training split's documents (a list of str) returning one
            (`bpe:N` fits its merges to them, never to the held-out text).

    Raises:
        DataError: as `byte_text.read_corpus`, counting tokens.
    """
    raw = byte_text.read_corpus(data, 1, val_split)
    train_texts, train_eos = documents(raw.train.tokens)
    if callable(tokenizer):
        tokenizer = tokenizer(train_texts)
    train, _ = _ids(train_texts, train_eos, tokenizer)
    val = val_bytes = None
    if raw.val is not None:
        val_texts, val_eos = documents(raw.val.tokens)
        val, first = _ids(val_texts, val_eos, tokenizer)
        val_bytes = sum(len(t.encode("utf-8")) for t in val_texts) - first
    train = byte_text.TokenWindows(train, max_len)
    if not len(train):
        raise DataError(
            f"{', '.join(raw.files)}: the training text is {len(train.tokens)} tokens of "
            f"the tokenizer, shorter than one window of {max_len + 1} tokens; "
            f"give more text or a smaller {setting_key('max_len')}. "
            f"Received: max_len={max_len}"
        )
    if val is not None and len(val) < 2:
        val = None
    val = byte_text.TokenWindows(val, max_len) if val is not None else None
    report = dict(raw.report)
    report.update(
        val_unigram_bits_per_byte=None,
        tokenizer="tokenizer",
        train_tokens=int(len(train.tokens)),
        val_tokens=int(len(val.tokens)) if val is not None else 0,
        val_bytes=int(val_bytes) if val is not None else 0,
    )
    return byte_text.Corpus(train, val, raw.files, raw.sha256, report), tokenizer
