"""A user's module for `tfnorm train --model-fn/--data-fn`, written as users do.

The keras.io-style subclassed Transformer block of tests/models/user_models.py
(Keras's own LayerNormalization held as attributes), a subclassed model
around it, and data functions of every form `data_fn` may return, plus the
broken ones the bad-input tests feed. Tiny sizes: the tests train a few
steps.
"""

import os

import numpy as np
import tensorflow as tf

# The keras.io block, as the conversion tests use it too.
from tests.models.user_models import TransformerBlock

keras = tf.keras
layers = keras.layers

VOCAB, LENGTH, WIDTH = 50, 8, 16


class Classifier(keras.Model):
    def __init__(self, num_classes=2):
        super().__init__()
        self.embedding = layers.Embedding(VOCAB, WIDTH)
        self.block = TransformerBlock(WIDTH, 2, 32)
        self.pool = layers.GlobalAveragePooling1D()
        self.head = layers.Dense(num_classes)

    def call(self, ids, training=None):
        return self.head(self.pool(self.block(self.embedding(ids), training=training)))


def arrays(num_examples=96, seed=0, num_classes=2):
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, VOCAB, size=(num_examples, LENGTH)).astype("int32")
    labels = (ids[:, 0] > ids[:, -1]).astype("int32") % num_classes
    return ids, labels


def subclassed_model():
    return Classifier()


def compiled_model():
    model = Classifier()
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def functional_model():
    ids = keras.Input((LENGTH,), dtype="int32")
    x = TransformerBlock(WIDTH, 2, 32)(layers.Embedding(VOCAB, WIDTH)(ids))
    outputs = layers.Dense(2)(layers.GlobalAveragePooling1D()(x))
    return keras.Model(ids, outputs)


def wider_model():
    """Another model: a resume of `subclassed_model`'s checkpoints must refuse it."""
    model = Classifier()
    model.head = layers.Dense(3)
    return model


def array_data():
    x, y = arrays()
    return (x[:80], y[:80]), (x[80:], y[80:])


def dataset_data():
    """A shuffled (seeded) `tf.data` pipeline, as exact resume requires."""
    x, y = arrays()
    train = (
        tf.data.Dataset.from_tensor_slices((x[:80], y[:80]))
        .shuffle(64, seed=1)
        .batch(16, drop_remainder=True)
    )
    validation = tf.data.Dataset.from_tensor_slices((x[80:], y[80:])).batch(16)
    return train, validation


def dict_data():
    x, y = arrays()
    return {"train": (x, y)}


# ------------------------------------------------------------- broken ones


def raising_model():
    raise RuntimeError("the GPU is on fire")


def no_model():
    return None


def wrong_shape_data():
    rng = np.random.RandomState(0)
    return rng.randint(1, VOCAB, size=(32, LENGTH, 3)), np.zeros(32, "int32")


def labels_outside_outputs():
    x, _ = arrays(32)
    return x, np.full(32, 7, "int32")


def not_data():
    return "train.csv"


NOT_A_FUNCTION = 42

if os.environ.get("USER_MODULE_IMPORT_FAILS"):
    raise ImportError("a missing dependency of the user's module")


class NormedBlock(layers.Layer):
    """A user's block holding its norm as an attribute."""

    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(8)
        self.norm = layers.LayerNormalization()

    def call(self, x):
        return self.norm(self.dense(x))


def float_model():
    inputs = keras.Input((4,))
    outputs = layers.Dense(2)(NormedBlock()(layers.Dense(8)(inputs)))
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def nan_data():
    """Features with a NaN: the loss is NaN at once, the nested norm sees it."""
    x = np.ones((32, 4), "float32")
    x[0, 0] = np.nan
    return x, np.zeros(32, "int32")


class UnsaveableClassifier(Classifier):
    def get_config(self):
        raise NotImplementedError("this model has no config")


def unsaveable_model():
    model = UnsaveableClassifier()
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


class Shift(layers.Layer):
    """Adds `offset`, which its config forgets: it reloads as a shift by 0,
    without an error, as a layer whose weights are not all saved does."""

    def __init__(self, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.offset = offset

    def call(self, inputs):
        return inputs + self.offset

    def get_config(self):
        return super().get_config()  # without `offset`


# Registered by name (Keras 2.9 refuses a second `register_keras_serializable`
# of the class when this file is loaded again by path).
keras.utils.get_custom_objects()["Shift"] = Shift


def forgetful_model():
    ids = keras.Input((LENGTH,), dtype="int32")
    x = layers.GlobalAveragePooling1D()(layers.Embedding(VOCAB, WIDTH)(ids))
    model = keras.Model(ids, Shift(3.0)(layers.Dense(2)(x)))
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model
