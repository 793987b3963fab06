"""Where each tensor of a Hugging Face causal LM sits in a tfnorm decoder, both ways.

One table per family, `tensor_places(model, family, prefix)`: a list of
`Place(key, shape, variable, transpose, part)`, read as "the checkpoint's
tensor `key` (shape `shape`), transposed if `transpose`, columns `part` of
it, is `variable` reshaped". `decoder_from_hf` copies along it,
`decoder_to_hf` copies back, so the two cannot drift apart.

Layouts: `nn.Linear` (Llama, Mistral, Qwen2) stores `(out, in)`, hence the
transpose to a Keras kernel `(in, ...)`; GPT-2's `Conv1D` stores `(in, out)`
and fuses the query, key and value projections in `c_attn` (three column
blocks). Attention kernels are `(d_model, heads, head_dim)` in tfnorm and
`(heads * head_dim, d_model)` in the checkpoint: row `n * head_dim + i` is
head `n`, feature `i`, so a reshape after the transpose matches them.
"""

from __future__ import annotations

import collections

import numpy as np

Place = collections.namedtuple("Place", "key shape variable transpose part")

#: Tensors a checkpoint may hold that are not weights (rotary tables,
#: GPT-2's causal-mask buffers).
BUFFER_SUFFIXES = (".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias")


def _linear(places, key, layer, shape):
    """A `nn.Linear` `(out, in)` weight and, if the layer has one, its bias."""
    places.append(Place(key + ".weight", shape, layer.kernel, True, None))
    if getattr(layer, "bias", None) is not None:
        places.append(Place(key + ".bias", (shape[0],), layer.bias, False, None))


def _norm(places, key, norm, d_model):
    places.append(Place(key + ".weight", (d_model,), norm.gamma, False, None))
    if getattr(norm, "beta", None) is not None:
        places.append(Place(key + ".bias", (d_model,), norm.beta, False, None))


def _llama_places(model, prefix):
    places = []
    embedding = model.get_layer("token_embedding")
    vocab, d = embedding.vocab_size, embedding.d_model
    places.append(
        Place(
            prefix + "embed_tokens.weight",
            (vocab, d),
            embedding.embeddings,
            False,
            None,
        )
    )
    for index, block in enumerate(model.blocks):
        key = f"{prefix}layers.{index}."
        heads, kv, dff = block.num_heads, block.num_kv_heads, block.dff
        h = block.head_dim
        _norm(places, key + "input_layernorm", block.attention_norm, d)
        _norm(places, key + "post_attention_layernorm", block.ffn_norm, d)
        for name, layer, width in (
            ("q_proj", block.query, heads * h),
            ("k_proj", block.key, kv * h),
            ("v_proj", block.value, kv * h),
            ("o_proj", block.attention_output, d),
        ):
            size = (width, d) if name != "o_proj" else (d, heads * h)
            _linear(places, key + "self_attn." + name, layer, size)
        _linear(places, key + "mlp.gate_proj", block.ffn_gate, (dff, d))
        _linear(places, key + "mlp.up_proj", block.ffn_inner, (dff, d))
        _linear(places, key + "mlp.down_proj", block.ffn_output, (d, dff))
    _norm(places, prefix + "norm", model.get_layer("final_norm"), d)
    head = model.optional_layer("lm_head")
    if head is not None:
        places.append(Place("lm_head.weight", (vocab, d), head.kernel, True, None))
    return places


def _gpt2_places(model, prefix):
    places = []
    embedding = model.get_layer("token_embedding")
    positions = model.get_layer("position_embedding")
    vocab, d = embedding.vocab_size, embedding.d_model
    places.append(
        Place(prefix + "wte.weight", (vocab, d), embedding.embeddings, False, None)
    )
    places.append(
        Place(
            prefix + "wpe.weight",
            (positions.max_len, d),
            positions.embeddings,
            False,
            None,
        )
    )
    for index, block in enumerate(model.blocks):
        key = f"{prefix}h.{index}."
        _norm(places, key + "ln_1", block.attention_norm, d)
        _norm(places, key + "ln_2", block.ffn_norm, d)
        for number, layer in enumerate((block.query, block.key, block.value)):
            part = slice(number * d, (number + 1) * d)
            places.append(
                Place(key + "attn.c_attn.weight", (d, 3 * d), layer.kernel, False, part)
            )
            places.append(
                Place(key + "attn.c_attn.bias", (3 * d,), layer.bias, False, part)
            )
        for name, layer, shape in (
            ("attn.c_proj", block.attention_output, (d, d)),
            ("mlp.c_fc", block.ffn_inner, (d, block.dff)),
            ("mlp.c_proj", block.ffn_output, (block.dff, d)),
        ):
            places.append(
                Place(key + name + ".weight", shape, layer.kernel, False, None)
            )
            places.append(
                Place(key + name + ".bias", (shape[1],), layer.bias, False, None)
            )
    _norm(places, prefix + "ln_f", model.get_layer("final_norm"), d)
    return places


def tensor_places(model, family, prefix):
    """The `Place`s of every weight of `model` for `family` (`"llama"` for
    the Llama family, `"gpt2"`), with checkpoint keys under `prefix`
    (`"model."`, `"transformer."` or `""`)."""
    if family == "gpt2":
        return _gpt2_places(model, prefix)
    return _llama_places(model, prefix)


def to_tensor(place, value):
    """`place.variable`'s value `value` laid out as (its part of) the
    checkpoint tensor."""
    shape = place.shape
    if place.part is not None:
        width = place.part.stop - place.part.start
        shape = shape[:-1] + (width,)
    if place.transpose:
        return np.reshape(value, shape[::-1]).T
    return np.reshape(value, shape)
