"""What tfnorm reads of keras-hub's `TransformerEncoder`, whose sublayers and
width are private attributes (keras-hub keeps no public handle on them)."""

from __future__ import annotations

#: (keras-hub sublayer attribute, tfnorm block sublayer attribute).
_ENCODER_SUBLAYERS = (
    ("_self_attention_layer", "attention"),
    ("_self_attention_layer_norm", "attention_norm"),
    ("_feedforward_layer_norm", "ffn_norm"),
    ("_feedforward_intermediate_dense", "ffn_inner"),
    ("_feedforward_output_dense", "ffn_output"),
)


def hub_encoder_sublayers(layer):
    """`[(sublayer of the keras-hub encoder `layer`, name of the matching
    sublayer of a tfnorm.TransformerEncoderBlock)]`."""
    return [(getattr(layer, hub), name) for hub, name in _ENCODER_SUBLAYERS]


def hub_encoder_width(layer):
    """The hidden size of a built keras-hub encoder: its output projection's
    units (keras-hub records no input shape for it in every Keras)."""
    return layer._feedforward_output_dense.units
