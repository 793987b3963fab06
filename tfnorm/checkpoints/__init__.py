"""Hugging Face checkpoints without Keras: safetensors, config.json, tokenizers.

The low level under `tfnorm.models.decoder_from_hf` and friends, usable on
its own: `SafetensorsReader` streams the tensors of a file, a directory or a
sharded checkpoint (float16 and bfloat16 widened to float32),
`save_safetensors` writes one, `HFConfig` reads `config.json` with each
family's defaults and refuses what tfnorm does not compute, and
`load_tokenizer` gives a `Tokenizer`: tfnorm's bytes or a `tokenizer.json`.
Every problem is a `CheckpointError` on one line naming the file or key.
"""

from __future__ import annotations

from tfnorm.checkpoints.byte_tokenizer import ByteTokenizer
from tfnorm.checkpoints.errors import CheckpointError
from tfnorm.checkpoints.hf_config import MODEL_TYPES, ROPE_TYPES, HFConfig
from tfnorm.checkpoints.hf_tokenizer import HFTokenizer
from tfnorm.checkpoints.load_tokenizer import load_tokenizer
from tfnorm.checkpoints.safetensors_reader import SafetensorsReader
from tfnorm.checkpoints.safetensors_writer import save_safetensors
from tfnorm.checkpoints.tokenizer import Tokenizer

__all__ = [
    "ByteTokenizer",
    "CheckpointError",
    "HFConfig",
    "HFTokenizer",
    "MODEL_TYPES",
    "ROPE_TYPES",
    "SafetensorsReader",
    "Tokenizer",
    "load_tokenizer",
    "save_safetensors",
]
