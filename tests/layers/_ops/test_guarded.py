"""The fast and careful paths (`tfnorm.layers._ops.guarded`) under XLA: the
cond hands the backward pass row statistics, not x_hat, so a norm's forward
and backward pass take no more memory than Keras's LayerNormalization's
(with x_hat through the cond, tfnorm's LayerNormalization took 36 MiB where
Keras's takes 20, at this shape)."""

from __future__ import annotations

import gc

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
