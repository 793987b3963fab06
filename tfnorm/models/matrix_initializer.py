"""`MatrixInitializer`: initialise a multi-axis kernel as the matrix it stands for;
and the per-kernel copies of a block's one initializer that both families draw
their kernels with."""

from __future__ import annotations

import math

from tfnorm._checks import is_int
from tfnorm._keras import keras, register_serializable, tf


def _validate_matrix_shape(matrix_shape):
    shape = tuple(matrix_shape) if isinstance(matrix_shape, (list, tuple)) else None
    if (
        shape is None
        or len(shape) != 2
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
        or min(shape) <= 0
    ):
        raise ValueError(
            "`matrix_shape` must be a pair of positive integers (rows = input "
            f"features, columns = output features). Received: "
            f"matrix_shape={matrix_shape!r}"
        )
    return shape


@register_serializable
class MatrixInitializer(keras.initializers.Initializer):
    """Draws a kernel as a `(rows, cols)` matrix, then reshapes it.

    An attention projection is a matrix from `d_model` input features to
    `num_heads * key_dim` output features, but `MultiHeadAttention` stores
    it as a 3-D kernel: `(d_model, num_heads, key_dim)` for query, key and
    value, `(num_heads, key_dim, d_model)` for the output. Keras versions
    disagree on the fans of such a kernel: Keras 3 counts them from the
    einsum's input and output axes (64 and 64 for `(64, 4, 16)`), Keras 2
    treats the leading axes as a convolution's receptive field (256 and
    1024), so glorot gives std 0.125 in one and 0.039 in the other.

    This wrapper removes the guesswork: it asks `initializer` for a kernel
    of shape `matrix_shape` (so fans, orthogonality or any other property
    refer to the real input and output widths) and reshapes the result,
    row-major, to the requested kernel shape. The kernel's leading axes
    must therefore be the input features, as in every Keras dense and
    einsum-dense kernel. The same call gives the same distribution in every
    Keras version.

    ```
    kernel = reshape(initializer((rows, cols)), shape)
    rows * cols == prod(shape)
    ```

    Example:

    >>> import tfnorm
    >>> init = tfnorm.models.MatrixInitializer("glorot_uniform", (64, 64))
    >>> kernel = init((64, 4, 16))  # drawn with fan_in = fan_out = 64
    >>> tuple(kernel.shape)
    (64, 4, 16)

    Args:
        initializer: the initializer drawing the matrix: a name, a config
            dict or an instance (e.g. `"glorot_uniform"`).
        matrix_shape: `(rows, cols)`, the input and output widths of the
            matrix the kernel stands for.
    """

    def __init__(self, initializer, matrix_shape):
        self.initializer = keras.initializers.get(initializer)
        if self.initializer is None:
            raise ValueError(
                "`initializer` must name or be a Keras initializer. Received: "
                f"initializer={initializer!r}"
            )
        self.matrix_shape = _validate_matrix_shape(matrix_shape)

    def __call__(self, shape, dtype=None, **kwargs):
        shape = tuple(int(d) for d in shape)
        rows, cols = self.matrix_shape
        size = math.prod(shape)
        if size != rows * cols:
            raise ValueError(
                f"MatrixInitializer draws a {rows}x{cols} matrix and cannot "
                f"fill a kernel of {size} entries. Received: shape={shape}"
            )
        matrix = self.initializer((rows, cols), dtype=dtype)
        return tf.reshape(matrix, shape)

    def get_config(self):
        return {
            "initializer": keras.initializers.serialize(self.initializer),
            "matrix_shape": list(self.matrix_shape),
        }


def initializer_seed(config):
    """The integer seed of a serialised initializer, or None."""
    seed = config.get("config", {}).get("seed") if isinstance(config, dict) else None
    return seed if is_int(seed) else None


def kernel_initializer_copy(initializer, index=0):
    """A copy of `initializer` for a block's kernel number `index`.

    A seeded initializer's copies would all repeat its seed, giving equally
    shaped kernels the same values; kernel `index` gets `seed + index`
    instead.
    """
    config = keras.initializers.serialize(initializer)
    seed = initializer_seed(config)
    if seed is not None:
        config = dict(config, config=dict(config["config"], seed=seed + index))
    return keras.initializers.get(config)


def redraw_seeded_projections(initializer, projections, width):
    """Draws attention projections 1.. again, each with its own seed.

    MultiHeadAttention copies its one initializer to all four projections,
    so a seeded one gives query, key, value and output the same matrix in
    Keras 3 and tf_keras; projection `i` gets `kernel_initializer_copy(i)`,
    drawn as a `width x width` matrix.
    """
    if initializer_seed(keras.initializers.serialize(initializer)) is None:
        return
    for index, dense in enumerate(projections[1:], start=1):
        matrix = MatrixInitializer(
            kernel_initializer_copy(initializer, index), (width, width)
        )
        with tf.init_scope():
            dense.kernel.assign(matrix(dense.kernel.shape, dtype=dense.kernel.dtype))
