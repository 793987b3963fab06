"""`Predictor`: a finished text run's exported model on new texts."""

from __future__ import annotations

import io
import json
import os
import shutil

import numpy as np
import pytest

from tfnorm.inference.prediction import PredictionError, Predictor, predict
from tfnorm.training import train


def write_reviews(path, count=40):
    rows = ["text,label"]
    for i in range(count):
        word = ("great", "awful", "so so")[i % 3]
        label = ("pos", "neg", "meh")[i % 3]
        rows.append(f"the film was {word},{label}")
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def run_config(directory, **overrides):
    config = dict(
        data=write_reviews(directory / "reviews.csv"),
        logdir=str(directory / "run"),
        max_len=5,
        num_layers=1,
        d_model=8,
        num_heads=2,
        dff=16,
        batch_size=8,
        epochs=1,
        histogram_every=0,
        dropout_rate=0.0,
    )
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("prediction")
    summary = train(run_config(directory), stdout=io.StringIO())
    assert summary["status"] == "completed" and summary["model_path"]
    return str(directory / "run")


def test_predictions_name_the_classes_and_match_the_model(finished_run):
    predictor = Predictor(finished_run)
    assert predictor.label_names == ["meh", "neg", "pos"]
    assert predictor.max_len == 5
    results = predictor.predict(["the film was great", "awful", ""])
    assert [r["text"] for r in results] == ["the film was great", "awful", ""]
    for result in results:
        probabilities = result["probabilities"]
        assert list(probabilities) == ["meh", "neg", "pos"]
        assert sum(probabilities.values()) == pytest.approx(1.0)
        assert result["label"] == max(probabilities, key=probabilities.get)
    ids = predictor.vectorizer(np.array(["the film was great"]))
    logits = np.asarray(predictor.model(ids, training=False), dtype=np.float64)[0]
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert list(results[0]["probabilities"].values()) == pytest.approx(expected)
    (alone,) = predict(finished_run, ["awful"])
    assert alone["label"] == results[1]["label"]
    # Another batch, so float rounding may differ in the last digits.
    assert alone["probabilities"] == pytest.approx(results[1]["probabilities"])
    assert predictor.probabilities([]).shape == (0, 3)


def test_a_run_without_labels_json_is_named_by_class_id(finished_run, tmp_path):
    copy = shutil.copytree(finished_run, tmp_path / "old")
    os.remove(copy / "labels.json")
    assert Predictor(copy).label_names == ["0", "1", "2"]
    (copy / "labels.json").write_text('["a", "b"]')
    with pytest.raises(PredictionError, match=r"names 2 classes but the model has 3"):
        Predictor(copy)


def test_missing_pieces_are_one_clear_error(finished_run, tmp_path):
    with pytest.raises(PredictionError, match=r"no such run directory"):
        Predictor(tmp_path / "nope")
    copy = shutil.copytree(finished_run, tmp_path / "copy")
    os.remove(copy / "vocabulary.json")
    with pytest.raises(PredictionError, match=r"no vocabulary\.json; tfnorm predict"):
        Predictor(copy)
    for name in ("model.keras", "model", "model.h5"):
        if (copy / name).is_dir():
            shutil.rmtree(copy / name)
        elif (copy / name).exists():
            os.remove(copy / name)
    with pytest.raises(
        PredictionError, match=r"no exported model .*trained with export=False"
    ):
        Predictor(copy)
    summary = json.loads((copy / "summary.json").read_text())
    summary["status"] = "terminated"
    (copy / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(PredictionError, match=r"has not completed .*'terminated'"):
        Predictor(copy)
    os.remove(copy / "summary.json")
    with pytest.raises(PredictionError, match=r"is it the logdir of a tfnorm"):
        Predictor(copy)
