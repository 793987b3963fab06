"""Whether code runs under XLA."""

from __future__ import annotations

from tfnorm._keras.runtime import tf


def in_xla_context():
    """True while tracing code that XLA compiles (`jit_compile=True`, in a
    `tf.function` or a Keras model), False in eager and plain graph mode.

    Fused TensorFlow kernels win in graph mode but are taken apart by XLA,
    which fuses simpler ops itself; tfnorm's norms pick their ops by this.
    TensorFlow 2.9 to 2.21 mark a `jit_compile` function's graph with an XLA
    control-flow context, which only this private helper reads.
    """
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(
        tf.compat.v1.get_default_graph()
    )
