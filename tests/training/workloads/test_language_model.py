"""`train` with `task="lm"`: a byte-level causal language model run.

Tiny runs (one block, width 16, a dozen steps) on real English text that
ships with Python; the subprocess tests (kill -9, the command line) live in
tests/cli/test_train_lm.py.
"""

from __future__ import annotations

import json
import math
import os
import re

import numpy as np
import pytest

from tests.training.test_trainer import (
    assert_checkpoints_close,
    checkpoint_values,
    logged_losses,
    run,
)
from tfnorm._keras import keras, tf
from tfnorm.settings.config_error import ConfigError


def corpus_text(size=12000):
    from pydoc_data.topics import topics

    return "".join(topics[name] for name in sorted(topics))[:size]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(corpus_text(), encoding="utf-8")
    return str(path)


TINY_LM = {
    "task": "lm",
    "max_len": 16,
    "num_layers": 1,
    "d_model": 16,
    "num_heads": 2,
    "dff": 32,
    "batch_size": 8,
    "log_every": 1,
    "histogram_every": 0,
    "export": False,
    "learning_rate": 3e-3,
}


def lm(tmp_path, name, data, **overrides):
    return dict(TINY_LM, data=data, logdir=str(tmp_path / name), **overrides)


@pytest.fixture(scope="module")
def finished_lm(tmp_path_factory, corpus):
    tmp_path = tmp_path_factory.mktemp("lm")
    config = lm(
        tmp_path,
        "run",
        corpus,
        epochs=2,
        steps_per_epoch=6,
        checkpoint_every=4,
        histogram_every=4,
        export=True,
    )
    summary, out = run(config)
    return config, summary, out


def test_a_finished_run_reports_validation_loss_perplexity_and_bits_per_byte(
    finished_lm,
):
    config, summary, out = finished_lm
    assert summary["status"] == "completed" and summary["final_step"] == 12
    metrics = summary["metrics"]
    assert metrics["val_perplexity"] == pytest.approx(math.exp(metrics["val_loss"]))
    assert metrics["val_bits_per_byte"] == pytest.approx(
        metrics["val_loss"] / math.log(2)
    )
    # Byte tokens: a uniform guess is log2(257) = 8.0 bits per byte.
    assert 0 < metrics["val_bits_per_byte"] < 8.1
    data = summary["data"]
    assert data["vocab_size"] == 257 and data["tokenizer"] == "bytes"
    tokens = len(corpus_text().encode("utf-8")) + 1  # and the end-of-text token
    assert data["val_tokens"] == round(tokens * 0.1)
    losses = logged_losses(out)
    assert len(losses) == 12 and losses[-1] < losses[0]
    assert re.search(r"epoch 2/2 val_loss \S+ val_perplexity", out)


def test_checkpoints_histograms_and_the_recipe_file(finished_lm):
    config, summary, _ = finished_lm
    logdir = config["logdir"]
    assert summary["checkpoint"].endswith("ckpt-12")
    names = os.listdir(os.path.join(logdir, "checkpoints"))
    assert {"ckpt-8.index", "ckpt-12.index"} <= set(names)
    assert any(
        n.startswith("events") for n in os.listdir(os.path.join(logdir, "norms"))
    )
    with open(os.path.join(logdir, "language_model.json")) as handle:
        recipe = json.load(handle)
    assert recipe["build_decoder"]["preset"] == "llama"
    assert recipe["build_decoder"]["vocab_size"] == 257
    assert "language_model.json" in summary["export"]["sha256"]


def test_the_export_is_the_checkpointed_model(finished_lm):
    import tfnorm

    config, summary, _ = finished_lm
    assert summary["export"]["kind"] == "model"
    exported = keras.models.load_model(summary["model_path"], compile=False)
    with open(os.path.join(config["logdir"], "language_model.json")) as handle:
        arguments = json.load(handle)["build_decoder"]
    rebuilt = tfnorm.build_decoder(**arguments)
    tf.train.Checkpoint(model=rebuilt).restore(summary["checkpoint"]).expect_partial()
    ids = np.random.RandomState(0).randint(0, 257, size=(2, 16)).astype(np.int32)
    np.testing.assert_allclose(
        np.asarray(exported(ids)), np.asarray(rebuilt(ids)), rtol=1e-5, atol=1e-5
    )
    assert type(rebuilt.get_layer("final_norm")).__name__ == "RMSNorm"


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, corpus):
    # Dropout stays on: the checkpoint must hold the dropout generators'
    # state as well as the weights, Adam's moments and the data position.
    common = dict(steps_per_epoch=5, decay="constant", dropout_rate=0.2)
    straight, _ = run(lm(tmp_path, "straight", corpus, epochs=2, **common))
    first, _ = run(lm(tmp_path, "resumed", corpus, epochs=1, **common))
    assert first["final_step"] == 5
    second, out = run(lm(tmp_path, "resumed", corpus, epochs=2, **common))
    assert "resumed from step 5" in out and second["final_step"] == 10
    expected = checkpoint_values(straight["checkpoint"])
    actual = checkpoint_values(second["checkpoint"])
    assert expected.keys() == actual.keys() and expected
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_other_text_on_resume_is_refused(tmp_path, corpus):
    run(lm(tmp_path, "run", corpus, epochs=1, steps_per_epoch=2))
    other = tmp_path / "other.txt"
    other.write_text(corpus_text()[::-1], encoding="utf-8")
    with pytest.raises(ConfigError, match=r"checkpoint_dir|changed since"):
        run(lm(tmp_path, "run", str(other), epochs=1, steps_per_epoch=2))


