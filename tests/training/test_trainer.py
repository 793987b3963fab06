"""`tfnorm.training.train`: the loop, its checkpoints, resume, NaN stop, strategies.

Every run is tiny (one block, width 16, a dozen steps); the subprocess tests
(kill -9, SIGTERM) live in tests/cli/test_train.py.
"""

from __future__ import annotations

import io
import json
import math
import os
import re

import numpy as np
import pytest

from tests.conftest import run_python
from tfnorm._keras import tf
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.data import DataError
from tfnorm.training.trainer import train

TINY = {
    "task": "sorted",
    "num_examples": 128,
    "max_len": 8,
    "num_layers": 1,
    "d_model": 16,
    "num_heads": 2,
    "dff": 32,
    "batch_size": 16,
    "log_every": 1,
    "histogram_every": 0,  # the probe is traced per run; only one test needs it
    "export": False,  # a SavedModel export takes ~20 s on TF 2.9; one test needs it
}


def tiny(tmp_path, name, **overrides):
    config = dict(TINY, logdir=str(tmp_path / name))
    config.update(overrides)
    return config


def run(config):
    out = io.StringIO()
    summary = train(config, handle_signals=False, stdout=out)
    return summary, out.getvalue()


def logged_losses(text):
    return [float(v) for v in re.findall(r"step \d+/\d+ epoch \S+ loss (\S+)", text)]


def checkpoint_values(checkpoint_path):
    """Every value a checkpoint stores (weights, optimizer state, counters), by key.

    Which object path a shared variable is stored under differs between Keras
    versions, so whole checkpoints of the same run layout are compared.
    """
    reader = tf.train.load_checkpoint(checkpoint_path)
    return {
        name: reader.get_tensor(name)
        for name, _ in tf.train.list_variables(checkpoint_path)
        if name != "_CHECKPOINTABLE_OBJECT_GRAPH"
    }


def assert_checkpoints_close(actual_path, expected_path):
    """The same keys, every value within 1e-4: weights move by ~lr = 1e-2 a
    step, and Adam's moments of gradients that are pure rounding noise
    (~1e-5) may differ in sign, hence the absolute 1e-4."""
    expected = checkpoint_values(expected_path)
    actual = checkpoint_values(actual_path)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_allclose(
            actual[name], expected[name], rtol=1e-4, atol=1e-4, err_msg=name
        )


def all_checkpoint_values_finite(checkpoint_path):
    reader = tf.train.load_checkpoint(checkpoint_path)
    for name, _ in tf.train.list_variables(checkpoint_path):
        value = reader.get_tensor(name)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            if not np.all(np.isfinite(value)):
                return False
    return True


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("finished")
    config = tiny(
        tmp_path,
        "run",
        epochs=2,
        steps_per_epoch=6,
        checkpoint_every=4,
        epoch_checkpoints=True,
        warmup_steps=3,
        histogram_every=4,
        export=True,
        log_file=str(tmp_path / "logs" / "train.log"),
    )
    summary, out = run(config)
    return config, summary, out


def test_finished_run_writes_summary_with_the_step_counts(finished_run):
    config, summary, _ = finished_run
    assert summary["status"] == "completed"
    assert summary["final_step"] == summary["total_steps"] == 12
    assert summary["resumed_from_step"] == 0
    for key in ("loss", "accuracy", "learning_rate", "val_loss", "val_accuracy"):
        assert math.isfinite(summary["metrics"][key]), key
    with open(os.path.join(config["logdir"], "summary.json")) as handle:
        on_disk = json.load(handle)
    assert on_disk["status"] == "completed" and on_disk["final_step"] == 12
    assert on_disk["model_path"] == summary["model_path"]
    assert os.path.exists(summary["model_path"])


def test_checkpoints_every_n_steps_and_at_epoch_end(finished_run):
    config, summary, out = finished_run
    saved = [int(s) for s in re.findall(r"checkpoint saved at step (\d+)", out)]
    # Every 4 steps, plus the epoch end at 6 as asked (12 is both).
    assert saved == [4, 6, 8, 12]
    checkpoint_dir = os.path.join(config["logdir"], "checkpoints")
    assert tf.train.latest_checkpoint(checkpoint_dir).endswith("ckpt-12")
    assert summary["checkpoint"].endswith("ckpt-12")
    stored = dict(tf.train.list_variables(summary["checkpoint"]))
    assert any(name.startswith("optimizer/") for name in stored)
    reader = tf.train.load_checkpoint(summary["checkpoint"])
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 12
    assert reader.get_tensor("examples_seen/.ATTRIBUTES/VARIABLE_VALUE") == 12 * 16


