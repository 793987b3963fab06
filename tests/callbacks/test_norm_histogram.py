"""NormHistogramCallback, read back with TensorBoard's own reader and server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import tfnorm
from tests.callbacks import models
from tfnorm._keras import keras, tf
from tfnorm.callbacks import NormHistogramCallback, find_norm_layers

SCALARS = ("mean", "std", "min", "max", "nonfinite_fraction")


def _expected_tags(model, record):
    return {f"{path}/{kind}" for path, _ in find_norm_layers(model) for kind in record}


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    """A short `fit` of a build_classifier model with the callback: 4 steps/epoch."""
    log_dir = tmp_path_factory.mktemp("classifier_logs")
    keras.utils.set_random_seed(0)
    model = models.compile_classifier(models.classifier(num_layers=2))
    x, y = models.classifier_data(n=32)
    callback = NormHistogramCallback(
        log_dir, x[:8], every_n_steps=3, record=("outputs", "inputs")
    )
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[callback], verbose=0)
    return model, log_dir


def test_classifier_fit_writes_one_histogram_series_per_norm_layer(classifier_run):
    model, log_dir = classifier_run
    events, _ = models.read_events(log_dir)
    expected = _expected_tags(model, ("outputs", "inputs"))
    assert "encoder/block_1/attention_norm/outputs" in expected
    assert len(expected) == 10
    assert set(events["histograms"]) == expected
    # Every 3 steps, and at the end of each 4-step epoch.
    for tag in expected:
        assert events["histograms"][tag] == [3, 4, 6, 8], tag
        for name in SCALARS:
            assert events["scalars"][f"{tag}/{name}"] == [3, 4, 6, 8], (tag, name)


def test_classifier_scalars_describe_normalised_outputs(classifier_run):
    _, log_dir = classifier_run
    _, accumulator = models.read_events(log_dir)

    def last(tag):
        return float(tf.make_ndarray(accumulator.Tensors(tag)[-1].tensor_proto))

    for block in ("block_0", "block_1"):
        prefix = f"encoder/{block}/ffn_norm/outputs"
        # gamma ~ 1, beta ~ 0 after a few small steps: near-standard outputs.
        assert abs(last(f"{prefix}/mean")) < 0.2
        assert 0.7 < last(f"{prefix}/std") < 1.3
        assert last(f"{prefix}/min") < 0 < last(f"{prefix}/max")
        assert last(f"{prefix}/nonfinite_fraction") == 0.0
    histogram = accumulator.Tensors("encoder/final_norm/outputs")[-1]
    buckets = tf.make_ndarray(histogram.tensor_proto)  # rows: (left, right, count)
    assert buckets.shape[1] == 3
    assert buckets[:, 2].sum() == 8 * 8 * 16  # batch x length x d_model values


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_tensorboard_server_lists_the_histogram_tags(classifier_run):
    model, log_dir = classifier_run
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(log_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast=false",
            "--reload_interval=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/data/plugin/histograms/tags"
    answer = None
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            assert server.poll() is None, server.stderr.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    answer = json.loads(response.read().decode())
            except OSError:
                answer = None
            if answer and any(answer.values()):
                break
            time.sleep(1)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert answer, f"no histogram tags served at {url}"
    # One run (the log dir itself, named "."), holding every norm's tags.
    assert set(answer) == {"."}
    assert set(answer["."]) == _expected_tags(model, ("outputs", "inputs"))


@pytest.mark.parametrize(
    "make_model, shape, paths",
    [
        (
            models.nested_model,
            (models.SEQ, models.WIDTH),
            ["block_0/attention_norm", "block_0/ffn_norm", "final_norm"],
        ),
        (models.sequential_model, (models.WIDTH,), ["keras_norm"]),
        (
            models.composite_model,
            (models.SEQ, models.WIDTH),
            ["block/first_norm", "block/second_norm"],
        ),
    ],
    ids=["nested_functional", "sequential_keras_norm", "subclassed_composite"],
)
def test_fit_records_norms_of_any_model_structure(tmp_path, make_model, shape, paths):
    model = make_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data(shape, n=8)
    callback = NormHistogramCallback(tmp_path, x, every_n_steps=2)
    model.fit(x, y, batch_size=4, epochs=2, callbacks=[callback], verbose=0)
    events, _ = models.read_events(tmp_path)
    assert events["histograms"] == {f"{p}/outputs": [2, 4] for p in paths}


def test_custom_training_loop_logs_at_the_given_steps(tmp_path):
    model = models.nested_model()
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=4)
    optimizer = keras.optimizers.SGD(0.1)
    callback = NormHistogramCallback(tmp_path, x, record="inputs")
    callback.set_model(model)
    for step in range(1, 4):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        if step != 2:
            callback.log(step)
    events, _ = models.read_events(tmp_path)
    assert events["histograms"]["final_norm/inputs"] == [1, 3]
    assert set(events["histograms"]) == {
        "block_0/attention_norm/inputs",
        "block_0/ffn_norm/inputs",
        "final_norm/inputs",
    }


def test_log_without_a_model_says_how_to_set_it(tmp_path):
    callback = NormHistogramCallback(tmp_path, np.zeros((1, models.WIDTH), "float32"))
    with pytest.raises(ValueError, match="set_model"):
        callback.log(0)


def test_mixed_float16_outputs_are_recorded_as_finite_statistics(
    tmp_path, mixed_policy
):
    mixed_policy("mixed_float16")
    model = models.nested_model()
    assert model.get_layer("final_norm").compute_dtype == "float16"
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=8)
    callback = NormHistogramCallback(tmp_path, x, every_n_steps=2)
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    results = callback.log(10)
    # Compared with the same model run in float32 statistics of its output.
    reference = keras.Model(model.input, model.get_layer("final_norm").output)(x)
    reference = np.asarray(reference, dtype="float64")
    stats = results["final_norm"]["outputs"]
    assert stats["nonfinite_fraction"] == 0.0
    np.testing.assert_allclose(stats["std"], reference.std(), rtol=1e-3)
    np.testing.assert_allclose(stats["max"], reference.max(), rtol=1e-3)
    events, _ = models.read_events(tmp_path)
    assert events["histograms"]["final_norm/outputs"] == [2, 10]


def test_works_under_mirrored_strategy(tmp_path, two_device_strategy):
    with two_device_strategy.scope():
        model = models.nested_model()
        model.compile("sgd", "mse")
    x, y = models.regression_data((models.SEQ, models.WIDTH), n=16)
    callback = NormHistogramCallback(tmp_path, x[:4], every_n_steps=2)
    model.fit(x, y, batch_size=8, epochs=2, callbacks=[callback], verbose=0)
    events, _ = models.read_events(tmp_path)
    assert set(events["histograms"]) == {
        "block_0/attention_norm/outputs",
        "block_0/ffn_norm/outputs",
        "final_norm/outputs",
    }
    assert events["histograms"]["final_norm/outputs"] == [2, 4]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"record": ("weights",)}, "Received: record=('weights',)"),
        ({"record": ()}, "Received: record=()"),
        ({"max_values": 0}, "Received: max_values=0"),
        ({"every_n_steps": 1.5}, "Received: every_n_steps=1.5"),
        ({"buckets": 0}, "Received: buckets=0"),
        ({"buckets": "30"}, "Received: buckets='30'"),
        ({"layers": "all"}, "Received: layers='all'"),
        ({"layers": None}, "Received: layers=None"),
    ],
)
def test_rejects_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(
        ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
    ):
        NormHistogramCallback(tmp_path, np.zeros((1, 8), "float32"), **kwargs)


def test_is_exported_from_tfnorm_callbacks():
    assert tfnorm.callbacks.NormHistogramCallback is NormHistogramCallback


def test_repeated_fit_calls_reuse_the_traced_probe(tmp_path):
    model = models.sequential_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.WIDTH,), n=8)
    callback = NormHistogramCallback(tmp_path, x, every_n_steps=2)
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    probe = callback.probe
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    assert callback.probe is probe
    assert probe.trace_count == 1
    # Steps continue from the optimizer's count: 2 in the first fit, 4 next.
    events, _ = models.read_events(tmp_path)
    assert events["histograms"]["keras_norm/outputs"] == [2, 4]
    other = models.sequential_model()
    callback.set_model(other)
    assert callback.probe is None
    callback.log(5)
    assert callback.probe.model is other


def test_a_model_without_norms_warns_once_and_writes_nothing(tmp_path):
    inputs = keras.Input((models.WIDTH,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    callback = NormHistogramCallback(tmp_path, np.ones((2, models.WIDTH), "float32"))
    callback.set_model(model)
    with pytest.warns(UserWarning, match="no norm layer"):
        assert callback.log(1) == {}
    assert models.read_events(tmp_path)[0]["histograms"] == {}


def test_a_layer_missing_from_the_model_fails_when_fit_starts(tmp_path):
    model = models.sequential_model()
    model.compile("sgd", "mse")
    x, y = models.regression_data((models.WIDTH,), n=8)
    callback = NormHistogramCallback(tmp_path, x, every_n_steps=100, layers=["nope"])
    with pytest.raises(ValueError, match="`layers` names a layer.*'nope'"):
        model.fit(x, y, batch_size=4, callbacks=[callback], verbose=0)
    assert model.optimizer.iterations.numpy() == 0


def test_an_empty_probe_batch_is_refused_when_the_callback_is_made(tmp_path):
    with pytest.raises(ValueError, match=r"`data` holds an empty batch"):
        NormHistogramCallback(tmp_path, np.zeros((0, 8, 16), "float32"))
