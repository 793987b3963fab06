"""Each of tfnorm's norms as the shared tests know it: float64 references of
its formula (NumPy for outputs, TensorFlow for autodiff gradients) and the
configurations its contract test runs.

The shared tests (`test_norm_contract.py`, `test_base_normalization.py`,
`test_norm_properties.py`) run every norm found here, and
`test_norm_contract.py` fails when a registered norm has no entry: a new norm
needs its layer module, its `tfnorm.choices.NORMS` line and an entry here.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import tfnorm
from tests.layers import reference
from tfnorm._keras import tf


class NormEntry(NamedTuple):
    #: (layer, x, weights by name) -> y, float64 NumPy.
    numpy: Callable
    #: The same in float64 TensorFlow ops (for autodiff gradients).
    tf: Callable
    #: (id, constructor kwargs, input shape, whether to check a saved reload).
    contract_cases: list


def named_weights(layer):
    """The layer's weights by role: gamma, beta, scale (ScaleNorm's g), alpha."""
    names = {}
    for weight in layer.weights:
        # Keras 2 names are "layer_name/gamma:0", Keras 3's "gamma".
        own_name = weight.name.split("/")[-1].split(":")[0]
        if own_name in ("gamma", "beta", "scale", "alpha"):
            names[own_name] = weight
    return names


def _gamma(layer, weights):
    gamma = weights.get("gamma")
    if gamma is not None and getattr(layer, "zero_centered_gamma", False):
        gamma = 1.0 + gamma
    return gamma


def _tf_positive(layer, x):
    rank = x.shape.rank
    axis = layer.axis if isinstance(layer.axis, (list, tuple)) else [layer.axis]
    return sorted(a % rank for a in axis)


def _tf_affine(layer, x, y, weights):
    positive = _tf_positive(layer, x)
    target = [1] * x.shape.rank
    for a in positive:
        target[a] = x.shape[a]
    gamma, beta = _gamma(layer, weights), weights.get("beta")
    if gamma is not None:
        y = y * tf.reshape(gamma, target)
    if beta is not None:
        y = y + tf.reshape(beta, target)
    return y


def _tf_layer_norm(layer, x, weights):
    positive = _tf_positive(layer, x)
    mean = tf.reduce_mean(x, positive, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), positive, keepdims=True)
    return _tf_affine(
        layer, x, (x - mean) * tf.math.rsqrt(var + layer.epsilon), weights
    )


def _tf_rms_norm(layer, x, weights):
    mean_square = tf.reduce_mean(tf.square(x), _tf_positive(layer, x), keepdims=True)
    return _tf_affine(layer, x, x * tf.math.rsqrt(mean_square + layer.epsilon), weights)


def _tf_scale_norm(layer, x, weights):
    norm = tf.sqrt(tf.reduce_sum(tf.square(x), _tf_positive(layer, x), keepdims=True))
    return weights["scale"] * x / tf.maximum(norm, layer.epsilon)


def _tf_dynamic_tanh(layer, x, weights):
    return _tf_affine(layer, x, tf.tanh(weights["alpha"] * x), weights)


FAMILY = {
    tfnorm.LayerNormalization: NormEntry(
        numpy=lambda layer, x, w: reference.layer_norm(
            x, w.get("gamma"), w.get("beta"), layer.axis, layer.epsilon
        ),
        tf=_tf_layer_norm,
        contract_cases=[
            ("default", {}, (2, 5, 8), True),
            ("no_center", {"center": False}, (2, 5, 8), False),
            ("no_scale", {"scale": False, "epsilon": 1e-3}, (2, 5, 8), False),
            ("two_axes", {"axis": [1, 2]}, (2, 3, 4), False),
            ("non_contiguous", {"axis": [-3, -1]}, (2, 3, 4, 5), True),
        ],
    ),
    tfnorm.RMSNorm: NormEntry(
        numpy=lambda layer, x, w: reference.rms_norm(
            x, _gamma(layer, w), w.get("beta"), layer.axis, layer.epsilon, layer.partial
        ),
        tf=_tf_rms_norm,
        contract_cases=[
            ("default", {}, (2, 5, 8), True),
            ("center", {"center": True}, (2, 5, 8), False),
            ("zero_centered", {"zero_centered_gamma": True}, (2, 5, 8), False),
            ("partial", {"partial": 0.25}, (2, 5, 8), True),
            (
                "non_contiguous",
                {"axis": [-3, -1], "epsilon": 1e-5},
                (2, 3, 4, 5),
                False,
            ),
        ],
    ),
    tfnorm.ScaleNorm: NormEntry(
        numpy=lambda layer, x, w: reference.scale_norm(
            x, w["scale"], layer.axis, layer.epsilon
        ),
        tf=_tf_scale_norm,
        contract_cases=[
            ("default", {}, (2, 5, 8), True),
            (
                "two_axes",
                {"axis": [1, 2], "scale_initializer": "ones"},
                (2, 3, 4),
                False,
            ),
        ],
    ),
    tfnorm.DynamicTanh: NormEntry(
        numpy=lambda layer, x, w: reference.dynamic_tanh(
            x, w["alpha"], w.get("gamma"), w.get("beta"), layer.axis
        ),
        tf=_tf_dynamic_tanh,
        contract_cases=[
            ("default", {}, (2, 5, 8), True),
            (
                "no_center",
                {"center": False, "alpha_initializer": 1.0},
                (2, 5, 8),
                False,
            ),
            ("non_contiguous", {"axis": [-3, -1]}, (2, 3, 4, 5), True),
        ],
    ),
}
NORMS = list(FAMILY)
#: The norms that divide by a statistic guarded by `epsilon`.
EPSILON_NORMS = [cls for cls in NORMS if cls.has_row_statistic]