def test_progress_lines_go_to_stdout_and_log_file(finished_run):
    config, _, out = finished_run
    pattern = (
        r"step (\d+)/12 epoch \d/2 loss \d+\.\d+ accuracy \d\.\d+ lr \S+ "
        r"examples/s \S+ eta \S+"
    )
    assert [int(s) for s in re.findall(pattern, out)] == list(range(1, 13))
    with open(config["log_file"]) as handle:
        logged = handle.read()
    assert [int(s) for s in re.findall(pattern, logged)] == list(range(1, 13))
    assert "starting from step 0" in logged
    # Warm-up over 3 steps: the logged rate rises to the peak at step 3.
    rates = [float(r) for r in re.findall(r" lr (\S+) ", out)]
    assert rates[0] < rates[1] < rates[2] == pytest.approx(1e-3)


def test_tensorboard_scalars_and_norm_histograms(finished_run):
    config, _, _ = finished_run
    for sub in ("train", "validation", "norms"):
        directory = os.path.join(config["logdir"], sub)
        assert any(
            f.startswith("events.out.tfevents") for f in os.listdir(directory)
        ), sub
    from tensorflow.python.summary.summary_iterator import summary_iterator

    tags = set()
    directory = os.path.join(config["logdir"], "train")
    for name in os.listdir(directory):
        for event in summary_iterator(os.path.join(directory, name)):
            tags.update(value.tag for value in event.summary.value)
    assert {"loss", "accuracy", "learning_rate"} <= tags


def test_exported_model_reloads_in_a_fresh_process(finished_run, tmp_path):
    config, summary, _ = finished_run
    ids = np.random.RandomState(0).randint(1, 17, size=(4, 8)).astype(np.int32)
    assert summary["data"]["vocab_size"] == 17  # max(16, 2 * max_len + 1)
    np.save(tmp_path / "ids.npy", ids)
    output = run_python(
        f"""
        import numpy as np
        import tfnorm
        from tfnorm._keras import keras
        model = keras.models.load_model({summary["model_path"]!r})
        logits = np.asarray(model(np.load({str(tmp_path / "ids.npy")!r})))
        np.save({str(tmp_path / "logits.npy")!r}, logits)
        print(type(model).__name__)
        """
    )
    assert "Functional" in output or "Model" in output
    reloaded = np.load(tmp_path / "logits.npy")
    # Same weights as the final checkpoint, rebuilt here from the config.
    import tfnorm

    cfg = TrainConfig.from_dict(config).resolve()
    model = tfnorm.build_classifier(
        summary["data"]["vocab_size"],
        cfg.max_len,
        summary["data"]["num_classes"],
        num_layers=cfg.num_layers,
        d_model=cfg.d_model,
        num_heads=cfg.num_heads,
        dff=cfg.dff,
    )
    tf.train.Checkpoint(model=model).restore(summary["checkpoint"]).expect_partial()
    np.testing.assert_allclose(
        reloaded, np.asarray(model(ids, training=False)), rtol=1e-5, atol=1e-5
    )


def test_resumed_run_continues_exactly_where_it_stopped(tmp_path):
    # A constant rate and no dropout: the only state is what the checkpoint
    # holds (weights, Adam moments, step, data position), so a run resumed
    # half-way must end with the same weights as an uninterrupted one.
    common = dict(steps_per_epoch=5, decay="constant", dropout_rate=0.0)
    straight, _ = run(tiny(tmp_path, "straight", epochs=2, **common))
    first, _ = run(tiny(tmp_path, "resumed", epochs=1, **common))
    assert first["final_step"] == 5
    second, out = run(tiny(tmp_path, "resumed", epochs=2, **common))
    assert "resumed from step 5" in out
    assert second["resumed_from_step"] == 5
    assert second["final_step"] == straight["final_step"] == 10
    assert [int(s) for s in re.findall(r"step (\d+)/10 ", out)] == [6, 7, 8, 9, 10]
    expected = checkpoint_values(straight["checkpoint"])
    actual = checkpoint_values(second["checkpoint"])
    assert expected.keys() == actual.keys() and expected
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_rerun_of_a_finished_run_does_not_train_again(tmp_path):
    config = tiny(tmp_path, "again", epochs=1, steps_per_epoch=3)
    run(config)
    summary, out = run(config)
    assert "resumed from step 3" in out
    assert summary["status"] == "completed"
    assert summary["final_step"] == summary["resumed_from_step"] == 3
    assert not re.search(r"step \d+/3 epoch", out)


