"""The same kind of classifier as a subclassed model with tfnorm's norms, fed by tf.data.

`TransformerClassifier` is a `keras.Model` subclass whose Pre-LN blocks hold
`tfnorm.RMSNorm`s; it is left uncompiled, so `tfnorm train` compiles it with
its own optimizer settings (`--learning-rate`, `--warmup-steps`, AdamW
without decay on norms, `--clipnorm`) and the loss given by `--loss`.
`load_data` returns shuffled, batched `tf.data.Dataset`s; `tfnorm train`
saves the iterator in every checkpoint, so a run killed with `kill -9`
resumes on the very next batch (the shuffle is seeded, as it must be for an
exact resume).

    nohup tfnorm train --model-fn examples/tfnorm_transformer_classifier.py:build_model \\
        --data-fn examples/tfnorm_transformer_classifier.py:load_data \\
        --loss sparse_categorical_crossentropy --from-logits --warmup-steps 20 \\
        --epochs 3 --logdir runs/tfnorm-classifier &

Both classes are registered with Keras and give their arguments in
`get_config`, so the run's export is the whole model; to load it in another
process, run this file first (as the run's summary.json `export.load` does).
"""

import numpy as np
import tensorflow as tf

import tfnorm

keras = tf.keras
layers = keras.layers

VOCAB_SIZE = 200
MAX_LEN = 32
D_MODEL = 32
NUM_HEADS = 2
BATCH_SIZE = 32

# Keras finds a saved class by this package and the class's name.
register = keras.utils.register_keras_serializable(
    package="tfnorm_transformer_classifier"
)


@register
class PreLNBlock(layers.Layer):
    def __init__(self, d_model, num_heads, dropout=0.1, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.rate = d_model, num_heads, dropout
        self.norm1 = tfnorm.RMSNorm(epsilon=1e-6)
        self.attention = layers.MultiHeadAttention(num_heads, d_model // num_heads)
        self.norm2 = tfnorm.RMSNorm(epsilon=1e-6)
        self.ffn1 = layers.Dense(4 * d_model, activation="gelu")
        self.ffn2 = layers.Dense(d_model)
        self.dropout = layers.Dropout(dropout)

    def build(self, input_shape):
        # Creates the attention's weights here, not at its first call:
        # loading a saved model builds each layer, then restores the weights
        # that exist (Keras 2.9 loses weights created later).
        zeros = tf.zeros([1] + [dim or 1 for dim in input_shape[1:]])
        self.attention(zeros, zeros)
        super().build(input_shape)

    def call(self, x, training=None):
        h = self.norm1(x)
        x = x + self.dropout(self.attention(h, h), training=training)
        h = self.ffn2(self.ffn1(self.norm2(x)))
        return x + self.dropout(h, training=training)

    def get_config(self):
        # The arguments of __init__: loading calls it with them.
        config = super().get_config()
        config.update(d_model=self.d_model, num_heads=self.num_heads, dropout=self.rate)
        return config


@register
class TransformerClassifier(keras.Model):
    def __init__(self, num_blocks=2, num_classes=2, **kwargs):
        super().__init__(**kwargs)
        self.num_blocks, self.num_classes = num_blocks, num_classes
        self.tokens = layers.Embedding(VOCAB_SIZE, D_MODEL)
        self.positions = layers.Embedding(MAX_LEN, D_MODEL)
        self.blocks = [PreLNBlock(D_MODEL, NUM_HEADS) for _ in range(num_blocks)]
        self.final_norm = tfnorm.RMSNorm(epsilon=1e-6)
        self.pool = layers.GlobalAveragePooling1D()
        self.head = layers.Dense(num_classes)

    def call(self, ids, training=None):
        x = self.tokens(ids) + self.positions(tf.range(tf.shape(ids)[1]))
        for block in self.blocks:
            x = block(x, training=training)
        return self.head(self.pool(self.final_norm(x)))

    def get_config(self):
        config = super().get_config()
        config.update(num_blocks=self.num_blocks, num_classes=self.num_classes)
        return config


def build_model():
    return TransformerClassifier()


def load_data(num_examples=2000, seed=0):
    """`(train, validation)` datasets of `(ids, label)` batches."""
    rng = np.random.RandomState(seed)
    low = rng.randint(1, VOCAB_SIZE // 2, size=(num_examples, MAX_LEN))
    high = rng.randint(VOCAB_SIZE // 2, VOCAB_SIZE, size=(num_examples, MAX_LEN))
    share = rng.uniform(0.2, 0.8, size=(num_examples, 1))
    ids = np.where(rng.uniform(size=(num_examples, MAX_LEN)) < share, low, high)
    labels = (share[:, 0] > 0.5).astype("int32")
    split = num_examples * 4 // 5
    train = (
        tf.data.Dataset.from_tensor_slices((ids[:split], labels[:split]))
        .shuffle(512, seed=seed)
        .batch(BATCH_SIZE, drop_remainder=True)
    )
    validation = tf.data.Dataset.from_tensor_slices(
        (ids[split:], labels[split:])
    ).batch(BATCH_SIZE)
    return train, validation
