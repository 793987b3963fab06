"""tfnorm: normalisation layers for Transformers in TensorFlow/Keras.

Works with TensorFlow 2.9 (Keras 2), TensorFlow >= 2.16 with Keras 3, and
TensorFlow >= 2.16 with `tf_keras` (`TF_USE_LEGACY_KERAS=1`).
"""

from __future__ import annotations

import os
import sys

from tfnorm.choices import NORMS

__version__ = "0.1.0"


def _started_as_the_command():
    # The `tfnorm` console script imports this package only to build its
    # parser, and `tfnorm --help` must answer before TensorFlow (seconds to
    # import) loads; the subcommands import what they need when they run.
    # Everywhere else `import tfnorm` loads the library, so its layers are
    # registered for `keras.models.load_model`.
    # `python -m tfnorm` is the same command: while runpy imports this
    # package to find its `__main__`, `sys.argv[0]` is "-m" (Python 3.10+
    # also keeps the module's name in `sys.orig_argv`).
    if not sys.argv:
        return False
    if sys.argv[0] == "-m":
        orig_argv = getattr(sys, "orig_argv", None)
        if orig_argv is None or "-m" not in orig_argv[:-1]:
            return True
        return orig_argv[orig_argv.index("-m") + 1] in ("tfnorm", "tfnorm.cli.main")
    return os.path.basename(sys.argv[0]) == "tfnorm"


def _load_library():
    # A missing or too old TensorFlow must give one clear error before any
    # submodule imports it (`tfnorm._keras` checks first thing, too).
    from tfnorm._keras.tf_check import check_tensorflow

    check_tensorflow()

    # Submodules imported so `tfnorm.callbacks` / `tfnorm.training` are
    # reachable and everything they register deserialises after a plain
    # `import tfnorm`.
    from tfnorm import _keras, callbacks, layers, training  # noqa: F401
    from tfnorm.generation import generate
    from tfnorm.layers import get_norm
    from tfnorm.models import (
        TransformerDecoderBlock,
        TransformerEncoderBlock,
        build_classifier,
        build_decoder,
        build_encoder,
        decoder_layer,
        encoder_layer,
        replace_norms,
    )
    from tfnorm.optim import optimizers, schedules  # noqa: F401
    from tfnorm.training import trainer  # noqa: F401

    globals().update({name: getattr(layers, name) for name in _NORM_CLASSES})
    globals().update(
        get_norm=get_norm,
        TransformerEncoderBlock=TransformerEncoderBlock,
        TransformerDecoderBlock=TransformerDecoderBlock,
        build_decoder=build_decoder,
        decoder_layer=decoder_layer,
        generate=generate,
        build_classifier=build_classifier,
        build_encoder=build_encoder,
        encoder_layer=encoder_layer,
        replace_norms=replace_norms,
    )


#: Subpackages reachable as attributes, imported on first use (they import
#: TensorFlow or matplotlib, which `import tfnorm` need not wait for).
_LAZY_SUBMODULES = (
    "callbacks",
    "cli",
    "distribute",
    "experiments",
    "generation",
    "layers",
    "models",
    "training",
)


def __getattr__(name):
    # Under the `tfnorm` command the library loads when something (a user's
    # --model-fn module, say) first asks for one of its names.
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    if name in __all__ and name not in globals():
        _load_library()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Every norm of `tfnorm.choices.NORMS`, exported under its class name.
_NORM_CLASSES = tuple(choice.class_name for choice in NORMS.values())

__all__ = [
    *_NORM_CLASSES,
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "__version__",
    "build_decoder",
    "decoder_layer",
    "generate",
    "build_classifier",
    "build_encoder",
    "callbacks",
    "distribute",
    "encoder_layer",
    "experiments",
    "get_norm",
    "replace_norms",
    "training",
]

if not _started_as_the_command():
    _load_library()
