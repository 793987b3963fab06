"""`ByteTokenizer`: tfnorm's byte tokens (`tfnorm.training.data.byte_text`) as a `Tokenizer`."""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm.checkpoints.tokenizer import Tokenizer
from tfnorm.training.data import byte_text

#: The file `ByteTokenizer.save` writes and `load_tokenizer` recognises.
BYTES_FILE = "tfnorm_tokenizer.json"


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as ids 0-255 and `END_OF_TEXT` (256) as the end-of-text id.

    What `tfnorm train` uses without a tokenizer: nothing to fit, and every
    string encodes. No BOS or padding id (`bos_id`, `pad_id` are None).
    `decode` stops at the end-of-text id and writes bytes that do not form
    UTF-8 as U+FFFD.

    Example:

    >>> tokenizer = ByteTokenizer()
    >>> tokenizer.encode("é").tolist(), tokenizer.eos_id
    ([195, 169], 256)
    """

    vocab_size = byte_text.VOCAB_SIZE
    eos_id = byte_text.END_OF_TEXT

    def encode(self, text, add_special_tokens=True):
        # Bytes add no special id around a text: `tfnorm train` ends each
        # file with END_OF_TEXT itself.
        return byte_text.encode(text)

    def decode(self, ids, skip_special_tokens=True):
        return byte_text.decode(np.asarray(ids).reshape(-1))

    def save(self, directory):
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, BYTES_FILE), "w", encoding="utf-8") as f:
            json.dump({"type": "bytes", "vocab_size": self.vocab_size}, f)
            f.write("\n")
        return [BYTES_FILE]