@pytest.mark.parametrize("given", ["dict", "TrainConfig", "resolved TrainConfig"])
def test_a_run_resolves_its_config_once(tmp_path, config_checks, given):
    config = tiny(tmp_path, "once", epochs=1, steps_per_epoch=2)
    if given != "dict":
        config = TrainConfig.from_dict(config)
    if given == "resolved TrainConfig":
        config = config.resolve()
    summary, _ = run(config)
    assert summary["status"] == "completed"
    assert len(config_checks) == 1


def test_resume_with_other_model_settings_is_refused(tmp_path):
    run(tiny(tmp_path, "run", epochs=1, steps_per_epoch=2))
    with pytest.raises(ConfigError, match=r"d_model: checkpoint 16, now 32") as info:
        run(tiny(tmp_path, "run", epochs=1, steps_per_epoch=2, d_model=32))
    assert info.value.key == "checkpoint_dir"


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    common = dict(optimizer="sgd", clipnorm=None, decay="constant", steps_per_epoch=4)
    good = run(tiny(tmp_path, "run", epochs=1, **common))[0]
    assert good["checkpoint"].endswith("ckpt-4")
    # A rate of 1e30 makes the weights overflow within a step or two; with a
    # checkpoint requested every step, nothing non-finite may be saved.
    summary, out = run(
        tiny(
            tmp_path,
            "run",
            epochs=3,
            learning_rate=1e30,
            checkpoint_every=1,
            export=True,
            **common,
        )
    )
    assert summary["status"] == "nan"
    assert "NaN:" in out and "stopped without saving" in out
    assert summary["model_path"] is None
    # The health monitor names where the NaN first shows in the model.
    assert re.search(r"first norm layer hit is \S*norm", summary["nan_report"])
    assert 4 <= summary["final_step"] < 12
    latest = tf.train.latest_checkpoint(os.path.join(tmp_path, "run", "checkpoints"))
    assert latest == summary["checkpoint"]
    assert all_checkpoint_values_finite(latest)
    with open(os.path.join(tmp_path, "run", "summary.json")) as handle:
        assert json.load(handle)["status"] == "nan"


def test_mirrored_over_two_cpus_follows_the_one_device_trajectory(tmp_path):
    # Same global batch, no dropout: the replicas' summed gradients equal the
    # single device's up to float32 summation order (~1e-7 relative), which
    # a few Adam steps amplify little; losses are logged to 4 decimals.
    common = dict(
        epochs=1, steps_per_epoch=6, dropout_rate=0.0, clipnorm=0.5, learning_rate=1e-2
    )
    single, single_out = run(tiny(tmp_path, "single", strategy="default", **common))
    mirrored, mirrored_out = run(
        tiny(
            tmp_path,
            "mirrored",
            strategy="mirrored",
            devices=["/cpu:0", "/cpu:1"],
            **common,
        )
    )
    assert "2 replica(s)" in mirrored_out and "1 replica(s)" in single_out
    single_losses, mirrored_losses = (
        logged_losses(single_out),
        logged_losses(mirrored_out),
    )
    assert len(single_losses) == len(mirrored_losses) == 6
    np.testing.assert_allclose(mirrored_losses, single_losses, atol=2e-4)
    assert_checkpoints_close(mirrored["checkpoint"], single["checkpoint"])


def test_batch_size_must_split_over_replicas(tmp_path):
    config = tiny(
        tmp_path,
        "odd",
        batch_size=15,
        strategy="mirrored",
        devices=["/cpu:0", "/cpu:1"],
    )
    with pytest.raises(ConfigError, match=r"Received: batch_size=15"):
        run(config)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["float16", "bfloat16"])
def test_mixed_precision_runs_train_to_finite_losses(tmp_path, mode):
    summary, out = run(
        tiny(tmp_path, mode, epochs=1, steps_per_epoch=4, mixed_precision=mode)
    )
    assert f"policy mixed_{mode}" in out
    assert summary["status"] == "completed"
    assert all(math.isfinite(v) for v in logged_losses(out))


