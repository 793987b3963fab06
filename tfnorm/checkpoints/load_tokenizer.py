"""`load_tokenizer`: a `Tokenizer` from `"bytes"` or a directory."""

from __future__ import annotations

import os

from tfnorm.checkpoints.byte_tokenizer import BYTES_FILE, ByteTokenizer
from tfnorm.checkpoints.errors import CheckpointError
from tfnorm.checkpoints.hf_tokenizer import TOKENIZER_FILE, HFTokenizer


def load_tokenizer(spec):
    """The tokenizer `spec` names.

    `"bytes"` is tfnorm's byte tokenizer; a directory with a
    `tokenizer.json` (a Hugging Face checkpoint, or what
    `HFTokenizer.save` wrote) an `HFTokenizer`; a directory that
    `ByteTokenizer.save` wrote a `ByteTokenizer`; a path to a
    `tokenizer.json` file the `HFTokenizer` of its directory.

    Example:

    >>> load_tokenizer("bytes").vocab_size
    257

    Args:
        spec: `"bytes"`, or the path of a directory or a `tokenizer.json`.

    Returns:
        A `tfnorm.checkpoints.Tokenizer`.

    Raises:
        CheckpointError: the path holds no tokenizer, naming it.
    """
    if spec == "bytes":
        return ByteTokenizer()
    path = os.fspath(spec)
    if os.path.isfile(path) and os.path.basename(path) == TOKENIZER_FILE:
        path = os.path.dirname(path) or "."
    if os.path.isfile(os.path.join(path, TOKENIZER_FILE)):
        return HFTokenizer.from_directory(path)
    if os.path.isfile(os.path.join(path, BYTES_FILE)):
        return ByteTokenizer()
    raise CheckpointError(
        f"{path}: no tokenizer there: expected {TOKENIZER_FILE} (Hugging Face) "
        f"or {BYTES_FILE} (tfnorm's bytes), or give 'bytes'. Received: "
        f"tokenizer={spec!r}"
    )
