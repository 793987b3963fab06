"""tfnorm/_keras/optimizers.py: the bases of tfnorm's optimizers, either Keras."""

from __future__ import annotations

import numpy as np

from tfnorm import _keras
from tfnorm._keras import keras, tf


class _Named:
    def __init__(self, name, path=None):
        self.name, self.path = name, path


def test_variable_path_drops_the_output_index_and_the_replica():
    assert _keras.variable_path(_Named("block/ln_1/gamma:0")) == "block/ln_1/gamma"
    assert _keras.variable_path(_Named("ln/gamma/replica_1:0")) == "ln/gamma"
    # Keras 3's path wins over the name where there is one.
    assert _keras.variable_path(_Named("gamma", "block/ln_1/gamma")) == (
        "block/ln_1/gamma"
    )


def test_optimizer_variables_is_a_list_in_every_keras():
    optimizer = keras.optimizers.Adam(1e-3)
    variable = tf.Variable(np.ones(3, "float32"))
    _keras.build_optimizer(optimizer, [variable])
    variables = _keras.optimizer_variables(optimizer)
    assert isinstance(variables, list)
    assert any(tuple(v.shape) == (3,) for v in variables)  # a slot of `variable`


def test_adamw_base_decays_only_what_the_subclass_accepts():
    class Decays(_keras.AdamWBase):
        def decays_variable(self, variable):
            return "keep" not in variable.name

    decayed = tf.Variable(np.ones(2, "float32"), name="decayed")
    kept = tf.Variable(np.ones(2, "float32"), name="keep")
    optimizer = Decays(learning_rate=0.1, weight_decay=0.5)
    zeros = [tf.zeros(2), tf.zeros(2)]
    optimizer.apply_gradients(zip(zeros, [decayed, kept]))
    # With zero gradients only the decay moves a variable: 1 - 0.1 * 0.5.
    np.testing.assert_allclose(decayed.numpy(), [0.95, 0.95], rtol=1e-6)
    np.testing.assert_allclose(kept.numpy(), [1.0, 1.0])
