"""The readers of `TrainConfig`'s own kinds of values: data paths, a
checkpoint to start from, a tokenizer, a norm spec, `MODULE:FUNCTION`, a
loss name, a precision mode. Like `tfnorm.settings.readers`, each takes
`(key, value)` and returns the value checked or raises `ValueError` naming
both. No TensorFlow at import time.
"""

from __future__ import annotations

import os

from tfnorm._checks import precision_mode
from tfnorm.choices import NORM_NAMES, spelled_out
from tfnorm.settings.readers import existing_file, path_value


def data_paths(key, value):
    """A file; or, for a language model, several files or a directory (the
    checks across settings refuse those for the classifier). One path in a
    list is that path."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if not values:
        raise ValueError(f"`{key}` must name a file. Received: {key}={value!r}")
    paths = [path_value(key, one) for one in values]
    for path in paths:
        if not os.path.isdir(path):
            existing_file(key, path)
    return paths[0] if len(paths) == 1 else paths


data_paths.many = True


def hf_checkpoint(key, value):
    """A tfnorm language-model run (its `language_model.json`), or a Hugging
    Face causal-LM checkpoint directory, by its `config.json`
    (read here, without TensorFlow: an unknown `model_type` is refused
    before anything runs)."""
    path = path_value(key, value)
    if os.path.isfile(os.path.join(path, "language_model.json")):
        return path  # a tfnorm language-model run, read when the run loads
    if not os.path.isfile(os.path.join(path, "config.json")):
        reason = "no such directory" if not os.path.isdir(path) else "no config.json"
        raise ValueError(
            f"`{key}` must name a Hugging Face checkpoint directory or a tfnorm "
            f"language-model run ({reason}). Received: {key}={value!r}"
        )
    from tfnorm.checkpoints.errors import CheckpointError
    from tfnorm.checkpoints.hf_config import HFConfig

    try:
        model_type = HFConfig.read(path).model_type
    except CheckpointError as error:
        raise ValueError(f"`{key}`: {error} Received: {key}={value!r}") from None
    if model_type == "bert":
        raise ValueError(
            f"`{key}` must be a causal language model (llama, mistral, qwen2, "
            f"gpt2); {path} holds a bert encoder. Received: {key}={value!r}"
        )
    return path


#: `bpe:N`'s largest N: ids that stay a small embedding table. The smallest
#: is the byte vocabulary (`byte_text.VOCAB_SIZE`: the 256 byte symbols and
#: one end-of-text token).
MAX_BPE_SIZE = 2**20


def tokenizer_spec(key, value):
    """`bytes`, `bpe:N` (N from the byte vocabulary's size to `MAX_BPE_SIZE`)
    or the path of a tokenizer.json (or of a directory holding one)."""
    if value == "bytes":
        return value
    if isinstance(value, str) and value.startswith("bpe:"):
        from tfnorm.training.data.byte_text import VOCAB_SIZE

        low, high = VOCAB_SIZE, MAX_BPE_SIZE
        size = value[4:]
        if not size.isdigit() or not low <= int(size) <= high:
            raise ValueError(
                f"`{key}` bpe:N needs a whole N in [{low}, {high}] (the token "
                f"ids of the byte-level BPE). Received: {key}={value!r}"
            )
        return f"bpe:{int(size)}"
    path = path_value(key, value)
    found = path if os.path.basename(path) == "tokenizer.json" else None
    found = found or os.path.join(path, "tokenizer.json")
    if not os.path.isfile(found):
        raise ValueError(
            f"`{key}` must be bytes, bpe:N, or a tokenizer.json or a directory "
            f"holding one (no such file: {found}). Received: {key}={value!r}"
        )
    return path


def norm_spec(key, value):
    """A norm name or layer config, by its form only: `resolve` asks
    `get_norm` (importing the layers)."""
    if not isinstance(value, (str, dict)) or not value:
        raise ValueError(
            f"`{key}` must be a norm name ({spelled_out(NORM_NAMES)}) or a layer "
            f"config dict. Received: {key}={value!r}"
        )
    return value


def function_spec(key, value):
    """`MODULE:FUNCTION`, by its form only: `train` imports the module
    (running user code)."""
    if not isinstance(value, str) or ":" not in value.strip(":"):
        raise ValueError(
            f"`{key}` must be MODULE:FUNCTION (a module name or path/to/file.py, "
            f"then the function's name). Received: {key}={value!r}"
        )
    return value.strip()


def loss_name(key, value):
    """The name of a Keras loss (looked up when the model is compiled)."""
    if not isinstance(value, str) or not value.strip().isidentifier():
        raise ValueError(
            f"`{key}` must be the name of a Keras loss, e.g. "
            f"sparse_categorical_crossentropy. Received: {key}={value!r}"
        )
    return value.strip()


def precision(key, value):
    """A mixed-precision mode (`tfnorm._checks.precision_mode`)."""
    return precision_mode(value, name=key)
