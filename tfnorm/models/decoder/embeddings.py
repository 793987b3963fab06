"""The layers `build_decoder` puts around its blocks: token and position embeddings.

Registered so a saved decoder reloads with only `import tfnorm`.
"""

from __future__ import annotations

from tfnorm._checks import check_positive_int
from tfnorm._keras import Layer, add_weight, keras, register_serializable, tf


@register_serializable
class TokenEmbedding(Layer):
    """A token embedding table that can also serve as the output head.

    ```
    forward:  y[b, t] = embeddings[ids[b, t]]          (batch, seq, d_model)
    reverse:  logits = x · embeddings^T                (batch, seq, vocab_size)
    ```

    Calling it with `reverse=True` ties the language-model head to the
    embedding (GPT-2): one `(vocab_size, d_model)` table, used twice. The
    reverse call returns float32 logits under mixed precision, as the loss
    needs. The table is stored in the variable dtype and cast to the compute
    dtype where used.

    Example:

    >>> import numpy as np, tfnorm
    >>> embed = tfnorm.models.TokenEmbedding(100, 16)
    >>> x = embed(np.array([[1, 2, 3]]))
    >>> embed(x, reverse=True).shape
    TensorShape([1, 3, 100])

    Args:
        vocab_size: int, the number of token ids.
        d_model: int, the embedding width.
        embeddings_initializer: initializer of the table. Defaults to
            `RandomNormal(stddev=0.02)` (GPT-2, LLaMA).
        **kwargs: base layer arguments.
    """

    def __init__(self, vocab_size, d_model, embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        if embeddings_initializer is None:
            embeddings_initializer = {
                "class_name": "RandomNormal",
                "config": {"mean": 0.0, "stddev": 0.02},
            }
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)

    def build(self, input_shape):
        self.embeddings = add_weight(
            self,
            "embeddings",
            (self.vocab_size, self.d_model),
            self.embeddings_initializer,
            autocast=False,
        )
        self.built = True

    def call(self, inputs, reverse=False):
        if reverse:
            table = tf.cast(self.embeddings, self.compute_dtype)
            logits = tf.matmul(
                tf.cast(inputs, self.compute_dtype), table, transpose_b=True
            )
            return tf.cast(logits, tf.float32)
        ids = tf.cast(inputs, tf.int32)
        return tf.cast(tf.gather(self.embeddings, ids), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config


@register_serializable
class PositionEmbedding(Layer):
    """Adds a learned embedding of each absolute position to a sequence.

    ```
    y[b, t] = x[b, t] + embeddings[start_index + t]
    ```

    `start_index` (default 0) lets a generation step at position `i` add the
    embedding of `i`.

    Args:
        max_len: int, the number of positions.
        d_model: int, the embedding width.
        embeddings_initializer: initializer of the table. Defaults to
            `RandomNormal(stddev=0.01)` (GPT-2's position table).
        **kwargs: base layer arguments.
    """

    def __init__(self, max_len, d_model, embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self.max_len = check_positive_int("max_len", max_len)
        self.d_model = check_positive_int("d_model", d_model)
        if embeddings_initializer is None:
            embeddings_initializer = {
                "class_name": "RandomNormal",
                "config": {"mean": 0.0, "stddev": 0.01},
            }
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.embeddings = add_weight(
            self,
            "embeddings",
            (self.max_len, self.d_model),
            self.embeddings_initializer,
            autocast=False,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        length = tf.shape(inputs)[1]
        rows = tf.cast(start_index, tf.int32) + tf.range(length)
        table = tf.gather(self.embeddings, rows)
        return inputs + tf.cast(table, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_len": self.max_len,
                "d_model": self.d_model,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
            }
        )
        return config
