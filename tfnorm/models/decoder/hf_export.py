"""`decoder_to_hf`: a tfnorm decoder as a Hugging Face checkpoint (Llama, Qwen2, GPT-2)."""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm.checkpoints import CheckpointError, save_safetensors
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm
from tfnorm.models.decoder.hf_layout import tensor_places, to_tensor
from tfnorm.models.decoder.model import DecoderModel
from tfnorm.models.decoder.options import has_bias

#: tfnorm `feed_forward` -> GPT-2 `activation_function`.
_GPT2_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}


def _refuse(option, value, family="Hugging Face"):
    raise CheckpointError(
        f"decoder_to_hf: {family} has no counterpart for this decoder's "
        f"`{option}`. Received: {option}={value!r}"
    )


def _common_checks(model):
    if not isinstance(model, DecoderModel) or not model.blocks:
        _refuse("model", type(model).__name__)
    first = model.blocks[0].get_config()
    for other in model.blocks[1:]:
        for key, value in other.get_config().items():
            if key != "name" and first.get(key) != value:
                _refuse(f"{other.name}.{key}", value)
    block = model.blocks[0]
    if block.norm_position != "pre":
        _refuse("norm_position", block.norm_position)
    norm = block.attention_norm
    if type(norm) not in (RMSNorm, LayerNormalization):
        _refuse("norm", type(norm).__name__)
    for option, plain in (("partial", None), ("zero_centered_gamma", False)):
        if getattr(norm, option, plain) != plain:
            _refuse(f"norm.{option}", getattr(norm, option))
    # Hugging Face's LayerNorm has a gain and a bias, its RMSNorm a gain only.
    center = isinstance(norm, LayerNormalization)
    if getattr(norm, "center", center) != center:
        _refuse("norm.center", norm.center)
    if getattr(norm, "scale", True) is not True:
        _refuse("norm.scale", norm.scale)
    final = model.optional_layer("final_norm")
    if final is None:
        _refuse("final_norm", False)
    if type(final) is not type(norm) or final.epsilon != norm.epsilon:
        _refuse("final_norm.epsilon", final.epsilon)
    return block


def _llama_config(model, block):
    if model.optional_layer("position_embedding") is not None:
        _refuse("position_embedding", "learned", "Llama")
    if block.feed_forward != "swiglu":
        _refuse("feed_forward", block.feed_forward, "Llama")
    if type(block.attention_norm) is not RMSNorm:
        _refuse("norm", type(block.attention_norm).__name__, "Llama")
    if block.rope_max_wavelength is None:
        _refuse("position_embedding", "none", "Llama")
    qkv, output = has_bias(block, "query"), has_bias(block, "attention_output")
    ffn = has_bias(block, "ffn_inner")
    qwen2 = qkv and not output and not ffn
    if qkv != output and not qwen2:
        _refuse("attention_bias", block.attention_bias, "Llama or Qwen2")
    scaling = dict(block.rope_scaling or {})
    max_positions = model.max_len
    if scaling.get("rope_type") == "dynamic":
        # transformers' dynamic RoPE grows past max_position_embeddings.
        max_positions = int(scaling.pop("original_max_position_embeddings"))
    config = {
        "architectures": ["Qwen2ForCausalLM" if qwen2 else "LlamaForCausalLM"],
        "model_type": "qwen2" if qwen2 else "llama",
        "hidden_size": block.d_model,
        "intermediate_size": block.dff,
        "num_attention_heads": block.num_heads,
        "num_key_value_heads": block.num_kv_heads,
        "head_dim": block.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": max_positions,
        "rms_norm_eps": block.attention_norm.epsilon,
        "rope_theta": block.rope_max_wavelength,
        "rope_scaling": scaling or None,
        "tie_word_embeddings": model.optional_layer("lm_head") is None,
    }
    if qwen2:
        config.update(use_sliding_window=False, sliding_window=None)
    else:
        config.update(attention_bias=qkv, mlp_bias=ffn)
    return "llama", "model.", config


