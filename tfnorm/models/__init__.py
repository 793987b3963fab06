"""Transformer encoder and decoder blocks, stacks, a text classifier and causal language models built from tfnorm's norms."""

from __future__ import annotations

from tfnorm._keras import save_model
from tfnorm.choices import NORM_POSITIONS
from tfnorm.models.builders import build_encoder, encoder_from_keras_hub, encoder_layer
from tfnorm.models.classifier import build_classifier
from tfnorm.models.decoder_block import TransformerDecoderBlock
from tfnorm.models.decoder_builders import DECODER_PRESETS, build_decoder, decoder_layer
from tfnorm.models.decoder_interop import decoder_from_keras_hub, decoder_to_keras_hub
from tfnorm.models.decoder_layers import PositionEmbedding, TokenEmbedding
from tfnorm.models.decoder_model import DecoderModel
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
    "DECODER_PRESETS",
    "DecoderModel",
    "PositionEmbedding",
    "TokenEmbedding",
    "TransformerDecoderBlock",
    "build_decoder",
    "decoder_from_keras_hub",
    "decoder_to_keras_hub",
    "decoder_layer",
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
