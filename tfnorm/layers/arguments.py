"""Arguments every tfnorm norm shares: checks of `axis`, `epsilon` and
boolean flags, and how `axis` maps onto the dims of each input."""

from __future__ import annotations

import numpy as np

from tfnorm._checks import is_int, is_real
from tfnorm._keras import plain_axis, tf

_FLOAT32 = np.finfo(np.float32)
#: The positive numbers float32 holds as normal numbers. Below, a value is
#: subnormal (CPUs flush it to 0 in TensorFlow's kernels) or 0; above, inf.
FLOAT32_NORMAL_RANGE = (float(_FLOAT32.tiny), float(_FLOAT32.max))


def validate_epsilon(epsilon, epsilon_range, layer_class):
    low, high = epsilon_range
    if not is_real(epsilon) or not low <= epsilon <= high:
        raise ValueError(
            f"`epsilon` must be a number in about [{low:.3g}, {high:.3g}] for "
            f"{layer_class.__name__}: its statistics are float32, which turns "
            "a smaller or larger epsilon into 0 or inf (NaN or all-zero "
            f"outputs). Received: epsilon={epsilon!r}"
        )
    return float(epsilon)


def validate_bool(name, value):
    """`value` if it is a real boolean, else a ValueError naming `name`.

    `bool("false")` is True: a string or number from a config file would
    silently turn the option on, so only True and False (or NumPy's) pass.
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")


def validate_axis_type(axis):
    if isinstance(axis, (list, tuple)):
        values = list(axis)
    else:
        values = [axis]
    if not values or not all(is_int(a) for a in values):
        # Keras's own norms word these errors so; its layer tests match them.
        raise TypeError(
            "Expected an int or a list/tuple of ints for the argument 'axis' "
            f"(`axis` must be an int or a non-empty list of ints). Received: axis={axis!r}"
        )
    # Stored as given (an int stays an int, negatives stay negative) so a
    # saved config is not tied to the rank of the input it was built on.
    return [int(a) for a in values] if isinstance(axis, (list, tuple)) else int(axis)


def axis_entries(axis):
    return [axis] if isinstance(axis, int) else list(axis)


def resolve_axes(axis, shape):
    """The non-negative dims `axis` names in `shape`, in the order of `axis`."""
    rank = shape.rank
    positive = []
    for a in axis_entries(axis):
        if not -rank <= a < rank:
            raise ValueError(
                "Invalid value for `axis` argument. Expected 0 <= axis < "
                f"inputs.rank (with inputs.rank={rank}), or a negative axis "
                f"counting from the end: `axis` {a} is out of range for an "
                f"input of shape {shape}. Received: axis={plain_axis(axis)!r}"
            )
        positive.append(a % rank)
    if len(set(positive)) != len(positive):
        raise ValueError(
            f"Duplicate axis: `axis` names the same dimension twice for an "
            f"input of rank {rank}. Received: axis={plain_axis(axis)!r}"
        )
    return positive


def input_order(positive):
    """Entry indices of `axis` in the order of the input's dims."""
    return sorted(range(len(positive)), key=positive.__getitem__)


def statistics_dtype(dtype):
    """The dtype a norm computes in for inputs of `dtype`: float32 whatever
    the policy (half types lose the statistics' digits); float64 inputs keep
    float64."""
    return tf.float64 if tf.as_dtype(dtype) == tf.float64 else tf.float32


def in_statistics_dtype(inputs):
    return tf.cast(inputs, statistics_dtype(inputs.dtype))
