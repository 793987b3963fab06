"""Transformer encoder blocks, stacks and a text classifier built from tfnorm's norms."""

from __future__ import annotations

from tfnorm._keras import save_model
from tfnorm.models.builders import build_classifier, build_encoder, encoder_layer
from tfnorm.models.convert import replace_norms
from tfnorm.models.encoder_block import NORM_POSITIONS, TransformerEncoderBlock
from tfnorm.models.encoder_model import EncoderModel
from tfnorm.models.matrix_initializer import MatrixInitializer
from tfnorm.models.text_layers import (
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
)

__all__ = [
    "EncoderModel",
    "MatrixInitializer",
    "NORM_POSITIONS",
    "PaddingMask",
    "SequencePooling",
    "TokenAndPositionEmbedding",
    "TransformerEncoderBlock",
    "build_classifier",
    "build_encoder",
    "encoder_layer",
    "replace_norms",
    "save_model",
]
