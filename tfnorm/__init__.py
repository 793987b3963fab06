"""tfnorm: normalisation layers for Transformers in TensorFlow/Keras.

Works with TensorFlow 2.9 (Keras 2), TensorFlow >= 2.16 with Keras 3, and
TensorFlow >= 2.16 with `tf_keras` (`TF_USE_LEGACY_KERAS=1`).
"""

from __future__ import annotations

import os
import sys

__version__ = "0.1.0"


def _started_as_the_command():
    # The `tfnorm` console script imports this package only to build its
    # parser, and `tfnorm --help` must answer before TensorFlow (seconds to
    # import) loads; the subcommands import what they need when they run.
    # Everywhere else `import tfnorm` loads the library, so its layers are
    # registered for `keras.models.load_model`.
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "tfnorm"


if not _started_as_the_command():
    # A missing or too old TensorFlow must give one clear error before any
    # submodule imports it.
    from tfnorm._tf_check import check_tensorflow as _check_tensorflow

    _check_tensorflow()

    # Submodules imported so `tfnorm.callbacks` / `tfnorm.training` are
    # reachable and everything they register deserialises after a plain
    # `import tfnorm`.
    from tfnorm import _keras, callbacks, training
    from tfnorm.layers import LayerNormalization, RMSNorm, ScaleNorm, get_norm
    from tfnorm.models import (
        TransformerEncoderBlock,
        build_classifier,
        build_encoder,
        encoder_layer,
        replace_norms,
    )
    from tfnorm.training import optimizers, schedules, trainer

__all__ = [
    "LayerNormalization",
    "RMSNorm",
    "ScaleNorm",
    "TransformerEncoderBlock",
    "__version__",
    "build_classifier",
    "build_encoder",
    "callbacks",
    "encoder_layer",
    "get_norm",
    "replace_norms",
    "training",
]
