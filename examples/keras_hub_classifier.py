"""A keras-hub backbone with a classification head, built from a config (no download).

`BertBackbone` is built from its constructor arguments, as a checkpoint's
config would give them, so nothing is fetched; in your own module load real
weights with `keras_hub.models.BertBackbone.from_preset(...)` where you have
network access. tfnorm's monitoring finds the LayerNormalizations inside
keras-hub's `TransformerEncoder`s, so `LOGDIR/norms` shows every one of them.
Keras 3 only (keras-hub needs it).

    nohup tfnorm train --model-fn examples/keras_hub_classifier.py:build_model \\
        --data-fn examples/keras_hub_classifier.py:load_data \\
        --epochs 3 --logdir runs/keras-hub-classifier &
"""

import keras
import keras_hub
import numpy as np

VOCAB_SIZE = 200
MAX_LEN = 32


def build_model():
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB_SIZE,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=MAX_LEN,
    )
    inputs = {
        "token_ids": keras.Input((MAX_LEN,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input((MAX_LEN,), dtype="int32", name="segment_ids"),
        "padding_mask": keras.Input((MAX_LEN,), dtype="int32", name="padding_mask"),
    }
    pooled = backbone(inputs)["pooled_output"]
    outputs = keras.layers.Dense(2)(keras.layers.Dropout(0.1)(pooled))
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def load_data(num_examples=2000, seed=0):
    """`(train, validation)` as dicts of arrays keyed like the backbone's inputs."""
    rng = np.random.RandomState(seed)
    low = rng.randint(1, VOCAB_SIZE // 2, size=(num_examples, MAX_LEN))
    high = rng.randint(VOCAB_SIZE // 2, VOCAB_SIZE, size=(num_examples, MAX_LEN))
    share = rng.uniform(0.2, 0.8, size=(num_examples, 1))
    ids = np.where(rng.uniform(size=(num_examples, MAX_LEN)) < share, low, high)
    x = {
        "token_ids": ids.astype("int32"),
        "segment_ids": np.zeros_like(ids, dtype="int32"),
        "padding_mask": np.ones_like(ids, dtype="int32"),
    }
    y = (share[:, 0] > 0.5).astype("int32")
    split = num_examples * 4 // 5
    train = ({k: v[:split] for k, v in x.items()}, y[:split])
    validation = ({k: v[split:] for k, v in x.items()}, y[split:])
    return train, validation
