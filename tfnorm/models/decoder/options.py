"""Options of `TransformerDecoderBlock`: feed-forward kinds, head counts, RoPE, projections."""

from __future__ import annotations

from tfnorm._checks import check_number, check_positive_int
from tfnorm._keras import EinsumDense, keras, tf
from tfnorm.choices import DECODER_FEED_FORWARDS
from tfnorm.models.matrix_initializer import MatrixInitializer, kernel_initializer_copy

#: `feed_forward` choices: SwiGLU (LLaMA), exact GELU, GELU's tanh
#: approximation (GPT-2) and ReLU (declared where the CLI reads them
#: without TensorFlow).
FEED_FORWARDS = DECODER_FEED_FORWARDS

ACTIVATIONS = {
    "swiglu": tf.nn.silu,
    "gelu": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
    "relu": tf.nn.relu,
}

# Kernel numbers for seeded initializers (`seed + number`).
KERNELS = ("query", "key", "value", "attention_output", "ffn_inner", "ffn_output")


def check_num_kv_heads(num_heads, num_kv_heads):
    """`num_kv_heads` as an int (None means `num_heads`); it must divide `num_heads`."""
    if num_kv_heads is None:
        return num_heads
    num_kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(
            "`num_kv_heads` must divide `num_heads` (each key/value head "
            "serves num_heads // num_kv_heads query heads). Received: "
            f"num_heads={num_heads}, num_kv_heads={num_kv_heads}"
        )
    return num_kv_heads


def check_rope(rope_max_wavelength, d_model, num_heads):
    """`rope_max_wavelength` as a float > 1, or None; the head width must be even."""
    if rope_max_wavelength is None:
        return None
    rope_max_wavelength = check_number(
        "rope_max_wavelength", rope_max_wavelength, above=1.0
    )
    if (d_model // num_heads) % 2:
        raise ValueError(
            "Rotary embeddings rotate pairs of features: the head width "
            "d_model // num_heads must be even. Received: "
            f"d_model={d_model}, num_heads={num_heads}"
        )
    return rope_max_wavelength


#: `rope_scaling` types and the keys each needs besides `rope_type`, `factor`.
ROPE_SCALINGS = {
    "linear": (),
    "dynamic": ("original_max_position_embeddings",),
    "llama3": (
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
    ),
}


def check_rope_scaling(rope_scaling, rope_max_wavelength):
    """`rope_scaling` as a plain dict of numbers, or None (see
    `tfnorm.models.decoder.attention.rope_inverse_frequencies`)."""
    if rope_scaling is None:
        return None
    kind = rope_scaling.get("rope_type") if isinstance(rope_scaling, dict) else None
    if kind not in ROPE_SCALINGS:
        raise ValueError(
            "`rope_scaling` must be None or a dict with `rope_type` one of "
            f"{sorted(ROPE_SCALINGS)} and a `factor`. Received: "
            f"rope_scaling={rope_scaling!r}"
        )
    if rope_max_wavelength is None:
        raise ValueError(
            "`rope_scaling` scales rotary embeddings, which are off. Received: "
            f"rope_max_wavelength=None, rope_scaling={rope_scaling!r}"
        )
    needed = ("factor",) + ROPE_SCALINGS[kind]
    unknown = sorted(set(rope_scaling) - set(needed) - {"rope_type"})
    if unknown or not all(key in rope_scaling for key in needed):
        raise ValueError(
            f"`rope_scaling` of type {kind!r} takes exactly the keys "
            f"{['rope_type', *needed]}. Received: rope_scaling={rope_scaling!r}"
        )
    checked = {"rope_type": kind}
    for key in needed:
        name, value = f"rope_scaling.{key}", rope_scaling[key]
        if key == "original_max_position_embeddings":
            checked[key] = check_positive_int(name, value)
        else:
            checked[key] = check_number(name, value, above=0.0)
    if kind == "llama3" and checked["high_freq_factor"] <= checked["low_freq_factor"]:
        raise ValueError(
            "`rope_scaling.high_freq_factor` must exceed `low_freq_factor`. "
            f"Received: rope_scaling={rope_scaling!r}"
        )
    return checked


def check_attention_bias(value):
    """`attention_bias`: None (follow `use_bias`), True, False or `"qkv"`
    (query, key and value projections only, as Qwen2)."""
    if value is None or value == "qkv" or isinstance(value, bool):
        return value
    raise ValueError(
        "`attention_bias` must be None, True, False or 'qkv'. "
        f"Received: attention_bias={value!r}"
    )


def has_bias(block, name):
    """Whether `block`'s projection or Dense layer `name` has a bias."""
    if name.startswith("ffn"):
        return block.use_bias if block.ffn_bias is None else block.ffn_bias
    bias = block.use_bias if block.attention_bias is None else block.attention_bias
    if bias == "qkv":
        return name != "attention_output"
    return bias


def check_bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return value


def projection(block, name, equation, output_shape, bias_axes, matrix_shape):
    """An attention projection of `block`: an EinsumDense kernel drawn as
    the `matrix_shape` matrix it stands for, with kernel number `name`'s seed."""
    initializer = kernel_initializer_copy(block.kernel_initializer, KERNELS.index(name))
    return EinsumDense(
        equation,
        output_shape=output_shape,
        bias_axes=bias_axes if has_bias(block, name) else None,
        kernel_initializer=MatrixInitializer(initializer, matrix_shape),
        dtype=block.dtype_policy,
        name=name,
    )


def dense(block, units, name, index):
    """A Dense layer of `block`'s feed-forward network (kernel number `index`)."""
    return keras.layers.Dense(
        units,
        use_bias=has_bias(block, name),
        kernel_initializer=kernel_initializer_copy(block.kernel_initializer, index),
        dtype=block.dtype_policy,
        name=name,
    )
