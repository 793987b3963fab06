"""The decoder family: causal attention, the block, its embeddings and
options, the presets, the builders and model class, and the conversions to
and from keras-hub.

One folder holds the whole model, as keras-hub keeps one model family in one
folder; nothing here imports the encoder family.
"""

from __future__ import annotations

from tfnorm.models.decoder.block import TransformerDecoderBlock
from tfnorm.models.decoder.builders import build_decoder, decoder_layer
from tfnorm.models.decoder.embeddings import PositionEmbedding, TokenEmbedding
from tfnorm.models.decoder.keras_hub import decoder_from_keras_hub, decoder_to_keras_hub
from tfnorm.models.decoder.model import DecoderModel
from tfnorm.models.decoder.presets import DECODER_PRESETS

__all__ = [
    "DECODER_PRESETS",
    "DecoderModel",
    "PositionEmbedding",
    "TokenEmbedding",
    "TransformerDecoderBlock",
    "build_decoder",
    "decoder_from_keras_hub",
    "decoder_to_keras_hub",
    "decoder_layer",
]
