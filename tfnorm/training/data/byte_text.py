"""Plain UTF-8 text as byte tokens, for training a causal language model.

Any text trains as it is: each byte is a token (ids 0-255), so there is no
vocabulary to fit, save or download, and every string can be encoded. One
special token, `END_OF_TEXT` (256), ends each file, so that the model sees
where one document stops and the next begins.

The data is one file, several files (read in the order given), or a
directory (its `.txt` files, in sorted order, not descending into
subdirectories). Their tokens are joined into one stream; the last
`val_split` share of the stream is held out for validation, by position
(never shuffled across the split, so no window of the validation text is
also trained on). Each part is cut into windows of `max_len + 1` tokens,
one after the other: the model reads the first `max_len` and predicts each
next token.

Every problem raises `DataError` on one line naming the file: an empty file,
bytes that are not UTF-8 (with the byte's offset), a directory without
`.txt` files, a training or validation text shorter than one window. None
of this needs TensorFlow: `tfnorm train` reads the text before it loads.

Example:

>>> corpus = read_corpus(["a.txt"], max_len=64, val_split=0.1)  # doctest: +SKIP
>>> inputs, targets = corpus.train.batch([0, 1])  # doctest: +SKIP
>>> inputs.shape, targets.shape  # doctest: +SKIP
((2, 64), (2, 64))
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np

from tfnorm._errors import setting_key
from tfnorm.training.data.dataset import DataError, read_utf8_bytes

#: The token that ends each file.
END_OF_TEXT = 256
#: Byte values plus `END_OF_TEXT`.
VOCAB_SIZE = 257
#: What a directory given as data is read for.
TEXT_SUFFIX = ".txt"


def encode(text):
    """The token ids of `text` (a str): its UTF-8 bytes."""
    return np.frombuffer(text.encode("utf-8"), np.uint8).astype(np.int32)


def decode(ids):
    """The text of byte ids; `END_OF_TEXT` ends it, and bytes that do not
    form UTF-8 (a sample cut inside a character) become U+FFFD."""
    ids = [int(i) for i in ids]
    if END_OF_TEXT in ids:
        ids = ids[: ids.index(END_OF_TEXT)]
    return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


def text_files(data):
    """The files `data` names: a path, a list of paths, or a directory (its
    `.txt` files, sorted)."""
    paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    files = []
    for path in map(os.fspath, paths):
        if not os.path.isdir(path):
            files.append(path)
            continue
        found = sorted(
            os.path.join(path, name)
            for name in os.listdir(path)
            if name.endswith(TEXT_SUFFIX) and os.path.isfile(os.path.join(path, name))
        )
        if not found:
            raise DataError(
                f"{path}: the directory holds no {TEXT_SUFFIX} files to train on."
            )
        files.extend(found)
    return files


def read_file(path):
    """The byte tokens of one UTF-8 file (a byte-order mark dropped),
    followed by `END_OF_TEXT`."""
    raw = read_utf8_bytes(path)
    if not raw:
        raise DataError(f"{path}: the file is empty; there is no text to train on.")
    tokens = np.empty(len(raw) + 1, np.int32)
    tokens[:-1] = np.frombuffer(raw, np.uint8)
    tokens[-1] = END_OF_TEXT
    return tokens, hashlib.sha256(raw).hexdigest()


@dataclasses.dataclass
class TokenWindows:
    """Windows of `max_len + 1` tokens cut one after the other from a stream.

    `len()` counts the whole windows; `batch(indices)` returns
    `(inputs, targets)`, int32 `[len(indices), max_len]` each, the targets
    being the inputs shifted by one token. `tail` is what is left after the
    whole windows (the validation text's last, shorter piece; at least two
    tokens, or None).
    """

    tokens: np.ndarray
    max_len: int

    def __len__(self):
        return max(0, (len(self.tokens) - 1) // self.max_len)

    def batch(self, indices):
        starts = np.asarray(indices, np.int64)[:, None] * self.max_len
        windows = self.tokens[starts + np.arange(self.max_len + 1)]
        return windows[:, :-1], windows[:, 1:]

    def batch_at(self, starts):
        """`(inputs, targets)` of the windows starting at token offsets
        `starts` (each at most `len(tokens) - max_len - 1`)."""
        windows = self.tokens[
            np.asarray(starts, np.int64)[:, None] + np.arange(self.max_len + 1)
        ]
        return windows[:, :-1], windows[:, 1:]

    def random_batches(self, batch_size, seed, start_example=0):
        """Batches of windows at random offsets, each batch drawn from its
        own generator seeded by `seed` and the batch's number: batch `k` is
        the same however the run got there, so a run resumed at
        `start_example` (a multiple of `batch_size`) sees what an
        uninterrupted one would."""
        number = int(start_example) // batch_size
        last_start = len(self.tokens) - self.max_len - 1
        while True:
            rng = np.random.RandomState([seed % 2**32, number % 2**32, 7])
            yield self.batch_at(rng.randint(0, last_start + 1, size=batch_size))
            number += 1

    @property
    def tail(self):
        rest = self.tokens[len(self) * self.max_len :]
        return rest if len(rest) >= 2 else None


def unigram_bits_per_byte(train_tokens, held_out_tokens):
    """Bits per token of `held_out_tokens` under the training tokens' own
    frequencies (each count plus one): the baseline a language model that
    ignores context reaches."""
    counts = np.bincount(train_tokens, minlength=VOCAB_SIZE) + 1.0
    log2_p = np.log2(counts / counts.sum())
    return float(-log2_p[held_out_tokens].mean())


@dataclasses.dataclass
class Corpus:
    """The training and validation windows of a text corpus.

    Attributes:
        train, val: `TokenWindows` (`val` None without a split).
        files: the files read, in order.
        sha256: one digest of every file's content, in order.
        report: what `summary.json` records about the data.
    """

    train: TokenWindows
    val: TokenWindows | None
    files: list
    sha256: str
    report: dict


#: The last corpus read and what it was read from: `tfnorm train` checks the
#: text before TensorFlow loads, and the run then reads it from here.
_LAST = {}


def read_corpus(data, max_len, val_split=0.0):
    """Reads `data` (see `text_files`) into a `Corpus`.

    The last corpus read is kept; asked again for the same files, unchanged
    (size and modification time), with the same settings, it is returned
    without reading them again.

    Args:
        data: a path, a list of paths, or a directory of `.txt` files.
        max_len: int, the context: tokens the model reads per window.
        val_split: float in [0, 1), the share of the token stream held out
            for validation: its end, by position.

    Raises:
        DataError: a file is empty, unreadable or not UTF-8, a directory
            holds no `.txt` file, or a part is shorter than one window.
    """
    files = text_files(data)
    key = (tuple(map(_stamp, files)), int(max_len), float(val_split or 0.0))
    if _LAST.get("key") == key:
        return _LAST["corpus"]
    corpus = _read_corpus(files, max_len, val_split)
    _LAST.update(key=key, corpus=corpus)
    return corpus


def _stamp(path):
    try:
        found = os.stat(path)
    except OSError:
        return (path, None, None)  # read_file says why
    return (os.path.abspath(path), found.st_size, found.st_mtime_ns)


def _read_corpus(files, max_len, val_split):
    parts, digests = zip(*(read_file(path) for path in files))
    stream = np.concatenate(parts)
    held_out = int(round(len(stream) * float(val_split or 0.0)))
    train = TokenWindows(stream[: len(stream) - held_out], max_len)
    val = TokenWindows(stream[len(stream) - held_out :], max_len) if held_out else None
    source = files[0] if len(files) == 1 else f"{len(files)} files"
    if not len(train) and held_out and len(TokenWindows(stream, max_len)):
        # The text has a window: the share held out left too little of it.
        raise DataError(
            f"{source}: {setting_key('val_split', val_split)} holds out "
            f"{held_out} of the {len(stream)} tokens, leaving "
            f"{len(train.tokens)} to train on, shorter than one window of "
            f"{max_len + 1} tokens (a context of max_len {max_len} and the "
            f"token after it); lower {setting_key('val_split')}. "
            f"Received: val_split={val_split}"
        )
    if not len(train):
        raise DataError(
            f"{source}: the training text is {len(train.tokens)} tokens (bytes, "
            f"with one end-of-text token a file), shorter than one window of "
            f"{max_len + 1} tokens (a context of {setting_key('max_len', max_len)} "
            f"and the token after it); give more text or a smaller "
            f"{setting_key('max_len')}. Received: max_len={max_len}"
        )
    if val is not None and not len(val):
        # Shorter than one context, it would measure the model on contexts
        # shorter than it trains on (or on none at all).
        raise DataError(
            f"{source}: the validation share ({setting_key('val_split', val_split)}"
            f") is {held_out} tokens, shorter than one window of "
            f"{max_len + 1} tokens (a context of "
            f"{setting_key('max_len', max_len)} and the token after it); raise "
            f"{setting_key('val_split')}, lower {setting_key('max_len')}, or "
            f"give {setting_key('val_split', 0)}. Received: val_split={val_split}"
        )
    sha256 = hashlib.sha256("".join(digests).encode()).hexdigest()
    report = {
        "val_unigram_bits_per_byte": (
            unigram_bits_per_byte(train.tokens, val.tokens[1:]) if val else None
        ),
        "files": list(files),
        "tokenizer": "bytes",
        "train_tokens": int(len(train.tokens)),
        "val_tokens": int(held_out),
        "val_split": float(val_split or 0.0),
    }
    return Corpus(train, val, list(files), sha256, report)


#: Fewer predicted validation tokens than this and one token moves the
#: validation accuracy by more than a point.
FEW_VAL_PREDICTIONS = 100


def small_validation_warning(report):
    """A warning line when the validation text held out by `val_split` is
    too short to measure the model by, else None."""
    predicted = report["val_tokens"] - 1
    if not report["val_tokens"] or predicted >= FEW_VAL_PREDICTIONS:
        return None
    return (
        f"warning: val_split={report['val_split']:g} holds out "
        f"{report['val_tokens']} byte tokens of the text: the validation "
        f"metrics are over {predicted} predicted bytes, each moving "
        f"val_accuracy by {1 / max(predicted, 1):.1%}; raise val_split to hold "
        f"out at least {FEW_VAL_PREDICTIONS + 1} tokens for a steadier measure"
    )
