"""`HFConfig`: a Hugging Face `config.json`, checked, with each family's defaults."""

from __future__ import annotations

import json
import os

from tfnorm.checkpoints.errors import CheckpointError

CONFIG_NAME = "config.json"

# What `transformers` assumes for a key a config.json leaves out, per
# `model_type`: only options that change the computation. Sizes have no
# default here: a config without them is refused, not read as a 7B model.
_DEFAULTS = {
    "llama": {
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "max_position_embeddings": 2048,
    },
    "mistral": {
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "sliding_window": 4096,
        "max_position_embeddings": 4096 * 32,
    },
    "qwen2": {
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "use_sliding_window": False,
        "max_position_embeddings": 32768,
    },
    "gpt2": {
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
        "n_inner": None,
        "n_positions": 1024,
        "tie_word_embeddings": True,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
    },
    "bert": {
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "type_vocab_size": 2,
        "max_position_embeddings": 512,
        "position_embedding_type": "absolute",
    },
}

#: The `model_type`s tfnorm converts.
MODEL_TYPES = tuple(_DEFAULTS)
#: RoPE scaling types tfnorm computes (`"default"` is none).
ROPE_TYPES = ("default", "linear", "dynamic", "llama3")
_ROPE_FAMILIES = ("llama", "mistral", "qwen2")


class HFConfig:
    """The options of a Hugging Face model, read from its `config.json`.

    `config[key]` is the file's value, or the family's default when the file
    leaves the key out (`rms_norm_eps` 1e-6 for Llama, `layer_norm_epsilon`
    1e-5 for GPT-2, ...); a key that has neither raises `CheckpointError`
    naming the file and the key. `rope` gives the rotary settings of the
    Llama family in one form whichever way the file writes them (`rope_theta`
    and `rope_scaling`, or transformers 5's `rope_parameters`).

    Example:

    ```python
    config = HFConfig.read("tiny-llama")     # the directory or config.json
    config.model_type, config["hidden_size"], config.rope["rope_type"]
    ```

    Args:
        values: dict, the parsed config.json.
        path: str, the file it came from (for messages).

    Raises:
        CheckpointError: one line naming the file: missing or not JSON, a
            `model_type` other than llama, mistral, qwen2, gpt2, bert, or a
            RoPE scaling type other than linear, dynamic, llama3.
    """

    def __init__(self, values, path=CONFIG_NAME):
        self.path = os.fspath(path)
        self.values = dict(values)
        model_type = self.values.get("model_type")
        if model_type not in _DEFAULTS:
            raise CheckpointError(
                f"{self.path}: tfnorm converts model_type {', '.join(MODEL_TYPES)}. "
                f"Received: model_type={model_type!r}"
            )
        self.model_type = model_type
        self.rope = self._rope() if model_type in _ROPE_FAMILIES else None

    @classmethod
    def read(cls, path):
        """The config of a checkpoint directory, or of a config.json file."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, CONFIG_NAME)
        try:
            with open(path, encoding="utf-8") as handle:
                values = json.load(handle)
        except OSError as error:
            raise CheckpointError(
                f"{path}: cannot read the file ({error.strerror})."
            ) from None
        except ValueError as error:
            raise CheckpointError(f"{path}: not valid JSON ({error}).") from None
        if not isinstance(values, dict):
            raise CheckpointError(f"{path}: not a JSON object.")
        return cls(values, path)

    def __contains__(self, key):
        return key in self.values or key in _DEFAULTS[self.model_type]

    def __getitem__(self, key):
        if key in self.values:
            return self.values[key]
        defaults = _DEFAULTS[self.model_type]
        if key in defaults:
            return defaults[key]
        raise CheckpointError(
            f"{self.path}: the config has no {key!r}, which a "
            f"{self.model_type} model needs."
        )

    def get(self, key, default=None):
        return self[key] if key in self else default

    def refuse(self, key, value, why):
        """Raises `CheckpointError` naming this file and `key=value`."""
        raise CheckpointError(f"{self.path}: {why}. Received: {key}={value!r}")

    def _rope(self):
        """`{"rope_type", "rope_theta", ...}` from either way of writing it."""
        if isinstance(self.values.get("rope_parameters"), dict):
            key, rope = "rope_parameters", dict(self.values["rope_parameters"])
        else:
            key, rope = "rope_scaling", dict(self.values.get("rope_scaling") or {})
        kind = rope.pop("rope_type", None) or rope.pop("type", None) or "default"
        rope.pop("type", None)
        if kind not in ROPE_TYPES:
            self.refuse(
                f"{key}.rope_type",
                kind,
                "tfnorm computes RoPE scaling types "
                f"{', '.join(ROPE_TYPES[1:])} (or none)",
            )
        rope["rope_type"] = kind
        rope.setdefault("rope_theta", self["rope_theta"])
        rope["rope_theta"] = float(rope["rope_theta"])
        if kind != "default" and "factor" not in rope:
            self.refuse(key, self.values.get(key), f"RoPE {kind!r} needs a `factor`")
        return rope