def test_a_nan_stops_the_run_naming_the_first_broken_norm(tmp_path, corpus):
    common = dict(optimizer="sgd", clipnorm=None, decay="constant", steps_per_epoch=3)
    summary, out = run(
        lm(tmp_path, "run", corpus, epochs=2, learning_rate=1e30, **common)
    )
    assert summary["status"] == "nan" and summary["model_path"] is None
    assert re.search(r"first norm layer hit is \S*norm", summary["nan_report"])


def test_the_gpt2_preset_takes_the_norm_given(tmp_path, corpus):
    summary, out = run(
        lm(tmp_path, "gpt2", corpus, preset="gpt2", norm="rms", epochs=1,
           steps_per_epoch=2, export=True)
    )  # fmt: skip
    model = keras.models.load_model(summary["model_path"], compile=False)
    names = {layer.name for layer in model.layers}
    assert "position_embedding" in names and "lm_head" not in names  # tied head
    assert type(model.get_layer("final_norm")).__name__ == "RMSNorm"


def test_mirrored_over_two_cpus_follows_the_one_device_trajectory(tmp_path, corpus):
    # As the classifier's: one global batch split over two replicas sums to
    # the one device's gradient, up to float32 summation order.
    common = dict(
        epochs=1, steps_per_epoch=6, dropout_rate=0.0, clipnorm=0.5, learning_rate=1e-2
    )
    single, single_out = run(lm(tmp_path, "one", corpus, strategy="default", **common))
    mirrored, mirrored_out = run(
        lm(tmp_path, "two", corpus, strategy="mirrored",
           devices=["/cpu:0", "/cpu:1"], **common)
    )  # fmt: skip
    assert "2 replica(s)" in mirrored_out and "1 replica(s)" in single_out
    np.testing.assert_allclose(
        logged_losses(mirrored_out), logged_losses(single_out), atol=2e-4
    )
    assert_checkpoints_close(mirrored["checkpoint"], single["checkpoint"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["float16", "bfloat16"])
def test_mixed_precision_runs_train_to_finite_losses(tmp_path, corpus, mode):
    summary, out = run(
        lm(tmp_path, mode, corpus, epochs=1, steps_per_epoch=4, mixed_precision=mode)
    )
    assert f"policy mixed_{mode}" in out and summary["status"] == "completed"
    assert all(math.isfinite(v) for v in logged_losses(out))
    assert math.isfinite(summary["metrics"]["val_bits_per_byte"])


def test_a_validation_text_too_short_to_measure_by_is_warned_about(tmp_path):
    from types import SimpleNamespace

    from tfnorm.training.workloads.language_model import LanguageModelWorkload

    path = tmp_path / "a.txt"
    path.write_text(corpus_text(3000), encoding="utf-8")
    lines = []
    for val_split in (0.006, 0.1):
        config = SimpleNamespace(
            data=str(path), max_len=8, val_split=val_split, init_from=None
        )
        config.tokenizer = "bytes"
        log = SimpleNamespace(line=lines.append)
        LanguageModelWorkload(config, log).load(None, has_checkpoint=False)
    warnings = [line for line in lines if line.startswith("warning:")]
    # 18 of 3001 tokens held out: 17 predicted bytes; 300 are enough.
    assert warnings == [
        "warning: val_split=0.006 holds out 18 byte tokens of the "
        "text: the validation metrics are over 17 predicted bytes, each moving "
        "val_accuracy by 5.9%; raise val_split to hold out at least 101 tokens "
        "for a steadier measure"
    ]
