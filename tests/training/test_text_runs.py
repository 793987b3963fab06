"""Text-file runs: name labels saved and checked, the split, truncation reported."""

from __future__ import annotations

import io
import json
import os

import pytest

from tfnorm.training import train
from tfnorm.training.data import DataError


def write_reviews(path, count=30):
    rows = ["text,label"]
    for i in range(count):
        good = i % 2 == 0
        word = "great" if good else "awful"
        rows.append(
            f"the film was {word} {'and long ' * (i % 5)},{'pos' if good else 'neg'}"
        )
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def tiny(tmp_path, data, **overrides):
    config = dict(
        data=data,
        logdir=str(tmp_path / "run"),
        max_len=6,
        num_layers=1,
        d_model=8,
        num_heads=2,
        dff=16,
        batch_size=8,
        epochs=1,
        histogram_every=0,
        export=False,
    )
    config.update(overrides)
    return config


def test_name_labels_split_and_truncation_are_saved_and_reported(tmp_path):
    data = write_reviews(tmp_path / "reviews.csv")
    out = io.StringIO()
    summary = train(tiny(tmp_path, data), stdout=out)
    assert summary["status"] == "completed"
    lines = out.getvalue().splitlines()
    assert "validation: 3 of the 30 examples" in lines[0]
    assert "max_len 6 cuts 16 of 27 training texts" in lines[1]
    assert "max_len 12 would keep 95%" in lines[1]
    # AdamW's decay says what it shrinks before the first step.
    assert "weight decay 0.01 on" in lines[2]
    assert "starting from step 0" in lines[3]
    data_section = summary["data"]
    assert data_section["label_names"] == ["neg", "pos"]
    assert (data_section["train_examples"], data_section["val_examples"]) == (27, 3)
    assert data_section["truncation"]["train_cut"] == 16
    assert data_section["val_split"] == 0.1
    assert "val_accuracy" in summary["metrics"]
    for directory in ("run", os.path.join("run", "checkpoints")):
        with open(tmp_path / directory / "labels.json") as handle:
            assert json.load(handle) == ["neg", "pos"]


def test_resume_refuses_checkpoints_of_another_label_set(tmp_path):
    data = write_reviews(tmp_path / "reviews.csv")
    train(tiny(tmp_path, data), stdout=io.StringIO())
    saved = tmp_path / "run" / "checkpoints" / "labels.json"
    saved.write_text('["bad", "good"]')
    with pytest.raises(DataError, match=r"its labels \(neg, pos\) differ"):
        train(tiny(tmp_path, data, epochs=2), stdout=io.StringIO())
    assert saved.read_text() == '["bad", "good"]'


def test_resume_refuses_another_val_split(tmp_path):
    from tfnorm.settings.config_error import ConfigError

    data = write_reviews(tmp_path / "reviews.csv")
    train(tiny(tmp_path, data), stdout=io.StringIO())
    with pytest.raises(ConfigError, match=r"val_split: checkpoint 0.1, now 0.2"):
        train(tiny(tmp_path, data, epochs=2, val_split=0.2), stdout=io.StringIO())
