"""The controls of `tfnorm compare` for the claims about norms it checks.

Two settings change the model every norm works in:

* `gamma_init` (`scale_norm_gammas`): every norm's scale starts at
  `gamma_init` times its usual value (the articles claim that a gamma a
  little above 1, such as 1.25, helps very deep stacks).
* `input_offset` (`offset_inputs`): one constant added to every feature of
  the stack's input, a large shared offset ("DC component") that
  LayerNorm's mean-centring removes and RMSNorm keeps.

The embeddings are built here too (`embed_tokens`): their initial spread
(`embedding_std`; small values give rows of near-zero variance, where a
norm's epsilon matters) and, with `position_offset`, a per-position scalar
added to every feature instead of a position embedding (`PositionOffset`):
the only position signal, a "DC component" that carries information.

Two claims need a norm tfnorm does not ship, to compare with (experiment-only
control norms, outside the norm family):

* `ComputeDtypeLayerNorm`: a LayerNorm that computes its mean, variance and
  `variance + epsilon` in the compute dtype (float16 under the
  `mixed_float16` policy), as a plain Keras-op LayerNorm would. tfnorm's
  norms always compute them in float32; the control shows what that
  protects against ("an epsilon below 1e-6 gives NaNs in deep float16
  layers": float16 rounds 1e-8 to 0, and a square above 65504 overflows).
* `MaskedBatchNorm`: Keras's `BatchNormalization` (statistics over the
  batch and the positions, moving averages at inference) as a norm of a
  Transformer block, with the padding left out of its statistics where
  Keras's layer takes a `mask` (Keras 3 and tf_keras; Keras 2.9's layer
  takes none, so there padding counts), for "BatchNorm breaks on padded,
  variable-length sequences and small batches, where LayerNorm does not".

Neither is in `tfnorm.choices.NORMS`: `tfnorm train --norm batch` is
refused; only `tfnorm compare --norm batch` and `--statistics compute` use
them (`norm_spec`).
"""

from __future__ import annotations

import contextlib

from tfnorm import _keras
from tfnorm._keras import build_sublayer, keras, plain_axis, tf
from tfnorm.callbacks.layers import find_norm_layers
from tfnorm.layers.base_normalization import BaseNormalization
from tfnorm.layers.layer_normalization import LayerNormalization

#: A norm's scale weight by the attribute its layer keeps it in: `gamma`
#: (LayerNorm, RMSNorm, DyT, Keras's norms) or `g` (ScaleNorm, one scalar).
SCALE_ATTRIBUTES = ("gamma", "g")


def scale_norm_gammas(model, factor):
    """Multiplies every norm's scale weight in `model` by `factor`, in place.

    A norm built with its default initialiser then starts at `factor`
    (LayerNorm's, RMSNorm's and DyT's `gamma`, `MaskedBatchNorm`'s Keras
    layer's) or `factor * sqrt(d)` (ScaleNorm's `g`).

    Returns:
        The number of scale weights changed.
    """
    scaled = set()
    for _, layer in find_norm_layers(model):
        # `MaskedBatchNorm` keeps its scale in the Keras layer it wraps, which
        # the search may also find by itself: each weight is scaled once.
        for owner in (layer, getattr(layer, "batch_norm", None)):
            for attribute in SCALE_ATTRIBUTES:
                weight = getattr(owner, attribute, None)
                if hasattr(weight, "assign") and id(weight) not in scaled:
                    weight.assign(weight * factor)
                    scaled.add(id(weight))
    return len(scaled)


def offset_inputs(inputs, offset):
    """`inputs + offset` as a layer of the model (named `input_offset`)."""
    return keras.layers.Rescaling(1.0, offset=offset, name="input_offset")(inputs)


def embed_tokens(tokens, vocab_size, seq_len, d_model, std=1.0, position_offset=None):
    """The encoder tasks' embeddings of `tokens`, drawn from N(0, `std`).

    Token + learned position embeddings (layer `embedding`); with a
    `position_offset` A (a float, 0 included), token embeddings (layer
    `embedding`) and `PositionOffset(A)` (layer `position_offset`) instead.
    """
    from tfnorm.models.encoder.text_layers import TokenAndPositionEmbedding

    initializer = keras.initializers.RandomNormal(stddev=std)
    if position_offset is None:
        return TokenAndPositionEmbedding(
            vocab_size,
            seq_len,
            d_model,
            embeddings_initializer=initializer,
            name="embedding",
        )(tokens)
    embedded = keras.layers.Embedding(
        vocab_size, d_model, embeddings_initializer=initializer, name="embedding"
    )(tokens)
    return PositionOffset(position_offset, name="position_offset")(embedded)


def layered_epsilon(epsilon, deep_epsilon, num_layers):
    """The `epsilon` `build_encoder` takes: `epsilon` for every norm, or,
    with a `deep_epsilon`, one value per block: `epsilon` for blocks 0 to
    `num_layers // 2 - 1` (the shallow half), `deep_epsilon` from there up
    (the final norm takes the last block's)."""
    if deep_epsilon is None:
        return epsilon
    half = num_layers // 2
    return [epsilon if index < half else deep_epsilon for index in range(num_layers)]


def _register(cls):
    return keras.utils.register_keras_serializable(package="tfnorm_controls")(cls)


