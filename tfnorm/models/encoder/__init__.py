"""The encoder family: the block, its builders and model class, the text
classifier with its embedding and pooling layers, the keras-hub reader and
the Hugging Face BERT reader.

One folder holds the whole model, as keras-hub keeps one model family in one
folder; nothing here imports the decoder family.
"""

from __future__ import annotations

from tfnorm.models.encoder.block import TransformerEncoderBlock
from tfnorm.models.encoder.builders import (
    build_encoder,
    encoder_from_keras_hub,
    encoder_layer,
)
from tfnorm.models.encoder.classifier import build_classifier
from tfnorm.models.encoder.hf import encoder_from_hf
from tfnorm.models.encoder.model import EncoderModel
from tfnorm.models.encoder.text_layers import (
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
)

__all__ = [
    "EncoderModel",
    "PaddingMask",
    "SequencePooling",
    "TokenAndPositionEmbedding",
    "TransformerEncoderBlock",
    "build_classifier",
    "build_encoder",
    "encoder_from_hf",
    "encoder_from_keras_hub",
    "encoder_layer",
]
