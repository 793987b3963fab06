"""Property-based checks of every norm of the family against float64 references.

Hypothesis draws the input rank (1-5), shape, `axis` in every form (int,
negative, list, out of order), the input dtype and the layer's dtype policy;
outputs are compared with the NumPy references in `reference.py`, and
gradients for the input and every weight with float64 autodiff of the plain
formula. The search is derandomized so every run (and CI) checks the same
examples.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.layers.norm_family import FAMILY, NORMS, named_weights
from tests.testing import TOLERANCE
from tfnorm._keras import tf
from tfnorm.layers.affine_normalization import AffineNormalization

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
norm_classes = pytest.mark.parametrize("cls", NORMS, ids=lambda c: c.__name__)

INPUT_DTYPES = ["float32", "float16", "bfloat16"]
POLICIES = ["float32", "mixed_float16", "mixed_bfloat16"]


def _layer_kwargs(draw, cls):
    kwargs = {}
    if cls.has_row_statistic:
        kwargs["epsilon"] = draw(st.sampled_from([1e-6, 1e-5, 1e-3]))
    if issubclass(cls, AffineNormalization):
        kwargs["center"] = draw(st.booleans())
        kwargs["scale"] = draw(st.booleans())
    kwargs["dtype"] = draw(st.sampled_from(POLICIES))
    return kwargs


def _axis_form(draw, dims, rank, sign):
    """`dims` (non-negative) written as `axis`: each entry positive or
    negative (`sign` forces one), a bare int when there is one."""
    if sign is None:
        negative = draw(st.lists(st.booleans(), min_size=len(dims), max_size=len(dims)))
    else:
        negative = [sign < 0] * len(dims)
    axis = [d - rank if neg else d for d, neg in zip(dims, negative)]
    if len(axis) == 1 and draw(st.booleans()):
        return axis[0]
    if draw(st.booleans()):
        return tuple(axis)
    return axis


@st.composite
def same_rank_cases(draw, cls):
    rank = draw(st.integers(1, 5))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    # A random order of distinct dims: lists come sorted and unsorted.
    dims = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=3, unique=True))
    axis = _axis_form(draw, dims, rank, sign=None)
    return {
        "kwargs": dict(_layer_kwargs(draw, cls), axis=axis),
        "build_shape": shape,
        "call_shapes": [shape],
        "input_dtype": draw(st.sampled_from(INPUT_DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
    }


@st.composite
def other_rank_cases(draw, cls):
    """Build on one rank, call on one or two others (a shared layer).

    Negative axes keep their dims when leading dims are added or dropped;
    positive axes when trailing dims are.
    """
    sign = draw(st.sampled_from([-1, 1]))
    core_rank = draw(st.integers(1, 3))
    core = tuple(
        draw(st.lists(st.integers(1, 4), min_size=core_rank, max_size=core_rank))
    )
    dims = draw(
        st.lists(
            st.integers(0, core_rank - 1), min_size=1, max_size=core_rank, unique=True
        )
    )
    axis = _axis_form(draw, dims, core_rank, sign)
    extra = st.lists(st.integers(1, 3), min_size=0, max_size=5 - core_rank)
    ranks_differ = st.lists(extra, min_size=2, max_size=3, unique_by=len)
    shapes = []
    for pad in draw(ranks_differ):
        pad = tuple(pad)
        shapes.append(pad + core if sign < 0 else core + pad)
    return {
        "kwargs": dict(_layer_kwargs(draw, cls), axis=axis),
        "build_shape": shapes[0],
        "call_shapes": shapes[1:],
        "input_dtype": draw(st.sampled_from(INPUT_DTYPES)),
        "seed": draw(st.integers(0, 2**16)),
    }


def _set_random_weights(layer, rng):
    values = []
    for weight in layer.weights:
        is_offset = "beta" in weight.name
        value = (0.0 if is_offset else 1.0) + 0.5 * rng.standard_normal(weight.shape)
        values.append(value.astype(np.float32))
    layer.set_weights(values)


def _tolerance(*dtypes):
    return max(TOLERANCE[tf.as_dtype(d).name] for d in dtypes)


def _check_call(cls, layer, shape, input_dtype, rng):
    x = tf.cast(rng.standard_normal(shape) * 2.0 + 0.5, input_dtype)
    x64 = tf.cast(x, tf.float64)  # the input as given, exactly
    weights = named_weights(layer)
    weights64 = {
        k: tf.cast(tf.convert_to_tensor(w), tf.float64) for k, w in weights.items()
    }
    upstream = tf.cast(rng.standard_normal(shape), layer.compute_dtype)

    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * tf.cast(upstream, tf.float32))
    grads = tape.gradient(loss, [x] + [weights[k] for k in sorted(weights)])

    assert y.dtype == tf.as_dtype(layer.compute_dtype)
    assert tuple(y.shape) == tuple(shape)
    expected = FAMILY[cls].numpy(
        layer, x64.numpy(), {k: w.numpy() for k, w in weights64.items()}
    )
    scale = max(1.0, float(np.abs(expected).max()))
    tol = _tolerance(layer.compute_dtype, "float32")
    np.testing.assert_allclose(
        np.asarray(tf.cast(y, tf.float64)), expected, rtol=tol, atol=tol * scale
    )

    with tf.GradientTape() as tape:
        tape.watch([x64] + [weights64[k] for k in sorted(weights64)])
        y64 = FAMILY[cls].tf(layer, x64, weights64)
        loss64 = tf.reduce_sum(y64 * tf.cast(upstream, tf.float64))
    expected_grads = tape.gradient(
        loss64, [x64] + [weights64[k] for k in sorted(weights64)]
    )
    for name, got, want in zip(["x"] + sorted(weights), grads, expected_grads):
        want = np.asarray(want)
        got_dtype = got.dtype
        got = np.asarray(tf.cast(got, tf.float64))
        grad_scale = max(1.0, float(np.abs(want).max()))
        # float32 arithmetic with a few roundings; a half-type input gets its
        # gradient rounded to that type at the end.
        grad_tol = 1e-4 + _tolerance(got_dtype, "float32")
        np.testing.assert_allclose(
            got, want, rtol=grad_tol, atol=grad_tol * grad_scale, err_msg=name
        )


def _run(cls, case):
    rng = np.random.default_rng(case["seed"])
    layer = cls(**case["kwargs"])
    layer.build(case["build_shape"])
    _set_random_weights(layer, rng)
    for shape in case["call_shapes"]:
        _check_call(cls, layer, shape, case["input_dtype"], rng)


@norm_classes
@given(data=st.data())
@SETTINGS
def test_matches_float64_reference_for_any_rank_axis_and_dtype(cls, data):
    _run(cls, data.draw(same_rank_cases(cls)))


@norm_classes
@given(data=st.data())
@SETTINGS
def test_layer_built_on_one_rank_serves_others(cls, data):
    _run(cls, data.draw(other_rank_cases(cls)))
