"""Small layers `build_classifier` puts around the encoder.

Token + position embeddings, the padding mask derived from token ids, and
pooling that ignores padding. Registered so a saved classifier reloads with
only `import tfnorm`.
"""

from __future__ import annotations

from tfnorm._checks import check_choice
from tfnorm._keras import Layer, build_sublayer, keras, register_serializable, tf
from tfnorm.choices import POOLINGS


@register_serializable
class TokenAndPositionEmbedding(Layer):
    """Learned token embeddings plus learned absolute position embeddings.

    ```
    y[b, t] = token_embedding[ids[b, t]] + position_embedding[t]
    ```

    Sequences may be shorter than `max_len` (positions `0 .. seq-1` are
    used). Sublayers: `token_embedding`, `position_embedding`.

    Args:
        vocab_size: int, number of token ids (id 0 is padding by
            convention, but gets an embedding like any other id).
        max_len: int, the longest sequence.
        d_model: int, the embedding width.
        embeddings_initializer: initializer of both tables. Defaults to
            `"uniform"` (Keras's Embedding default).
        **kwargs: base layer arguments.
    """

    def __init__(
        self, vocab_size, max_len, d_model, embeddings_initializer="uniform", **kwargs
    ):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.max_len = int(max_len)
        self.d_model = int(d_model)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def _initializer(self):
        return keras.initializers.get(
            keras.initializers.serialize(self.embeddings_initializer)
        )

    def build(self, input_shape):
        self.token_embedding = keras.layers.Embedding(
            self.vocab_size,
            self.d_model,
            embeddings_initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        build_sublayer(self.token_embedding, input_shape)
        self.position_embedding = keras.layers.Embedding(
            self.max_len,
            self.d_model,
            embeddings_initializer=self._initializer(),
            dtype=self.dtype_policy,
            name="position_embedding",
        )
        build_sublayer(self.position_embedding, (None,))
        self.built = True

    def call(self, token_ids):
        positions = tf.range(tf.shape(token_ids)[1])
        return self.token_embedding(token_ids) + self.position_embedding(positions)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.d_model,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "max_len": self.max_len,
                "d_model": self.d_model,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config


@register_serializable
class PaddingMask(Layer):
    """`(batch, seq)` float32 mask from token ids: 1 for real tokens, 0 for `pad_id`.

    Args:
        pad_id: int, the padding token id. Defaults to `0`.
        **kwargs: base layer arguments.
    """

    def __init__(self, pad_id=0, **kwargs):
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.pad_id = int(pad_id)

    def call(self, token_ids):
        return tf.cast(tf.not_equal(token_ids, self.pad_id), tf.float32)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["pad_id"] = self.pad_id
        return config


@register_serializable
class SequencePooling(Layer):
    """Pools `(batch, seq, d)` to `(batch, d)`, ignoring padded positions.

    ```
    "mean": y = sum_t(mask[t] * x[t]) / max(sum_t(mask[t]), 1)
    "cls":  y = x[:, 0]      (the first token, e.g. a [CLS] token)
    ```

    The mean is accumulated in float32 so float16 inputs cannot overflow.
    A sequence that is all padding pools to zeros.

    Args:
        pooling: `"mean"` or `"cls"`. Defaults to `"mean"`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: a list `[x, padding_mask]`, the mask `(batch, seq)` with 1
            for real tokens (or just `x`, then every position counts).
    """

    def __init__(self, pooling="mean", **kwargs):
        super().__init__(**kwargs)
        self.pooling = validate_pooling(pooling)

    def call(self, inputs):
        if isinstance(inputs, (list, tuple)):
            x, mask = inputs
        else:
            x, mask = inputs, None
        if self.pooling == "cls":
            return x[:, 0]
        values = tf.cast(x, tf.float32)
        if mask is None:
            mask = tf.ones(tf.shape(x)[:2], tf.float32)
        mask = tf.cast(mask, tf.float32)[:, :, tf.newaxis]
        total = tf.reduce_sum(values * mask, axis=1)
        count = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
        return tf.cast(total / count, x.dtype)

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, (list, tuple)) and not isinstance(
            input_shape[0], (int, type(None))
        ):
            input_shape = input_shape[0]
        shape = tf.TensorShape(input_shape)
        return (shape[0], shape[-1])

    def get_config(self):
        config = super().get_config()
        config["pooling"] = self.pooling
        return config


def validate_pooling(pooling):
    return check_choice("pooling", pooling, POOLINGS)
