"""A Transformer text classifier written the keras.io way, for `tfnorm train`.

The model is the one of the keras.io example "Text classification with
Transformer": a `TransformerBlock` layer holding Keras's own
`LayerNormalization`s, token and position embeddings, mean pooling and a
softmax head, compiled in `build_model`. The data are made here (no
download): sequences of word ids whose label says whether most words come
from the first half of the vocabulary, so the run shows learning in a
minute on a CPU.

Train it in the background (the container's SSH session, or any shell):

    nohup tfnorm train --model-fn examples/keras_transformer_classifier.py:build_model \\
        --data-fn examples/keras_transformer_classifier.py:load_data \\
        --epochs 3 --logdir runs/keras-classifier --log-file runs/keras-classifier.log &

The two layers are registered with Keras and say their arguments in
`get_config`, as Keras asks of a layer of your own: that is what lets the
run's closing export be the whole model (`model.keras`, or the SavedModel
directory `model` on TF 2.9) rather than its weights. To load it in another
process, run this file first (it registers the layers), then load the model:

    import runpy, tensorflow as tf
    runpy.run_path("examples/keras_transformer_classifier.py")
    model = tf.keras.models.load_model("runs/keras-classifier/model.keras")

Copy this file and replace `build_model` and `load_data` with yours.
"""

import numpy as np
import tensorflow as tf

keras = tf.keras
layers = keras.layers

VOCAB_SIZE = 200
MAX_LEN = 32
EMBED_DIM = 32
NUM_HEADS = 2
FF_DIM = 64

# Keras finds a saved layer's class by this package and the class's name.
register = keras.utils.register_keras_serializable(
    package="keras_transformer_classifier"
)


@register
class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim, self.num_heads, self.ff_dim, self.rate = (
            embed_dim, num_heads, ff_dim, rate
        )  # fmt: skip
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def build(self, input_shape):
        # Creates the attention's weights here, not at its first call:
        # loading a saved model builds each layer, then restores the weights
        # that exist (Keras 2.9 loses weights created later).
        zeros = tf.zeros([1] + [dim or 1 for dim in input_shape[1:]])
        self.att(zeros, zeros)
        super().build(input_shape)

    def call(self, inputs, training=None):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)

    def get_config(self):
        # The arguments of __init__: loading calls it with them.
        config = super().get_config()
        config.update(
            embed_dim=self.embed_dim,
            num_heads=self.num_heads,
            ff_dim=self.ff_dim,
            rate=self.rate,
        )
        return config


@register
class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.maxlen, self.vocab_size, self.embed_dim = maxlen, vocab_size, embed_dim
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = tf.shape(x)[-1]
        positions = tf.range(start=0, limit=maxlen, delta=1)
        return self.token_emb(x) + self.pos_emb(positions)

    def get_config(self):
        config = super().get_config()
        config.update(
            maxlen=self.maxlen, vocab_size=self.vocab_size, embed_dim=self.embed_dim
        )
        return config


def build_model():
    inputs = layers.Input(shape=(MAX_LEN,))
    x = TokenAndPositionEmbedding(MAX_LEN, VOCAB_SIZE, EMBED_DIM)(inputs)
    x = TransformerBlock(EMBED_DIM, NUM_HEADS, FF_DIM)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def load_data(num_examples=2000, seed=0):
    """`((x_train, y_train), (x_val, y_val))` as NumPy arrays."""
    rng = np.random.RandomState(seed)
    low = rng.randint(1, VOCAB_SIZE // 2, size=(num_examples, MAX_LEN))
    high = rng.randint(VOCAB_SIZE // 2, VOCAB_SIZE, size=(num_examples, MAX_LEN))
    share = rng.uniform(0.2, 0.8, size=(num_examples, 1))
    x = np.where(rng.uniform(size=(num_examples, MAX_LEN)) < share, low, high)
    y = (share[:, 0] > 0.5).astype("int32")
    split = num_examples * 4 // 5
    return (x[:split], y[:split]), (x[split:], y[split:])
