"""tfnorm's normalisation layers and the `get_norm` factory."""

from __future__ import annotations

from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.dynamic_tanh import DynamicTanh
from tfnorm.layers.factory import get_norm, is_norm_layer
from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.registry import check_registrations
from tfnorm.layers.rms_norm import RMSNorm
from tfnorm.layers.scale_norm import ScaleNorm

check_registrations()

__all__ = [
    "BaseNormalization",
    "DynamicTanh",
    "LayerNormalization",
    "RMSNorm",
    "ScaleNorm",
    "get_norm",
    "is_norm_layer",
]
