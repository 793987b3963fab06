"""Transformer encoder blocks, stacks and a text classifier built from tfnorm's norms."""

from __future__ import annotations

from tfnorm._keras import save_model
from tfnorm.choices import NORM_POSITIONS
from tfnorm.models.builders import build_encoder, encoder_from_keras_hub, encoder_layer
from tfnorm.models.classifier import build_classifier
from tfnorm.models.encoder_block import TransformerEncoderBlock
from tfnorm.models.encoder_model import EncoderModel
from tfnorm.models.matrix_initializer import MatrixInitializer
from tfnorm.models.norm_swap import ConversionError, replace_norms
from tfnorm.models.text_layers import (
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
)

__all__ = [
    "ConversionError",
    "EncoderModel",
    "MatrixInitializer",
    "NORM_POSITIONS",
    "PaddingMask",
    "SequencePooling",
    "TokenAndPositionEmbedding",
    "TransformerEncoderBlock",
    "build_classifier",
    "build_encoder",
    "encoder_from_keras_hub",
    "encoder_layer",
    "replace_norms",
    "save_model",
]
