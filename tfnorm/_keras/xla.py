"""Whether code runs under XLA, and which ops XLA's CPU backend prefers."""

from __future__ import annotations

from tfnorm._keras.runtime import TF_RELEASE, tf

#: Whether XLA's CPU backend runs tfnorm's matrix-vector row reductions
#: faster than the fused-kernel ops (which XLA lowers to plain reductions).
#: Measured both ways: TensorFlow 2.9's XLA is 1.6x slower on the matvecs,
#: TensorFlow 2.21's 2x faster. Releases in between were not measured; the
#: split is put at 2.16, where Keras 3 arrived.
XLA_PREFERS_MATVEC = TF_RELEASE >= (2, 16)


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
