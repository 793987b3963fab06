"""The fast and careful paths (`tfnorm.layers._ops.guarded`) under XLA: the
cond hands the backward pass row statistics, not x_hat, so a norm's forward
and backward pass take no more memory than Keras's LayerNormalization's
(with x_hat through the cond, tfnorm's LayerNormalization took 36 MiB where
Keras's takes 20, at this shape). Under `mixed_bfloat16` the cond takes the
bfloat16 input, casts it inside and makes the bfloat16 output: with the
casts outside, XLA wrote out a float32 copy of the input and a float32
output, and the forward pass ran at 1.21-1.29x Keras's (`make bench`)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tfnorm
from tfnorm._keras import keras, tf

SHAPE = (32, 128, 256)
FULL_SIZE = 4 * 2**20  # bytes of one float32 tensor of SHAPE


def peak_bytes(layer, jit_compile):
    """What one forward and backward pass through `layer` allocates at its
    peak, above what was allocated before it."""
    x = tf.random.stateless_normal(SHAPE, seed=[1, 2])
    weights = tf.random.stateless_normal(SHAPE, seed=[3, 4])
    layer.build(x.shape)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            tape.watch(x)
            # Made inside the step, as a residual sum would be.
            y = layer(x * 2.0 + 1.0)
            loss = tf.reduce_sum(tf.sin(y) * weights)
        return tape.gradient(loss, [x] + layer.trainable_weights)

    step()
    gc.collect()
    before = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")
    grads = step()
    peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
    del grads
    return peak - before


@pytest.mark.parametrize("make", [tfnorm.LayerNormalization, tfnorm.RMSNorm])
def test_under_xla_a_norm_takes_no_more_memory_than_keras_layer_norm(make):
    keras_peak = peak_bytes(keras.layers.LayerNormalization(epsilon=1e-5), True)
    ours = peak_bytes(make(epsilon=1e-5), True)
    # The gradients alone are one full-size tensor: the peak is more.
    assert keras_peak > FULL_SIZE
    # Allowed above Keras's: the per-row statistics the cond hands over
    # (a few 16 KiB tensors here), never another full-size tensor.
    assert ours <= keras_peak + FULL_SIZE / 4, (ours / 2**20, keras_peak / 2**20)


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
