"""The checks of `TrainConfig.resolve` that involve several settings."""

from __future__ import annotations

import pytest

from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig


@pytest.mark.parametrize(
    "values, key",
    [
        ({"task": "sorted", "d_model": 64, "num_heads": 5}, "d_model"),
        ({"task": "duplicate", "vocab_size": 10}, "vocab_size"),
        ({"task": "majority", "num_classes": 40}, "num_classes"),
        ({"task": "sorted", "vocab_size": 2**30}, "vocab_size"),
        ({"task": "sorted", "max_len": 20000}, "max_len"),
        ({"task": "sorted", "epsilon": 1e-46}, "epsilon"),
        ({"task": "sorted", "norm": "batch"}, "norm"),
        # The norm's own epsilon is the norm spec's fault, not --epsilon's.
        ({"task": "sorted", "norm": {"class_name": "LayerNormalization", "module": "keras.layers", "config": {"epsilon": -1.0}}}, "norm"),
        ({"task": "sorted", "data": "train.csv"}, "task"),
        ({}, "task"),
    ],
)  # fmt: skip
def test_bad_combinations_name_the_key_to_change_and_the_values(values, key):
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict(values).resolve()
    assert info.value.key == key
    assert "Received:" in str(info.value) and "\n" not in str(info.value)


def test_val_data_needs_a_data_file(tmp_path):
    val = tmp_path / "val.csv"
    val.write_text("text,label\na,0\n")
    with pytest.raises(
        ConfigError, match=r"^val_data needs data; synthetic tasks"
    ) as info:
        TrainConfig(task="sorted", val_data=str(val)).resolve()
    assert info.value.key == "val_data"


def test_a_language_models_size_counts_its_bpe_vocabulary(tmp_path):
    # The byte vocabulary (257) was counted whatever `tokenizer` said.
    text = tmp_path / "text.txt"
    text.write_text("some text. " * 30, encoding="utf-8")
    values = dict(task="lm", data=str(text), d_model=4096, num_heads=8, dff=64)
    TrainConfig(**values).resolve()
    with pytest.raises(
        ConfigError, match=r"about 4\.4e\+09 weights.*tokenizer='bpe:1048576'"
    ) as info:
        TrainConfig(tokenizer="bpe:1048576", **values).resolve()
    assert info.value.key == "tokenizer"
