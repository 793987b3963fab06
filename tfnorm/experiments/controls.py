"""Two controls of `tfnorm compare` for the claims about norms it checks.

* `gamma_init`: every norm's scale starts at `gamma_init` times its usual
  value (the articles claim that a gamma a little above 1, such as 1.25,
  helps very deep stacks).
* `input_offset`: one constant added to every feature of the stack's input,
  a large shared offset ("DC component") that LayerNorm's mean-centring
  removes and RMSNorm keeps.
"""

from __future__ import annotations

from tfnorm._keras import keras
from tfnorm.callbacks.layers import find_norm_layers

#: A norm's scale weight by the attribute its layer keeps it in: `gamma`
#: (LayerNorm, RMSNorm, DyT, Keras's norms) or `g` (ScaleNorm, one scalar).
SCALE_ATTRIBUTES = ("gamma", "g")


def scale_norm_gammas(model, factor):
    """Multiplies every norm's scale weight in `model` by `factor`, in place.

    A norm built with its default initialiser then starts at `factor`
    (LayerNorm's, RMSNorm's and DyT's `gamma`) or `factor * sqrt(d)`
    (ScaleNorm's `g`).

    Returns:
        The number of scale weights changed.
    """
    changed = 0
    for _, layer in find_norm_layers(model):
        for attribute in SCALE_ATTRIBUTES:
            weight = getattr(layer, attribute, None)
            if weight is not None and hasattr(weight, "assign"):
                weight.assign(weight * factor)
                changed += 1
    return changed


def offset_inputs(inputs, offset):
    """`inputs + offset` as a layer of the model (named `input_offset`)."""
    return keras.layers.Rescaling(1.0, offset=offset, name="input_offset")(inputs)
