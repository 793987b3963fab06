"""Which TensorFlow and which Keras are running, and what that Keras can save.

`tf.keras` resolves to Keras 2 (TensorFlow 2.9 to 2.15), `tf_keras`
(TensorFlow >= 2.16 with `TF_USE_LEGACY_KERAS=1`) or Keras 3; `FLAVOUR`
says which.
"""

from __future__ import annotations

import os

from tfnorm._keras.tf_check import check_tensorflow

tf = check_tensorflow()

# In TensorFlow >= 2.16 `tf.keras` is a lazy loader that picks Keras 3 or
# tf_keras from TF_USE_LEGACY_KERAS on first attribute access.
keras = tf.keras

Layer = keras.layers.Layer


def _keras_package():
    # The top-level package that defines `tf.keras`'s Layer: "keras" (Keras 2
    # or 3) or "tf_keras". Its `__version__` is reliable in all three runtimes,
    # unlike attributes of the `tf.keras` API module.
    import importlib

    return importlib.import_module(Layer.__module__.split(".")[0])


KERAS_VERSION = str(_keras_package().__version__)
IS_KERAS_3 = KERAS_VERSION.startswith("3.")
if IS_KERAS_3:
    FLAVOUR = "keras3"
elif _keras_package().__name__ == "tf_keras":
    FLAVOUR = "tf_keras"
else:
    FLAVOUR = "keras2"

#: Formats `save_model` accepts in this runtime, the native one first.
if IS_KERAS_3:
    # Keras 3 still reads legacy .h5 files, but its loader drops an `axis`
    # list of more than one entry (keras/src/legacy/saving/saving_utils.py),
    # so H5 is not offered here.
    SAVE_FORMATS = ("keras",)
elif FLAVOUR == "tf_keras":
    SAVE_FORMATS = ("keras", "h5", "tf")
else:
    # Keras 2.9 has no `.keras` archive format yet.
    SAVE_FORMATS = ("tf", "h5")
NATIVE_FORMAT = SAVE_FORMATS[0]


def describe() -> dict:
    """Versions and the active Keras flavour, for `tfnorm info` and bug reports."""
    return {
        "tensorflow": tf.__version__,
        "keras": KERAS_VERSION,
        "keras_flavour": FLAVOUR,
        "tf_use_legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS", ""),
        "save_formats": list(SAVE_FORMATS),
    }


def _release(version):
    """(major, minor) of a version string such as "2.9.3" or "2.21.0-rc1"."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


TF_RELEASE = _release(tf.__version__)
