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