@pytest.mark.slow
def test_text_file_run_keeps_its_vocabulary_on_resume(tmp_path):
    train_csv = tmp_path / "train.csv"
    rows = ["text,label"] + [
        f"{'good fine nice'.split()[i % 3]} day number {i},{i % 2}" for i in range(40)
    ]
    train_csv.write_text("\n".join(rows) + "\n")
    val_csv = tmp_path / "val.csv"
    val_csv.write_text("text,label\ngood day,0\nfine night,1\n")
    config = dict(
        tiny(tmp_path, "text", epochs=1, steps_per_epoch=2),
        task=None,
        data=str(train_csv),
        val_data=str(val_csv),
    )
    first, _ = run(config)
    vocabulary_path = os.path.join(tmp_path, "text", "checkpoints", "vocabulary.json")
    with open(vocabulary_path) as handle:
        vocabulary = json.load(handle)
    assert "good" in vocabulary and first["status"] == "completed"
    # The resumed run must use the saved vocabulary, not adapt a new one (a
    # changed file is refused: test_changed_data_on_resume_...). Two tokens
    # swapped in the saved file show which one it used: it saves it again.
    vocabulary[0], vocabulary[1] = vocabulary[1], vocabulary[0]
    with open(vocabulary_path, "w") as handle:
        json.dump(vocabulary, handle)
    second, out = run(dict(config, epochs=2))
    assert "resumed from step 2" in out and second["final_step"] == 4
    with open(os.path.join(tmp_path, "text", "vocabulary.json")) as handle:
        assert json.load(handle) == vocabulary
    assert second["data"]["vocab_size"] == first["data"]["vocab_size"]


def test_malformed_data_fails_before_anything_is_written(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nok,0\nbad,zero\n")
    config = dict(
        tiny(tmp_path, "bad"),
        task=None,
        data=str(bad),
        log_file=str(tmp_path / "logs" / "train.log"),
    )
    with pytest.raises(DataError, match=r"bad\.csv, line 3"):
        run(config)
    assert sorted(os.listdir(tmp_path)) == ["bad.csv"]


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"task": None}, "task"),
        ({"data": "x.csv"}, "task"),
        ({"learning_rate": 0}, "learning_rate"),
        ({"num_heads": 3}, "d_model"),
        ({"mixed_precision": "float8"}, "mixed_precision"),
        ({"strategy": "tpu"}, "strategy"),
        ({"norm": "batch"}, "norm"),
        ({"batchsize": 8}, "batchsize"),
        ({"warmup_steps": 50, "epochs": 1, "steps_per_epoch": 10}, "warmup_steps"),
    ],
)
def test_bad_settings_name_their_key(tmp_path, overrides, key):
    with pytest.raises(ConfigError) as info:
        run(tiny(tmp_path, "bad", **overrides))
    assert info.value.key == key
    assert "Received" in str(info.value)


def test_checkpoint_comes_before_evaluation_at_each_epoch_end(finished_run):
    _, _, out = finished_run
    saved = out.index("checkpoint saved at step 6")
    assert saved < out.index("epoch 1/2 val_loss") < out.index("step 7/12")


# ------------------------------------------------------ damaged checkpoints


def checkpoint_dir(tmp_path, name="run"):
    return os.path.join(tmp_path, name, "checkpoints")


def checkpoint_steps(directory):
    return sorted(
        int(m.group(1))
        for m in map(re.compile(r"^ckpt-(\d+)\.index$").match, os.listdir(directory))
        if m
    )


@pytest.mark.parametrize("state", ["garbage\n", ""])
def test_a_garbled_or_empty_state_file_resumes_from_the_newest_checkpoint(
    tmp_path, state
):
    common = dict(steps_per_epoch=4, checkpoint_every=2)
    run(tiny(tmp_path, "run", epochs=1, **common))
    directory = checkpoint_dir(tmp_path)
    with open(os.path.join(directory, "checkpoint"), "w") as handle:
        handle.write(state)
    summary, out = run(tiny(tmp_path, "run", epochs=2, **common))
    assert "resumed from step 4" in out
    assert summary["resumed_from_checkpoint"].endswith("ckpt-4")
    assert summary["skipped_checkpoints"] == [] and summary["final_step"] == 8
    # The checkpoints the damaged state file no longer listed are all kept.
    assert checkpoint_steps(directory) == [2, 4, 6, 8]
    assert tf.train.latest_checkpoint(directory).endswith("ckpt-8")


@pytest.mark.parametrize("state", ['model_checkpoint_path: "ckpt-2"\n', "garbage\n"])
def test_a_rerun_of_a_finished_run_mends_a_state_file_a_kill_left_behind(
    tmp_path, state
):
    # A kill -9 between the last checkpoint's write and the state file's
    # leaves the state file naming an older checkpoint (or, cut short, none).
    common = dict(epochs=1, steps_per_epoch=4, checkpoint_every=2)
    run(tiny(tmp_path, "run", **common))
    directory = checkpoint_dir(tmp_path)
    with open(os.path.join(directory, "checkpoint"), "w") as handle:
        handle.write(state)
    summary, out = run(tiny(tmp_path, "run", **common))
    assert "resumed from step 4" in out and summary["final_step"] == 4
    assert tf.train.latest_checkpoint(directory).endswith("ckpt-4")
    assert checkpoint_steps(directory) == [2, 4]


