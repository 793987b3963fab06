"""`Tokenizer`: what tfnorm asks of a tokenizer, whichever library does the work."""

from __future__ import annotations

import numpy as np


class Tokenizer:
    """Text to token ids and back, with the special ids a language model needs.

    Two kinds implement it: `ByteTokenizer` (tfnorm's bytes: ids 0-255 are
    UTF-8 bytes, 256 ends a text) and `HFTokenizer` (a Hugging Face
    `tokenizer.json`, run by the Rust `tokenizers` library).
    `load_tokenizer("bytes")` or `load_tokenizer(directory)` gives either.

    ```
    ids  = tokenizer.encode("héllo")       int32 (n,)
    text = tokenizer.decode(ids)           "héllo"
    tokenizer.bos_id, eos_id, pad_id       int or None
    tokenizer.save(directory)              load_tokenizer(directory) reads it
    ```

    Example:

    >>> from tfnorm.checkpoints import load_tokenizer
    >>> tokenizer = load_tokenizer("bytes")
    >>> tokenizer.decode(tokenizer.encode("héllo"))
    'héllo'

    Attributes:
        vocab_size: int, ids run from 0 to `vocab_size - 1`.
        bos_id, eos_id, pad_id: int or None, the begin-of-text, end-of-text
            and padding ids.
    """

    vocab_size = 0
    bos_id = None
    eos_id = None
    pad_id = None

    def encode(self, text, add_special_tokens=True):
        """The ids of `text` (str), int32 `(n,)`; with `add_special_tokens`,
        those the tokenizer adds around a text (a BOS id, for Llama's)."""
        raise NotImplementedError

    def decode(self, ids, skip_special_tokens=True):
        """The text of `ids` (a sequence or array of ints)."""
        raise NotImplementedError

    def save(self, directory):
        """Writes the tokenizer's files into `directory`; returns their names."""
        raise NotImplementedError

    def encode_batch(self, texts, add_special_tokens=True):
        """`(ids, padding_mask)` for several texts, padded on the right with
        `pad_id` (or 0), int32 `(batch, longest)` each."""
        encoded = [self.encode(text, add_special_tokens) for text in texts]
        longest = max([len(ids) for ids in encoded] + [1])
        pad = self.pad_id if self.pad_id is not None else 0
        ids = np.full((len(encoded), longest), pad, np.int32)
        mask = np.zeros((len(encoded), longest), np.int32)
        for row, values in enumerate(encoded):
            ids[row, : len(values)] = values
            mask[row, : len(values)] = 1
        return ids, mask

    def __repr__(self):
        return (
            f"{type(self).__name__}(vocab_size={self.vocab_size}, "
            f"bos_id={self.bos_id}, eos_id={self.eos_id}, pad_id={self.pad_id})"
        )
