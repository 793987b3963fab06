"""Tests for the Post-LN vs Pre-LN experiment, `tfnorm.experiments.warmup`."""

from __future__ import annotations

import csv
import glob
import json
import os

import numpy as np
import pytest

from tfnorm._keras import tf
from tfnorm.experiments import warmup

TINY = {
    "num_layers": 2,
    "d_model": 16,
    "num_heads": 2,
    "dff": 32,
    "vocab_size": 6,
    "seq_len": 5,
    "batch_size": 8,
    "steps": 6,
    "learning_rate": 1e-2,
    "warmup_steps": 4,
    "seeds": (3,),
    "eval_size": 32,
    "eval_every": 3,
    "jit_compile": False,
}


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("compare"))
    lines = []
    result = warmup.run_comparison(output_dir, log=lines.append, **TINY)
    return output_dir, result, lines


def test_writes_one_table_row_per_variant(tiny_result):
    output_dir, result, lines = tiny_result
    names = [row["variant"] for row in result["table"]]
    assert names == [
        "post-LN, no warm-up",
        "post-LN, warm-up 4",
        "pre-LN, no warm-up",
        "pre-LN, warm-up 4",
    ]
    with open(os.path.join(output_dir, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [row["variant"] for row in rows] == names
    with open(os.path.join(output_dir, "results.md")) as f:
        markdown = f.read().splitlines()
    assert len(markdown) == 2 + len(names)
    assert all(name in "\n".join(markdown) for name in names)
    with open(os.path.join(output_dir, "results.json")) as f:
        saved = json.load(f)
    assert saved["table"] == json.loads(json.dumps(result["table"]))
    assert saved["config"]["steps"] == TINY["steps"]
    assert len(lines) == 1 + len(names)  # a header and one line per run


def test_every_run_records_its_curves(tiny_result):
    _, result, _ = tiny_result
    assert len(result["runs"]) == 4
    for run in result["runs"]:
        assert len(run["losses"]) == TINY["steps"]
        assert np.all(np.isfinite(run["losses"]))
        assert run["eval_steps"] == [3, 6]
        assert all(0.0 <= a <= 1.0 for a in run["eval_accuracy"])
        assert len(run["init_layer_gradient_norms"]) == TINY["num_layers"]
        assert all(n > 0 for n in run["init_layer_gradient_norms"])
        assert run["max_gradient_norm_early"] == max(run["gradient_norms"])


def test_warmup_changes_training_but_not_the_initialisation(tiny_result):
    _, result, _ = tiny_result
    by_name = {run["variant"]: run for run in result["runs"]}
    for position in ("post", "pre"):
        plain = by_name[f"{position}-LN, no warm-up"]
        warm = by_name[f"{position}-LN, warm-up 4"]
        # Same seed, same weights: identical first loss and gradients at init.
        assert warm["losses"][0] == pytest.approx(plain["losses"][0], rel=1e-5)
        np.testing.assert_allclose(
            warm["init_layer_gradient_norms"],
            plain["init_layer_gradient_norms"],
            rtol=1e-5,
        )
        assert warm["losses"][-1] != pytest.approx(plain["losses"][-1], rel=1e-4)
    post = by_name["post-LN, no warm-up"]["init_layer_gradient_norms"]
    pre = by_name["pre-LN, no warm-up"]["init_layer_gradient_norms"]
    assert not np.allclose(post, pre)


def _scalars(event_dir):
    values = {}
    for path in glob.glob(os.path.join(event_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = (
                    float(tf.make_ndarray(value.tensor))
                    if value.HasField("tensor")
                    else value.simple_value
                )
                values.setdefault(value.tag, {})[event.step] = number
    return values


def test_tensorboard_scalars_include_the_warmup_learning_rate(tiny_result):
    output_dir, result, _ = tiny_result
    runs = sorted(os.listdir(os.path.join(output_dir, "tensorboard")))
    assert runs == [
        "post_no_warmup_seed3",
        "post_warmup4_seed3",
        "pre_no_warmup_seed3",
        "pre_warmup4_seed3",
    ]
    warm = _scalars(os.path.join(output_dir, "tensorboard", "pre_warmup4_seed3"))
    assert warm["learning_rate"][0] == pytest.approx(1e-2 / 4)
    assert warm["learning_rate"][5] == pytest.approx(1e-2)
    plain = _scalars(os.path.join(output_dir, "tensorboard", "pre_no_warmup_seed3"))
    assert plain["learning_rate"][0] == pytest.approx(1e-2)
    recorded = [r for r in result["runs"] if r["variant"] == "pre-LN, no warm-up"][0]
    assert [plain["loss"][s] for s in range(TINY["steps"])] == pytest.approx(
        recorded["losses"], rel=1e-6
    )
    assert sorted(plain["eval_token_accuracy"]) == [2, 5]
    assert len(plain["init_ffn_gradient_norm"]) == TINY["num_layers"]


def test_plot_is_a_png_with_three_panels(tiny_result):
    output_dir, _, _ = tiny_result
    path = os.path.join(output_dir, "comparison.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width > 2.5 * height  # three panels side by side
    # Not a blank canvas: many distinct colours were drawn.
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 50


def test_variant_settings_choose_the_runs(tmp_path):
    settings = [("sandwich", 0), ("deepnorm", 0), ("deepnorm", 2)]
    result = warmup.run_comparison(
        str(tmp_path), variant_settings=settings, log=lambda line: None, **TINY
    )
    assert [row["variant"] for row in result["table"]] == [
        "sandwich-LN, no warm-up",
        "deepnorm-LN, no warm-up",
        "deepnorm-LN, warm-up 2",
    ]
    assert [(r["norm_position"], r["warmup_steps"]) for r in result["runs"]] == (
        settings
    )
    assert all(len(r["losses"]) == TINY["steps"] for r in result["runs"])
    assert os.path.isfile(result["paths"]["plot"])
    assert len(os.listdir(result["paths"]["tensorboard"])) == len(settings)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"layers": 2}, r"Unknown option\(s\) \['layers'\]"),
        ({"warmup_steps": 0}, "warmup_steps=0"),
        ({"steps": 0}, "steps=0"),
        ({"seeds": ()}, r"seeds=\[\]"),
        (
            {"variant_settings": [("middle", 0)]},
            r"variant_settings=\[\('middle', 0\)\]",
        ),
        ({"variant_settings": [("pre", -1)]}, r"variant_settings=\[\('pre', -1\)\]"),
        ({"variant_settings": []}, r"variant_settings=\[\]"),
    ],
)
def test_invalid_options_are_named(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        warmup.run_comparison(str(tmp_path), **overrides)
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_default_size_shows_pre_ln_training_without_warmup_where_post_ln_does_not(
    tmp_path,
):
    # The calibrated claim at the default size, on one seed (~1-2 minutes).
    result = warmup.run_comparison(str(tmp_path), seeds=(0,))
    rows = {row["variant"]: row for row in result["table"]}
    assert rows["pre-LN, no warm-up"]["seeds_reaching_target"] == 1
    assert rows["post-LN, no warm-up"]["seeds_reaching_target"] == 0
    assert rows["post-LN, no warm-up"]["final_accuracy_max"] < 0.5
