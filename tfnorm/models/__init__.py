"""Transformer encoder and decoder blocks, stacks, a text classifier and causal language models built from tfnorm's norms."""

from __future__ import annotations

from tfnorm._keras import save_model
from tfnorm.choices import NORM_POSITIONS
from tfnorm.models.decoder import (
    DECODER_PRESETS,
    DecoderModel,
    PositionEmbedding,
    TokenEmbedding,
    TransformerDecoderBlock,
    build_decoder,
    decoder_from_hf,
    decoder_from_keras_hub,
    decoder_layer,
    decoder_to_hf,
    decoder_to_keras_hub,
)
from tfnorm.models.encoder import (
    EncoderModel,
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
    TransformerEncoderBlock,
    build_classifier,
    build_encoder,
    encoder_from_hf,
    encoder_from_keras_hub,
    encoder_layer,
)
from tfnorm.models.masked_model import MaskedSequenceModel
from tfnorm.models.matrix_initializer import MatrixInitializer
from tfnorm.models.norm_swap import ConversionError, replace_norms

__all__ = [
    "ConversionError",
    "DECODER_PRESETS",
    "DecoderModel",
    "PositionEmbedding",
    "TokenEmbedding",
    "TransformerDecoderBlock",
    "build_decoder",
    "decoder_from_hf",
    "decoder_from_keras_hub",
    "decoder_to_keras_hub",
    "decoder_layer",
    "decoder_to_hf",
    "EncoderModel",
    "MaskedSequenceModel",
    "MatrixInitializer",
    "NORM_POSITIONS",
    "PaddingMask",
    "SequencePooling",
    "TokenAndPositionEmbedding",
    "TransformerEncoderBlock",
    "build_classifier",
    "build_encoder",
    "encoder_from_hf",
    "encoder_from_keras_hub",
    "encoder_layer",
    "replace_norms",
    "save_model",
]