def truncate(path):
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)


def test_a_truncated_newest_checkpoint_is_skipped_reported_and_kept(tmp_path):
    common = dict(steps_per_epoch=4, checkpoint_every=2)
    run(tiny(tmp_path, "run", epochs=1, **common))
    directory = checkpoint_dir(tmp_path)
    truncate(os.path.join(directory, "ckpt-4.data-00000-of-00001"))
    summary, out = run(tiny(tmp_path, "run", epochs=1, **common))
    assert "resumed from step 2" in out and "skipped damaged checkpoint" in out
    [skipped] = summary["skipped_checkpoints"]
    assert skipped["path"].endswith("ckpt-4") and skipped["reason"]
    with open(os.path.join(tmp_path, "run", "summary.json")) as handle:
        assert json.load(handle)["skipped_checkpoints"] == [skipped]
    assert summary["status"] == "completed" and summary["final_step"] == 4
    # The damaged files are kept aside; the step-4 checkpoint is a new one.
    assert os.path.getsize(
        os.path.join(directory, "damaged", "ckpt-4.data-00000-of-00001")
    ) < os.path.getsize(os.path.join(directory, "ckpt-4.data-00000-of-00001"))


def test_when_no_checkpoint_restores_the_run_is_refused_and_nothing_moves(tmp_path):
    config = tiny(tmp_path, "run", epochs=1, steps_per_epoch=2)
    run(config)
    directory = checkpoint_dir(tmp_path)
    truncate(os.path.join(directory, "ckpt-2.data-00000-of-00001"))
    before = sorted(os.listdir(directory))
    with pytest.raises(ConfigError, match=r"none of the 1 checkpoint\(s\)") as info:
        run(config)
    assert info.value.key == "checkpoint_dir"
    assert sorted(os.listdir(directory)) == before


# ------------------------------------------------------------ lock, identity


def test_a_second_run_on_a_locked_directory_is_refused_naming_the_holder(tmp_path):
    from tfnorm.training.rundir.lock import DirectoryLock

    os.makedirs(checkpoint_dir(tmp_path))
    lock = DirectoryLock(checkpoint_dir(tmp_path))
    lock.acquire()
    try:
        with pytest.raises(ConfigError, match=rf"pid {os.getpid()}") as info:
            run(tiny(tmp_path, "run", epochs=1, steps_per_epoch=2))
    finally:
        lock.release()
    assert info.value.key == "checkpoint_dir"
    assert not os.path.exists(os.path.join(tmp_path, "run", "summary.json"))


def write_csv(path, count, words="good fine nice"):
    rows = ["text,label"] + [
        f"{words.split()[i % 3]} day number {i},{i % 2}" for i in range(count)
    ]
    path.write_text("\n".join(rows) + "\n")


def text_config(tmp_path, train_csv, **overrides):
    config = dict(
        tiny(tmp_path, "text", epochs=1, steps_per_epoch=2),
        task=None,
        data=str(train_csv),
    )
    config.update(overrides)
    return config


def test_a_vocabulary_without_a_checkpoint_is_not_reused(tmp_path):
    from tfnorm.training.data import save_vocabulary

    train_csv = tmp_path / "train.csv"
    write_csv(train_csv, 24)
    # Left by a run of other data that failed before its first checkpoint.
    save_vocabulary(["alpha", "beta"], checkpoint_dir(tmp_path, "text"))
    summary, out = run(text_config(tmp_path, train_csv))
    assert "no checkpoint goes with it" in out
    with open(os.path.join(checkpoint_dir(tmp_path, "text"), "vocabulary.json")) as f:
        vocabulary = json.load(f)
    assert "good" in vocabulary and "alpha" not in vocabulary
    with open(os.path.join(checkpoint_dir(tmp_path, "text"), "run_config.json")) as f:
        identity = json.load(f)["run_identity"]
    assert identity["data_sha256"] == summary["data"]["sha256"]
    assert identity["vocab_size"] == len(vocabulary) + 2


def test_changed_data_on_resume_is_refused_naming_the_file(tmp_path):
    train_csv = tmp_path / "train.csv"
    write_csv(train_csv, 24)
    run(text_config(tmp_path, train_csv))
    with open(train_csv, "a") as handle:
        handle.write("brand new words,1\n")
    with pytest.raises(ConfigError, match=r"train\.csv changed since") as info:
        run(text_config(tmp_path, train_csv, epochs=2))
    assert info.value.key == "data"
