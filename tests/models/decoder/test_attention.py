"""What the graph of causal attention's steps is made of: the cost of a
CPU training step in graph mode is decided by which kernels its gradient
runs, not only by the math."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import tf
from tfnorm.models.decoder.attention import (
    causal_mask,
    grouped_attention,
    rotary_embedding,
)


def gradient_op_types(function, *inputs):
    """The op types of the traced gradient of `sum(function(*inputs))`."""

    @tf.function
    def gradient(*tensors):
        with tf.GradientTape() as tape:
            for tensor in tensors:
                tape.watch(tensor)
            total = tf.reduce_sum(function(*tensors))
        return tape.gradient(total, tensors)

    specs = [tf.TensorSpec(t.shape, t.dtype) for t in inputs]
    graph = gradient.get_concrete_function(*specs).graph
    return {op.type for op in graph.get_operations()}


def test_rotary_gradient_makes_no_zero_padded_slice_gradients():
    x = tf.constant(np.ones((2, 5, 3, 8), "float32"))
    types = gradient_op_types(lambda t: rotary_embedding(t, tf.range(5), 1e4), x)
    # Each slice of x would add a full-size, mostly-zero gradient.
    assert "StridedSliceGrad" not in types


def test_multi_head_attention_runs_as_batched_matmuls():
    q, k, v = (tf.constant(np.ones((2, 5, 4, 8), "float32")) for _ in range(3))
    mask = causal_mask(tf.range(5), 5)
    types = gradient_op_types(lambda *t: grouped_attention(*t, mask), q, k, v)
    assert "Einsum" not in types
    assert "BatchMatMulV2" in types or "BatchMatMulV3" in types


def test_rope_scaling_stretches_the_slow_frequencies():
    from tfnorm.models.decoder.attention import rope_inverse_frequencies

    plain = np.asarray(rope_inverse_frequencies(8, 10000.0))
    linear = rope_inverse_frequencies(
        8, 10000.0, {"rope_type": "linear", "factor": 4.0}
    )
    np.testing.assert_allclose(np.asarray(linear), plain / 4.0, rtol=1e-6)
    llama3 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    scaled = np.asarray(rope_inverse_frequencies(8, 10000.0, llama3))
    # Wavelength 2*pi < 64/4 stays; 6283 > 64/1 is divided by the factor.
    assert scaled[0] == plain[0] and np.isclose(scaled[-1], plain[-1] / 8.0)
    dynamic = {
        "rope_type": "dynamic",
        "factor": 2.0,
        "original_max_position_embeddings": 8,
    }
    short = rope_inverse_frequencies(8, 10000.0, dynamic, np.arange(8))
    long = rope_inverse_frequencies(8, 10000.0, dynamic, np.arange(12))
    np.testing.assert_allclose(np.asarray(short), plain, rtol=1e-6)
    assert np.asarray(long)[-1] < plain[-1]
