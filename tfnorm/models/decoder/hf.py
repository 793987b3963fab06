"""`decoder_from_hf`: a Hugging Face causal LM (Llama, Mistral, Qwen2, GPT-2) as a tfnorm decoder.

The checkpoint is read with `tfnorm.checkpoints` (no PyTorch, no
transformers): config.json gives the architecture, which `build_decoder`
builds, and each safetensors tensor is copied into the weight of the same
role, reshaped to the layout tfnorm keeps (keras-hub's; see
`TransformerDecoderBlock`).
"""

from __future__ import annotations

import os

from tfnorm._keras import global_policy_name, set_global_policy
from tfnorm.checkpoints import CheckpointError, HFConfig, SafetensorsReader
from tfnorm.models.checkpoint_copy import copy_tensor
from tfnorm.models.decoder.builders import build_decoder
from tfnorm.models.decoder.hf_layout import BUFFER_SUFFIXES, tensor_places

#: GPT-2 `activation_function` -> tfnorm `feed_forward`.
_GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
_LLAMA_FAMILY = ("llama", "mistral", "qwen2")
_DTYPES = ("float32", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")


def _rope_scaling(config, max_len):
    rope = dict(config.rope)
    kind = rope.pop("rope_type")
    rope.pop("rope_theta")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        config.refuse(
            "partial_rotary_factor",
            rope["partial_rotary_factor"],
            "tfnorm rotates every feature of a head",
        )
    if kind == "default":
        return None
    scaling = {"rope_type": kind, "factor": float(rope["factor"])}
    if kind == "llama3":
        for key in ("low_freq_factor", "high_freq_factor"):
            scaling[key] = float(rope[key])
    if kind in ("llama3", "dynamic"):
        scaling["original_max_position_embeddings"] = int(
            rope.get("original_max_position_embeddings")
            or config["max_position_embeddings"]
        )
    return scaling


def _llama_options(config, max_len):
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim")
    if head_dim is not None and head_dim * heads != d_model:
        config.refuse(
            "head_dim",
            head_dim,
            "tfnorm's decoder uses heads of width hidden_size / "
            f"num_attention_heads = {d_model // heads}",
        )
    if config["hidden_act"] != "silu":
        config.refuse(
            "hidden_act", config["hidden_act"], "tfnorm's SwiGLU gates with silu only"
        )
    max_len = max_len or config["max_position_embeddings"]
    _check_window(config, max_len)
    attention_bias = bool(config.get("attention_bias", False))
    if config.model_type == "qwen2":
        attention_bias = "qkv"
    return {
        "num_layers": config["num_hidden_layers"],
        "d_model": d_model,
        "num_heads": heads,
        "dff": config["intermediate_size"],
        "vocab_size": config["vocab_size"],
        "max_len": max_len,
        "preset": "llama",
        "num_kv_heads": config.get("num_key_value_heads") or heads,
        "rope_max_wavelength": config.rope["rope_theta"],
        "rope_scaling": _rope_scaling(config, max_len),
        "epsilon": float(config["rms_norm_eps"]),
        "tie_embeddings": bool(config["tie_word_embeddings"]),
        "attention_bias": attention_bias,
        "ffn_bias": bool(config.get("mlp_bias", False)),
        "dropout_rate": 0.0,
        "attention_dropout": float(config.get("attention_dropout", 0.0)),
    }


def _check_window(config, max_len):
    """A sliding window shorter than the context changes the attention."""
    if config.model_type == "qwen2" and not config["use_sliding_window"]:
        return
    window = config.get("sliding_window")
    if window is not None and window < max_len:
        config.refuse(
            "sliding_window",
            window,
            "tfnorm's attention sees the whole context; a sliding window "
            f"shorter than max_len={max_len} is not computed (pass a max_len "
            "no longer than the window)",
        )


def _gpt2_options(config, max_len):
    activation = config["activation_function"]
    if activation not in _GPT2_ACTIVATIONS:
        config.refuse(
            "activation_function",
            activation,
            f"tfnorm computes {', '.join(_GPT2_ACTIVATIONS)}",
        )
    for key, plain in (
        ("scale_attn_weights", True),
        ("scale_attn_by_inverse_layer_idx", False),
    ):
        if config[key] != plain:
            config.refuse(key, config[key], "tfnorm's attention has no such option")
    positions = config["n_positions"]
    if max_len is not None and max_len > positions:
        config.refuse(
            "n_positions", positions, f"max_len={max_len} exceeds the position table"
        )
    d_model = config["n_embd"]
    return {
        "num_layers": config["n_layer"],
        "d_model": d_model,
        "num_heads": config["n_head"],
        "dff": config["n_inner"] or 4 * d_model,
        "vocab_size": config["vocab_size"],
        "max_len": max_len or positions,
        "position_table": positions,
        "preset": "gpt2",
        "feed_forward": _GPT2_ACTIVATIONS[activation],
        "epsilon": float(config["layer_norm_epsilon"]),
        "tie_embeddings": True,
        "dropout_rate": float(config.get("resid_pdrop", 0.1)),
        "attention_dropout": float(config.get("attn_pdrop", 0.1)),
    }


def _options(config, max_len):
    if config.model_type in _LLAMA_FAMILY:
        return "llama", _llama_options(config, max_len)
    if config.model_type == "gpt2":
        return "gpt2", _gpt2_options(config, max_len)
    config.refuse(
        "model_type",
        config.model_type,
        "decoder_from_hf converts causal LMs (llama, mistral, qwen2, gpt2); "
        "read a BERT checkpoint with tfnorm.models.encoder_from_hf",
    )


def _prefix(reader, family):
    first = (
        "transformer.wte.weight" if family == "gpt2" else "model.embed_tokens.weight"
    )
    if first in reader:
        return first.split(".")[0] + "."
    return ""


def _build(options, max_len, dtype):
    options = dict(options)
    if dtype is not None and dtype not in _DTYPES:
        raise CheckpointError(
            f"decoder_from_hf builds in {', '.join(_DTYPES)}. Received: dtype={dtype!r}"
        )
    table = options.pop("max_len")
    before = global_policy_name()
    if dtype is not None:
        set_global_policy(dtype)
    try:
        model = build_decoder(
            options.pop("num_layers"),
            options.pop("d_model"),
            options.pop("num_heads"),
            options.pop("dff"),
            vocab_size=options.pop("vocab_size"),
            max_len=table,
            **options,
        )
    finally:
        set_global_policy(before)
    model.max_len = max_len
    return model


def _copy_in(model, reader, family, source):
    places = tensor_places(model, family, _prefix(reader, family))
    used, gammas = set(), set()
    for place in places:
        copy_tensor(
            reader,
            place.key,
            place.variable,
            shape=place.shape,
            reason=f"{source}/config.json",
            transpose=place.transpose,
            part=place.part,
        )
        used.add(place.key)
        if "gamma" in place.variable.name and place.key.endswith(".weight"):
            gammas.add(place.key[: -len("weight")] + "bias")
    for key in reader.keys():
        known = key.endswith(BUFFER_SUFFIXES) or key == "lm_head.weight"
        # A norm chosen without a bias (`norm="rms"` over LayerNorms)
        # leaves the checkpoint's norm biases out, by request.
        if key not in used and not known and key not in gammas:
            raise CheckpointError(
                f"{reader.file_of(key)}: tensor {key!r} has no place in tfnorm's "
                "decoder (an option config.json does not declare?)."
            )


def hf_decoder_arguments(path, *, max_len=None, norm=None, dropout_rate=None):
    """`(arguments, max_len)`: the `build_decoder` keyword arguments of the
    checkpoint in `path` (JSON-ready; `max_len` is the position table's
    length) and the context the model takes. `norm` (a `get_norm` name)
    replaces the family's norm, `dropout_rate` its dropout; see
    `decoder_from_hf`."""
    config = HFConfig.read(os.fspath(path))
    _, options = _options(config, max_len)
    max_len = options.pop("max_len")
    table = options.pop("position_table", max_len)
    if norm is not None:
        options["norm"] = norm
    if dropout_rate is not None:
        # Every dropout layer at that rate, as `build_decoder` does with
        # `dropout_rate` alone (the attention's too).
        options.update(dropout_rate=dropout_rate, attention_dropout=None)
    return {**options, "max_len": table}, max_len


def decoder_from_hf(path, *, max_len=None, dtype=None, norm=None, dropout_rate=None):
    """A Hugging Face causal LM checkpoint as a tfnorm decoder, weights and all.

    Reads `config.json` and the safetensors weights (one file or shards;
    float32, float16 or bfloat16) of a Llama, Mistral, Qwen2 or GPT-2
    checkpoint directory, builds the `tfnorm.build_decoder` model of the
    same architecture and copies every weight: its logits equal
    `transformers`' on the same (right-padded) batch, and `tfnorm.generate`
    and `tfnorm train` work on it. No PyTorch or transformers is needed.

    ```
    config.json                       build_decoder option
    hidden_size, intermediate_size    d_model, dff
    num_attention_heads / _key_value  num_heads, num_kv_heads (GQA)
    rms_norm_eps / layer_norm_epsilon epsilon
    rope_theta, rope_scaling          rope_max_wavelength, rope_scaling
                                      (linear, dynamic, llama3)
    attention_bias, mlp_bias          attention_bias, ffn_bias ("qkv": Qwen2)
    tie_word_embeddings               tie_embeddings
    activation_function (GPT-2)       feed_forward
    ```

    Example:

    ```python
    model = tfnorm.models.decoder_from_hf("TinyLlama-1.1B", max_len=512)
    tokens = tfnorm.generate(model, prompt_ids, max_new_tokens=20)
    ```

    Args:
        path: str, the checkpoint directory (`save_pretrained`'s layout).
        max_len: int or None, the longest sequence the model takes.
            Defaults to `max_position_embeddings` (`n_positions` for GPT-2,
            whose position table sets the limit).
        dtype: None or a Keras dtype policy name (`"float32"`,
            `"bfloat16"`, `"mixed_bfloat16"`, ...) to build the model in.
            Defaults to the global policy.
        norm: None or a `tfnorm.get_norm` name to build every norm with
            instead of the family's (`"rms"` over GPT-2's LayerNorms): each
            norm's scale is copied; a bias the new norm has no place for is
            left out (so outputs change: this starts a fine-tune, it is not
            a conversion). Defaults to None, the checkpoint's norms.
        dropout_rate: None or a float in [0, 1), the rate of every dropout
            layer (embeddings, attention, residual branches) instead of the
            checkpoint's (GPT-2's `resid_pdrop`/`attn_pdrop`, Llama's
            `attention_dropout`); it acts in training only. Defaults to
            None, the checkpoint's.

    Returns:
        A `tfnorm.models.DecoderModel`.

    Raises:
        CheckpointError: one line naming the file and the key or setting:
            what `tfnorm.checkpoints` refuses (missing files, PyTorch-only
            weights, damaged headers, a missing shard, unknown
            `model_type` or RoPE scaling), a tensor whose shape disagrees
            with config.json, and options tfnorm does not compute (a sliding
            window shorter than `max_len`, another activation, a `head_dim`
            other than `hidden_size / num_attention_heads`).
    """
    path = os.fspath(path)
    family = _options(HFConfig.read(path), max_len)[0]
    options, max_len = hf_decoder_arguments(
        path, max_len=max_len, norm=norm, dropout_rate=dropout_rate
    )
    reader = SafetensorsReader(path)
    model = _build(options, max_len, dtype)
    with reader:
        _copy_in(model, reader, family, path)
    return model
