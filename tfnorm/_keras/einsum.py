"""`EinsumDense`, which Keras 2.9 keeps under `layers.experimental`."""

from __future__ import annotations

from tfnorm._keras.runtime import IS_KERAS_3, KERAS_VERSION, keras


def _einsum_dense_class():
    if IS_KERAS_3 or not KERAS_VERSION.startswith("2.9"):
        found = getattr(keras.layers, "EinsumDense", None)
        if found is not None:
            return found
    return keras.layers.experimental.EinsumDense


#: `keras.layers.EinsumDense` (Keras >= 2.10 and 3), or Keras 2.9's
#: `keras.layers.experimental.EinsumDense`; the same layer and arguments.
EinsumDense = _einsum_dense_class()