@_register
class PositionOffset(keras.layers.Layer):
    """Adds a per-position scalar to every feature: the only position signal.

    ```
    y[b, p, :] = x[b, p, :] + amplitude * (2 p / (n - 1) - 1)    p = 0 .. n-1
    ```

    The offset runs from `-amplitude` at the first position to `+amplitude`
    at the last (its mean over the positions is 0, so it adds no offset
    shared by every token). It is a "DC component": the same value in every
    feature of a token, which LayerNorm's mean-centring removes and RMSNorm
    keeps, so a model can only tell positions apart through a norm that
    keeps it.

    Args:
        amplitude: float, the offset at the last position.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, n, features)`, n >= 2.
    """

    def __init__(self, amplitude, **kwargs):
        super().__init__(**kwargs)
        self.amplitude = float(amplitude)

    def call(self, inputs):
        ramp = tf.linspace(-1.0, 1.0, tf.shape(inputs)[1])
        offset = tf.cast(self.amplitude * ramp, inputs.dtype)
        return inputs + offset[None, :, None]

    def get_config(self):
        config = super().get_config()
        config["amplitude"] = self.amplitude
        return config


@_register
class ComputeDtypeLayerNorm(LayerNormalization):
    """LayerNorm with its statistics in the compute dtype (a control).

    ```
    x16 = cast(x, compute_dtype)
    mean = mean(x16); var = mean((x16 - mean) ** 2)
    y = (x16 - mean) * rsqrt(var + cast(epsilon, compute_dtype)) * gamma + beta
    ```

    Under `mixed_float16` every step is float16: `epsilon` 1e-8 becomes 0
    (a constant row gives 0/0), and squares above 65504 become Inf. In
    float32 it equals `tfnorm.LayerNormalization`. Arguments as
    `tfnorm.LayerNormalization`.
    """

    def _normalize(self, inputs, positive):
        x = tf.cast(inputs, self.compute_dtype)
        axes = sorted(positive)
        # Plain reductions: `tf.nn.moments` would upcast float16 itself.
        mean = tf.reduce_mean(x, axis=axes, keepdims=True)
        centred = x - mean
        variance = tf.reduce_mean(tf.square(centred), axis=axes, keepdims=True)
        y = centred * tf.math.rsqrt(variance + tf.cast(self.epsilon, x.dtype))
        gamma, beta = self._gamma_beta(inputs, positive)
        if gamma is not None:
            y = y * tf.cast(gamma, x.dtype)
        if beta is not None:
            y = y + tf.cast(beta, x.dtype)
        return y


@_register
class MaskedBatchNorm(BaseNormalization):
    """Keras's `BatchNormalization` over the feature axis, as a block's norm (a control).

    In training it normalises each feature by its mean and variance over
    the batch and every (unpadded, where Keras can mask) position, and
    updates moving averages of both; at inference it uses the moving
    averages. `row_statistic` (for `tfnorm.callbacks.NormHealthMonitor`) is
    each position's variance over the features, as for LayerNorm.

    Args:
        axis: the feature axis. Defaults to `-1`.
        epsilon: added to the variance. Defaults to `1e-3` (Keras's).
        momentum: of the moving averages. Defaults to `0.99` (Keras's).
        count_padding: bool, count the padded positions in the statistics
            (the mask is not handed to Keras's layer) in every runtime.
            Defaults to `False`: left out where Keras's layer takes a mask.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: `(batch, seq, features)`.
        training: batch statistics (True) or the moving averages.
        mask: optional `(batch, seq)`, nonzero for real positions.
    """

    row_statistic_name = "variance"
    #: Its statistics span positions: blocks pass it their padding mask.
    takes_padding_mask = True

    def __init__(
        self, axis=-1, epsilon=1e-3, momentum=0.99, count_padding=False, **kwargs
    ):
        super().__init__(axis=axis, epsilon=epsilon, **kwargs)
        self.momentum = float(momentum)
        self.count_padding = bool(count_padding)

    def build(self, input_shape):
        super().build(input_shape)
        self.batch_norm = keras.layers.BatchNormalization(
            axis=plain_axis(self.axis),
            momentum=self.momentum,
            epsilon=self.epsilon,
            dtype=self.dtype_policy,
            name="batch_norm",
        )
        build_sublayer(self.batch_norm, input_shape)

    def call(self, inputs, training=None, mask=None):
        if self.count_padding:
            mask = None
        outputs = _keras.call_batch_norm(self.batch_norm, inputs, training, mask)
        return tf.cast(outputs, self.compute_dtype)

    def _row_statistic(self, x, axes):
        return tf.math.reduce_variance(x, axis=axes)

    def get_config(self):
        config = super().get_config()
        config["momentum"] = self.momentum
        config["count_padding"] = self.count_padding
        return config


def norm_spec(norm, statistics="float32", momentum=None, padding=None):
    """What `tfnorm compare` hands `build_encoder` as `norm`: the family's
    name, or one of the control classes above (the batch norm's with its
    `momentum`, and `padding` "counted" or "masked", when given)."""
    if norm == "batch":
        if momentum is None and padding != "counted":
            return MaskedBatchNorm
        # An unbuilt layer: `build_encoder` builds one like it per norm.
        options = {"count_padding": padding == "counted"}
        if momentum is not None:
            options["momentum"] = momentum
        return MaskedBatchNorm(**options)
    if statistics == "compute":
        return ComputeDtypeLayerNorm
    return norm


@contextlib.contextmanager
def compute_precision(mode):
    """The global dtype policy of `mode` ("float32" or "float16", the
    `mixed_float16` policy) while the block runs; the previous one after."""
    from tfnorm.optim.precision import set_mixed_precision

    before = _keras.global_policy_name()
    set_mixed_precision(mode)
    try:
        yield
    finally:
        _keras.set_global_policy(before)
