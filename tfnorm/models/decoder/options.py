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
        bias_axes=bias_axes if block.use_bias else None,
        kernel_initializer=MatrixInitializer(initializer, matrix_shape),
        dtype=block.dtype_policy,
        name=name,
    )


def dense(block, units, name, index):
    """A Dense layer of `block`'s feed-forward network (kernel number `index`)."""
    return keras.layers.Dense(
        units,
        use_bias=block.use_bias,
        kernel_initializer=kernel_initializer_copy(block.kernel_initializer, index),
        dtype=block.dtype_policy,
        name=name,
    )
