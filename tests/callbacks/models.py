"""Small models and readers shared by the callback tests."""

from __future__ import annotations

import numpy as np

import tfnorm
from tfnorm._keras import keras

SEQ, WIDTH = 4, 8


def block_model(name="block_0"):
    """A functional Pre-LN-like block: two tfnorm norms around a Dense."""
    inputs = keras.Input((SEQ, WIDTH))
    h = tfnorm.LayerNormalization(name="attention_norm")(inputs)
    h = keras.layers.Dense(WIDTH, name="mix")(h)
    h = tfnorm.RMSNorm(name="ffn_norm")(h)
    return keras.Model(inputs, h, name=name)


def nested_model(dropout_rate=0.0):
    """A functional block model nested inside another functional model."""
    inputs = keras.Input((SEQ, WIDTH))
    h = block_model("block_0")(inputs)
    if dropout_rate:
        h = keras.layers.Dropout(dropout_rate, name="dropout")(h)
    h = keras.layers.LayerNormalization(name="final_norm")(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    outputs = keras.layers.Dense(1, dtype="float32", name="head")(h)
    return keras.Model(inputs, outputs, name="outer")


def sequential_model():
    """A Sequential model with Keras's own LayerNormalization."""
    return keras.Sequential(
        [
            keras.Input((WIDTH,)),
            keras.layers.Dense(WIDTH, name="hidden"),
            keras.layers.LayerNormalization(name="keras_norm"),
            keras.layers.Dense(1, name="head"),
        ],
        name="seq",
    )


class TwoNormBlock(keras.layers.Layer):
    """A subclassed composite layer holding its norms in a list."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.norms = [
            tfnorm.LayerNormalization(name="first_norm"),
            tfnorm.ScaleNorm(name="second_norm"),
        ]
        self.dense = keras.layers.Dense(WIDTH, name="inner")

    def build(self, input_shape):
        for norm in self.norms:
            norm.build(input_shape)
        self.dense.build(input_shape)
        self.built = True

    def call(self, x):
        return self.norms[1](self.dense(self.norms[0](x)) + x)


def composite_model():
    inputs = keras.Input((SEQ, WIDTH))
    h = TwoNormBlock(name="block")(inputs)
    h = keras.layers.Flatten()(h)
    return keras.Model(inputs, keras.layers.Dense(1, name="head")(h), name="comp")


class StepCounter(keras.callbacks.Callback):
    """Counts the training steps `fit` ran."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1


def regression_data(shape, n=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n,) + tuple(shape)).astype("float32")
    y = rng.normal(size=(n, 1)).astype("float32")
    return x, y


def classifier(num_layers=2, dropout_rate=0.1):
    return tfnorm.build_classifier(
        40,
        8,
        3,
        num_layers=num_layers,
        d_model=16,
        num_heads=2,
        dff=32,
        dropout_rate=dropout_rate,
    )


def classifier_data(n=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 40, size=(n, 8)).astype("int32")
    x[: n // 2, 6:] = 0  # padding
    y = rng.integers(0, 3, size=(n,)).astype("int32")
    return x, y


def compile_classifier(model):
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def read_events(log_dir):
    """TensorBoard's own reader over `log_dir`: `{plugin: {tag: [steps]}}`."""
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(log_dir), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    found = {}
    for plugin in ("histograms", "scalars"):
        try:
            tags = accumulator.PluginTagToContent(plugin)
        except KeyError:  # nothing written for this plugin
            tags = {}
        found[plugin] = {
            tag: [event.step for event in accumulator.Tensors(tag)] for tag in tags
        }
    return found, accumulator