def _gpt2_config(model, block):
    if block.rope_max_wavelength is not None:
        _refuse("rope_max_wavelength", block.rope_max_wavelength, "GPT-2")
    if block.feed_forward not in _GPT2_ACTIVATIONS:
        _refuse("feed_forward", block.feed_forward, "GPT-2")
    if block.num_kv_heads != block.num_heads:
        _refuse("num_kv_heads", block.num_kv_heads, "GPT-2")
    for name in ("query", "attention_output", "ffn_inner"):
        if not has_bias(block, name):
            _refuse("use_bias", False, "GPT-2")
    if model.optional_layer("lm_head") is not None:
        _refuse("tie_embeddings", False, "GPT-2")
    config = {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "n_embd": block.d_model,
        "n_layer": len(model.blocks),
        "n_head": block.num_heads,
        "n_inner": block.dff,
        "n_positions": model.get_layer("position_embedding").max_len,
        "activation_function": _GPT2_ACTIVATIONS[block.feed_forward],
        "layer_norm_epsilon": block.attention_norm.epsilon,
        "tie_word_embeddings": True,
    }
    return "gpt2", "transformer.", config


def _tensors(model, family, prefix):
    parts = {}
    for place in tensor_places(model, family, prefix):
        value = np.asarray(place.variable.numpy(), np.float32)
        parts.setdefault(place.key, []).append(to_tensor(place, value))
    return {
        key: values[0] if len(values) == 1 else np.concatenate(values, -1)
        for key, values in parts.items()
    }


def decoder_to_hf(model, path, *, tokenizer=None):
    """Writes a tfnorm decoder as a Hugging Face checkpoint directory.

    The reverse of `decoder_from_hf`: `config.json` and `model.safetensors`
    (float32) that `transformers.AutoModelForCausalLM.from_pretrained(path)`
    loads with the same logits. Llama's layout (Pre-LN RMSNorm, RoPE with
    any scaling, SwiGLU, grouped-query attention, biases on all attention
    projections or none) is written as `llama`; biases on the query, key
    and value projections only as `qwen2`; GPT-2's (Pre-LN LayerNorm,
    learned positions, GELU or ReLU, biases, tied head) as `gpt2`. With a
    `tokenizer` its files are written too, and its special ids go into
    config.json and generation_config.json.

    Example:

    ```python
    model = tfnorm.build_decoder(2, 32, 4, 64, vocab_size=300, max_len=64)
    tfnorm.models.decoder_to_hf(model, "tiny-llama", tokenizer=tokenizer)
    # transformers.AutoModelForCausalLM.from_pretrained("tiny-llama")
    ```

    Args:
        model: a `tfnorm.models.DecoderModel`.
        path: str, the directory (created; files in it are replaced).
        tokenizer: a `tfnorm.checkpoints.Tokenizer` or None.

    Returns:
        The names of the files written.

    Raises:
        CheckpointError: naming the option and value no Hugging Face layout
            has (Post-LN, Sandwich-LN or DeepNorm, DyT or another norm, a
            partial RMSNorm, blocks that differ, biases on some attention
            projections only but not Qwen2's); nothing is written then.
    """
    block = _common_checks(model)
    if isinstance(block.attention_norm, LayerNormalization):
        family, prefix, config = _gpt2_config(model, block)
    else:
        family, prefix, config = _llama_config(model, block)
    config = {
        **config,
        "num_hidden_layers": len(model.blocks),
        "vocab_size": model.vocab_size,
        "torch_dtype": "float32",
    }
    if family == "gpt2":
        config.pop("num_hidden_layers")
    tensors = _tensors(model, family, prefix)
    special = {}
    if tokenizer is not None:
        for kind in ("bos", "eos", "pad"):
            if getattr(tokenizer, f"{kind}_id") is not None:
                special[f"{kind}_token_id"] = getattr(tokenizer, f"{kind}_id")
    path = os.fspath(path)
    names = save_safetensors(tensors, path)
    for name, content in (
        ("config.json", {**config, **special}),
        ("generation_config.json", special),
    ):
        with open(os.path.join(path, name), "w", encoding="utf-8") as handle:
            json.dump(content, handle, indent=2, sort_keys=True)
            handle.write("\n")
        names.append(name)
    if tokenizer is not None:
        names += tokenizer.save(path)
    return names
