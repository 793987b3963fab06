"""Plain UTF-8 text as the tokens of a checkpoint's tokenizer.

The counterpart of `byte_text.read_corpus` for a language model that
starts from a Hugging Face checkpoint (`tfnorm train --init-from DIR`):
the same files, read the same way, each file's ids followed by the
tokenizer's end-of-text id, the stream split by position and cut into
windows exactly as bytes are. To keep bits per byte comparable with a byte
model, each token also records how many UTF-8 bytes of the text it covers
(`Corpus.val_bytes`: the bytes the validation targets cover), so the loss
summed over the held-out tokens is divided by the bytes they stand for.
"""

from __future__ import annotations

import hashlib

import numpy as np

from tfnorm._errors import setting_key
from tfnorm.training.data import byte_text
from tfnorm.training.data.dataset import DataError, read_utf8_bytes


def _file_tokens(path, tokenizer):
    """The ids of one file (the tokenizer's end-of-text id after them), the
    bytes each covers, and the file's SHA-256."""
    raw = read_utf8_bytes(path)
    if not raw:
        raise DataError(f"{path}: the file is empty; there is no text to train on.")
    text = raw.decode("utf-8")
    encoding = tokenizer.tokenizer.encode(text, add_special_tokens=False)
    # Byte offset of each character, so a token's char span gives its bytes.
    starts = np.concatenate(
        [[0], np.cumsum([len(c.encode("utf-8")) for c in text])]
    ).astype(np.int64)
    ends = np.array([starts[end] for _, end in encoding.offsets], np.int64)
    # Tokens of one character share its span: the last of them covers it.
    covered = np.diff(np.concatenate([[0], np.maximum.accumulate(ends)]))
    ids = list(encoding.ids) + [tokenizer.eos_id]
    return (
        np.asarray(ids, np.int32),
        np.concatenate([covered, [0]]).astype(np.int64),
        hashlib.sha256(raw).hexdigest(),
    )


def read_token_corpus(data, max_len, val_split, tokenizer):
    """`data` (see `byte_text.text_files`) as a `byte_text.Corpus` of
    `tokenizer`'s ids (an `HFTokenizer` with an end-of-text id).

    The report's `val_bytes` is the UTF-8 bytes the validation targets (its
    tokens but the first) cover: `val_bits_per_byte` divides by it.

    Raises:
        DataError: as `byte_text.read_corpus`, counting tokens.
    """
    files = byte_text.text_files(data)
    parts, sizes, digests = zip(*(_file_tokens(p, tokenizer) for p in files))
    stream, covered = np.concatenate(parts), np.concatenate(sizes)
    held_out = int(round(len(stream) * float(val_split or 0.0)))
    cut = len(stream) - held_out
    train = byte_text.TokenWindows(stream[:cut], max_len)
    val = byte_text.TokenWindows(stream[cut:], max_len) if held_out > 1 else None
    source = files[0] if len(files) == 1 else f"{len(files)} files"
    if not len(train):
        raise DataError(
            f"{source}: the training text is {cut} tokens of the checkpoint's "
            f"tokenizer, shorter than one window of {max_len + 1} tokens; give "
            f"more text or a smaller {setting_key('max_len')}. "
            f"Received: max_len={max_len}"
        )
    sha256 = hashlib.sha256("".join(digests).encode()).hexdigest()
    report = {
        "val_unigram_bits_per_byte": None,
        "files": list(files),
        "tokenizer": "checkpoint",
        "train_tokens": int(cut),
        "val_tokens": int(held_out) if val is not None else 0,
        "val_split": float(val_split or 0.0),
        "val_bytes": int(covered[cut + 1 :].sum()) if val is not None else 0,
    }
    return byte_text.Corpus(train, val, list(files), sha256, report)
