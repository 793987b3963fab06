"""tfnorm: normalisation layers for Transformers in TensorFlow/Keras.

Works with TensorFlow 2.9 (Keras 2), TensorFlow >= 2.16 with Keras 3, and
TensorFlow >= 2.16 with `tf_keras` (`TF_USE_LEGACY_KERAS=1`).
"""

from __future__ import annotations

__version__ = "0.1.0"

from tfnorm._tf_check import check_tensorflow as _check_tensorflow

_check_tensorflow()

from tfnorm import _keras  # noqa: E402,F401
from tfnorm.layers import (  # noqa: E402
    LayerNormalization,
    RMSNorm,
    ScaleNorm,
    get_norm,
)

__all__ = ["LayerNormalization", "RMSNorm", "ScaleNorm", "get_norm", "__version__"]
