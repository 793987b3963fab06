"""`HFTokenizer`: a Hugging Face `tokenizer.json` as a `Tokenizer` (Rust `tokenizers`)."""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm.checkpoints.errors import CheckpointError
from tfnorm.checkpoints.tokenizer import Tokenizer

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
GENERATION_CONFIG = "generation_config.json"
_SPECIAL = ("bos", "eos", "pad")


def _read_json(path):
    """The JSON object in `path`, or {} when there is no such file."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError) as error:
        raise CheckpointError(f"{path}: cannot read it as JSON ({error}).") from None
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: not a JSON object.")
    return value


def _token_text(value):
    # tokenizer_config.json writes a special token as its text, or as an
    # AddedToken dict whose "content" is the text.
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _first_id(value):
    # generation_config.json may list several end-of-text ids.
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, int) else None


class HFTokenizer(Tokenizer):
    """A Hugging Face fast tokenizer (`tokenizer.json`) behind tfnorm's `Tokenizer`.

    The special ids come from `tokenizer_config.json` (`bos_token`,
    `eos_token`, `pad_token`, looked up in the vocabulary), else from
    `generation_config.json` or `config.json` (`bos_token_id`, ...; the
    first of a list of end-of-text ids). `encode` with
    `add_special_tokens=True` adds what the tokenizer's post-processor adds
    (Llama's BOS; nothing for GPT-2), as `transformers` does.

    Example:

    ```python
    tokenizer = HFTokenizer.from_directory("tiny-llama")
    ids = tokenizer.encode("Grüße")
    tokenizer.decode(ids)               # "Grüße"
    ```

    Args:
        tokenizer: a `tokenizers.Tokenizer`.
        bos_id, eos_id, pad_id: int or None.
        special_tokens: dict or None, `tokenizer_config.json`'s entries to
            write back on `save` (`bos_token`, ...).
    """

    def __init__(
        self, tokenizer, bos_id=None, eos_id=None, pad_id=None, special_tokens=None
    ):
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.bos_id, self.eos_id, self.pad_id = bos_id, eos_id, pad_id
        self.special_tokens = dict(special_tokens or {})

    @classmethod
    def from_directory(cls, directory):
        """Reads `tokenizer.json` and the special ids from `directory`.

        Raises:
            CheckpointError: no readable `tokenizer.json`, naming the file.
        """
        from tokenizers import Tokenizer as RustTokenizer

        directory = os.fspath(directory)
        path = os.path.join(directory, TOKENIZER_FILE)
        if not os.path.isfile(path):
            raise CheckpointError(f"{path}: no such file; the tokenizer is missing.")
        try:
            tokenizer = RustTokenizer.from_file(path)
        except Exception as error:  # tokenizers raises plain Exceptions
            raise CheckpointError(f"{path}: not a tokenizers file ({error}).") from None
        settings = _read_json(os.path.join(directory, TOKENIZER_CONFIG))
        fallbacks = [
            _read_json(os.path.join(directory, GENERATION_CONFIG)),
            _read_json(os.path.join(directory, "config.json")),
        ]
        ids, kept = {}, {}
        for kind in _SPECIAL:
            text = _token_text(settings.get(f"{kind}_token"))
            found = tokenizer.token_to_id(text) if text is not None else None
            if found is not None:
                kept[f"{kind}_token"] = text
            for source in fallbacks:
                found = (
                    found
                    if found is not None
                    else _first_id(source.get(f"{kind}_token_id"))
                )
            ids[f"{kind}_id"] = found
        return cls(tokenizer, special_tokens=kept, **ids)

    def encode(self, text, add_special_tokens=True):
        ids = self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids
        return np.asarray(ids, np.int32)

    def decode(self, ids, skip_special_tokens=True):
        ids = [int(i) for i in np.asarray(ids).reshape(-1)]
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def save(self, directory):
        """Writes `tokenizer.json` and a `tokenizer_config.json` that
        `transformers.AutoTokenizer` reads (a `PreTrainedTokenizerFast`)."""
        os.makedirs(directory, exist_ok=True)
        self.tokenizer.save(os.path.join(directory, TOKENIZER_FILE))
        settings = {"tokenizer_class": "PreTrainedTokenizerFast"}
        for kind in _SPECIAL:
            token_id = getattr(self, f"{kind}_id")
            text = self.special_tokens.get(f"{kind}_token")
            if text is None and token_id is not None:
                text = self.tokenizer.id_to_token(token_id)
            if text is not None:
                settings[f"{kind}_token"] = text
        path = os.path.join(directory, TOKENIZER_CONFIG)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(settings, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        return [TOKENIZER_FILE, TOKENIZER_CONFIG]
