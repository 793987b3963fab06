"""The fast and careful paths (`tfnorm.layers._ops.guarded`) under XLA: the
cond hands the backward pass row statistics and x, not x_hat (with x_hat
through the cond, tfnorm's LayerNormalization took 36 MiB where Keras's
takes 20, at this shape), and a Post-LN block's step keeps no more than
with Keras's LayerNormalization beyond what `_FULL_SIZE_ALLOWED` names.
Under `mixed_bfloat16` the cond takes the
bfloat16 input, casts it inside and makes the bfloat16 output: with the
casts outside, XLA wrote out a float32 copy of the input and a float32
output, and the forward pass ran at 1.21-1.29x Keras's (`make bench`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tfnorm
from tests.conftest import run_python
from tfnorm._keras import keras, tf

SHAPE = (32, 128, 256)
FULL_SIZE = 4 * 2**20  # bytes of one float32 tensor of SHAPE


def one_step(layer, in_block):
    """One XLA-compiled forward and backward pass through `layer`, alone or
    as the norm of a Post-LN block (dense, dropout, residual sum)."""
    x = tf.random.stateless_normal(SHAPE, seed=[1, 2])
    weights = tf.random.stateless_normal(SHAPE, seed=[3, 4])
    dense = keras.layers.Dense(SHAPE[-1])
    dropout = keras.layers.Dropout(0.1)
    dense.build(x.shape)
    layer.build(x.shape)

    @tf.function(jit_compile=True)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            if in_block:
                y = layer(x + dropout(dense(x), training=True))
            else:
                # Made inside the step, as a residual sum would be.
                y = layer(x * 2.0 + 1.0)
            loss = tf.reduce_sum(tf.sin(y) * weights)
        return tape.gradient(
            loss, [x] + dense.trainable_weights + layer.trainable_weights
        )

    step()


_MAKERS = {
    "keras": "keras.layers.LayerNormalization",
    "layer": "tfnorm.LayerNormalization",
    "rms": "tfnorm.RMSNorm",
}


def xla_step_bytes(name, in_block, dump_dir):
    """The bytes XLA's buffer assignment gives `one_step` of `name`'s norm
    beyond its parameters: its results and its scratch buffer.

    Read from XLA's dump, in a process of its own (the flag is read once),
    rather than from the allocator's peak, which counts the allocator's
    chunks: a 17 MB scratch buffer took a 32 MiB chunk, a 13 MB one 16."""
    run_python(
        f"""
        import tfnorm
        from tfnorm._keras import keras
        from tests.layers._ops.test_guarded import one_step

        one_step({_MAKERS[name]}(epsilon=1e-5), in_block={in_block})
        """,
        env={"XLA_FLAGS": f"--xla_dump_to={dump_dir}"},
    )
    (assignment,) = dump_dir.glob("*_step_*buffer-assignment.txt")
    sizes = re.findall(
        r"^allocation \d+: (?:\S+ )?size (\d+), (?:preallocated-temp|maybe-live-out|output)",
        assignment.read_text(),
        re.MULTILINE,
    )
    return sum(int(size) for size in sizes)


#: Full-size tensors a step may keep beyond Keras's LayerNormalization's, in a
#: Post-LN block and alone. Handing x back costs the norm alone one (its x
#: is a fused product otherwise) and the block none: in TensorFlow 2.9 it
#: saves one there (LayerNorm 25.5 -> 21.3 MB, Keras's 25.4). LayerNorm
#: kept one more than Keras's in Keras 3 before (block 25.6 MB against
#: 21.3, alone 17.0 against 12.6) and still does.
_FULL_SIZE_ALLOWED = {
    ("layer", True): 1,
    ("layer", False): 2,
    ("rms", True): 0,
    ("rms", False): 1,
}


@pytest.mark.parametrize("in_block", [True, False], ids=["post-ln-block", "alone"])
@pytest.mark.parametrize("name", ["layer", "rms"])
def test_under_xla_a_step_keeps_no_more_than_keras_layer_norm_and_x(
    name, in_block, tmp_path
):
    keras_bytes = xla_step_bytes("keras", in_block, tmp_path / "keras")
    ours = xla_step_bytes(name, in_block, tmp_path / name)
    # The gradient of x alone is one full-size tensor.
    assert keras_bytes > FULL_SIZE
    # Beyond the allowed full-size tensors only the per-row statistics the
    # cond hands over (a few 16 KiB tensors here).
    allowed = _FULL_SIZE_ALLOWED[name, in_block] * FULL_SIZE + FULL_SIZE / 4
    assert ours <= keras_bytes + allowed, (ours, keras_bytes)


@pytest.mark.parametrize(
    "make", [tfnorm.LayerNormalization, tfnorm.RMSNorm], ids=["layer", "rms"]
)
def test_under_xla_the_cond_hands_x_back_to_the_backward_pass(make):
    layer = make(epsilon=1e-5)
    x = tf.random.stateless_normal((4, 8, 16), seed=[1, 2])
    layer.build(x.shape)

    @tf.function(jit_compile=True)
    def forward_backward(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x * 2.0 + 1.0)
        return tape.gradient(y, x)

    hlo = forward_backward.experimental_get_compiler_ir(x)(stage="hlo")
    (cond,) = [line for line in hlo.splitlines() if " conditional(" in line]
    outputs = cond.split(" conditional(")[0]
    # y and the x the backward pass makes x_hat from.
    assert outputs.count("f32[32,16]") == 2, cond


@pytest.mark.parametrize(
    "make, view",
    # LayerNorm and RMSNorm run on a [rows, features] view, ScaleNorm on x.
    [
        (tfnorm.LayerNormalization, "[32,16]"),
        (tfnorm.RMSNorm, "[32,16]"),
        (tfnorm.ScaleNorm, "[4,8,16]"),
    ],
)
def test_under_xla_a_mixed_bfloat16_cond_takes_and_makes_bfloat16(make, view):
    layer = make(epsilon=1e-5, dtype="mixed_bfloat16")
    x = tf.random.stateless_normal((4, 8, 16), seed=[1, 2], dtype=tf.bfloat16)
    layer.build(x.shape)

    @tf.function(jit_compile=True)
    def forward(x):
        return layer(x * 2.0 + 1.0)

    hlo = forward.experimental_get_compiler_ir(x)(stage="hlo")
    (cond,) = [line for line in hlo.splitlines() if " conditional(" in line]
    outputs, operands = cond.split(" conditional(")
    assert f"bf16{view}" in outputs, cond
    assert f"bf16{view}" in operands, cond
    assert f"f32{view}" not in cond, cond


@pytest.mark.parametrize("offset", [0.5, 1e3])  # 1e3: LayerNorm's careful path
@pytest.mark.parametrize(
    "make", [tfnorm.LayerNormalization, tfnorm.RMSNorm, tfnorm.ScaleNorm]
)
def test_under_xla_a_mixed_bfloat16_norm_matches_graph_mode(make, offset):
    layer = make(epsilon=1e-5, dtype="mixed_bfloat16")
    x = tf.random.stateless_normal((4, 8, 64), seed=[5, 6]) * 3.0 + offset
    x = tf.cast(x, tf.bfloat16)
    upstream = tf.random.stateless_normal(x.shape, seed=[7, 8])
    layer.build(x.shape)

    def forward_backward(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
            loss = tf.reduce_sum(tf.cast(y, tf.float32) * upstream)
        return [y] + tape.gradient(loss, [x] + layer.trainable_weights)

    graph = tf.function(forward_backward)(x)
    xla = tf.function(forward_backward, jit_compile=True)(x)
    assert [t.dtype for t in xla] == [t.dtype for t in graph]
    assert xla[0].dtype == tf.bfloat16 and xla[1].dtype == tf.bfloat16
    for got, want in zip(xla, graph):
        want = tf.cast(want, tf.float32)
        scale = float(tf.reduce_max(tf.abs(want)))
        # Both round to bfloat16 at the end (2**-8 relative, each).
        np.testing.assert_allclose(
            tf.cast(got, tf.float32), want, rtol=2**-6, atol=2**-6 * scale
        )
