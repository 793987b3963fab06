"""What a run records of the user's model's weights, to know on a rerun
whether `model_fn` still builds the model its checkpoints hold, and to say
which weight differs when it does not."""

from __future__ import annotations

import hashlib
import json
import re

from tfnorm import _keras


def weight_entries(model):
    """`[name, shape, dtype]` of each weight, in order; names without Keras's
    per-process `_N` suffixes."""
    return [
        [
            re.sub(r"_\d+(?=/|$)", "", _keras.variable_path(w)),
            list(w.shape),
            str(w.dtype),
        ]
        for w in model.weights
    ]


def model_signature(model):
    """A digest of the model's weights (order, shapes, dtypes, names without
    Keras's per-process `_N` suffixes): changes when the model's code does."""
    return hashlib.sha256(json.dumps(weight_entries(model)).encode()).hexdigest()


def weight_difference(now, identity):
    """The first weight that differs between `now` (`weight_entries`) and the
    run identity's record, in words."""
    then = identity.get("model_weight_shapes")
    if not isinstance(then, list):  # recorded by an earlier release
        return f"{len(now)} now, {identity.get('model_weights')} then, or other shapes"

    def shape(entry):
        # Keras 2 records dtypes as "<dtype: 'float32'>".
        dtype = re.sub(r"<dtype: '(\w+)'>", r"\1", str(entry[2]))
        return f"shape {tuple(entry[1])} {dtype}"

    for index, (new, old) in enumerate(zip(now, then)):
        if new[0] == old[0] and new != old:
            return f"{new[0]}: {shape(new)} now, {shape(old)} then"
        if new != old:
            return (
                f"weight {index} is {new[0]} ({shape(new)}) now, {old[0]} "
                f"({shape(old)}) then"
            )
    extra, count = (now, "now") if len(now) > len(then) else (then, "then")
    entry = extra[min(len(now), len(then))]
    return f"{len(now)} now, {len(then)} then: {entry[0]} ({shape(entry)}) only {count}"
