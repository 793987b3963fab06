"""Tests for the Post-LN vs Pre-LN experiment, `tfnorm.experiments.compare_experiment`."""

from __future__ import annotations

import csv
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tfnorm import _keras
from tfnorm._keras import tf
from tfnorm.experiments import compare_experiment as warmup
from tfnorm.settings.config_error import ConfigError

TINY = {
    "num_layers": 2,
    "d_model": 16,
    "num_heads": 2,
    "dff": 32,
    "vocab_size": 6,
    "seq_len": 5,
    "batch_size": 8,
    "steps": 10,
    "learning_rate": 1e-2,
    "warmup_steps": 3,
    "seeds": (3,),
    "eval_size": 32,
    "eval_every": 5,
    "histogram_every": 5,
    "jit_compile": False,
}
# Linear warm-up over 3 steps (rates 1/3, 2/3, 1 of the peak), then the peak.
TINY_MEAN_RATE = 1e-2 * (1 / 3 + 2 / 3 + 1 + 7) / 10
NAMES = [
    "post-LN, no warm-up",
    "post-LN, warm-up 3",
    f"post-LN, no warm-up, rate {TINY_MEAN_RATE:.3g}",
    "pre-LN, no warm-up",
    "pre-LN, warm-up 3",
]


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("compare"))
    lines = []
    determinism_before = _keras.op_determinism_enabled()
    result = warmup.run_comparison(output_dir, log=lines.append, **TINY)
    assert _keras.op_determinism_enabled() == determinism_before
    return output_dir, result, lines


def test_deterministic_ops_are_on_only_while_the_experiment_runs(tmp_path):
    seen = []
    with _keras.deterministic_ops():
        seen.append(_keras.op_determinism_enabled())
    assert seen == [True] and not _keras.op_determinism_enabled()
    # Left on by a caller, it stays on.
    tf.config.experimental.enable_op_determinism()
    try:
        with _keras.deterministic_ops():
            pass
        assert _keras.op_determinism_enabled()
    finally:
        from tensorflow.python.framework import config

        config.disable_op_determinism()


def test_writes_one_table_row_per_variant_and_one_per_seed(tiny_result):
    output_dir, result, lines = tiny_result
    assert [row["variant"] for row in result["table"]] == NAMES
    with open(os.path.join(output_dir, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [row["variant"] for row in rows] == NAMES
    with open(os.path.join(output_dir, "results.md")) as f:
        markdown = f.read()
    summary, rest = markdown.split("Every seed:")
    per_seed, controls = rest.split("NaN/Inf and the norms' train/inference gap:")
    assert len(summary.strip().splitlines()) == 2 + len(NAMES)
    assert len(per_seed.strip().splitlines()) == 2 + len(NAMES)
    assert len(controls.strip().splitlines()) == 2 + len(NAMES)
    with open(os.path.join(output_dir, "results.json")) as f:
        saved = json.load(f)
    assert saved["table"] == json.loads(json.dumps(result["table"]))
    assert saved["config"]["steps"] == TINY["steps"]
    assert saved["task"]["name"] == "reverse"
    assert saved["task"]["chance_accuracy"] == pytest.approx(1 / 6)
    assert len(lines) == 1 + len(NAMES)  # a header and one line per run


def test_rows_carry_the_rates_and_lengths_that_isolate_warmup(tiny_result):
    _, result, _ = tiny_result
    rows = {row["variant"]: row for row in result["table"]}
    warm, control = rows[NAMES[1]], rows[NAMES[2]]
    assert warm["learning_rate"] == pytest.approx(1e-2)
    assert warm["warmup_steps"] == 3 and warm["steps"] == 10
    assert warm["mean_learning_rate"] == pytest.approx(TINY_MEAN_RATE)
    # The control trains at the warm-up run's mean rate, without warm-up.
    assert control["warmup_steps"] == 0
    assert control["learning_rate"] == pytest.approx(TINY_MEAN_RATE)
    assert control["mean_learning_rate"] == pytest.approx(TINY_MEAN_RATE)
    plain = rows[NAMES[0]]
    assert plain["mean_learning_rate"] == pytest.approx(1e-2)


def test_every_run_records_its_curves(tiny_result):
    _, result, _ = tiny_result
    assert len(result["runs"]) == len(NAMES)
    for run in result["runs"]:
        assert len(run["losses"]) == TINY["steps"]
        assert np.all(np.isfinite(run["losses"]))
        assert run["eval_steps"] == [5, 10]
        assert all(0.0 <= a <= 1.0 for a in run["eval_accuracy"])
        assert len(run["init_layer_gradient_norms"]) == TINY["num_layers"]
        assert all(n > 0 for n in run["init_layer_gradient_norms"])


def test_early_gradient_norm_leaves_out_step_0(tiny_result):
    _, result, _ = tiny_result
    for run in result["runs"]:
        norms = run["gradient_norms"]
        assert run["gradient_norm_step0"] == norms[0]
        assert run["max_gradient_norm_early"] == max(norms[1:])
    # Step 0 is at the initial weights: the same for every variant of a seed.
    post = [r["gradient_norm_step0"] for r in result["runs"][:3]]
    assert post == pytest.approx([post[0]] * 3, rel=1e-5)


def test_warmup_changes_training_but_not_the_initialisation(tiny_result):
    _, result, _ = tiny_result
    by_name = {run["variant"]: run for run in result["runs"]}
    for position in ("post", "pre"):
        plain = by_name[f"{position}-LN, no warm-up"]
        warm = by_name[f"{position}-LN, warm-up 3"]
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


def test_the_same_call_gives_the_same_numbers(tiny_result, tmp_path):
    _, result, _ = tiny_result
    again = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        variant_settings=[("post", 0)],
        **{**TINY, "histogram_every": 0},
    )
    first = result["runs"][0]
    assert again["runs"][0]["losses"] == first["losses"]
    assert again["runs"][0]["eval_accuracy"] == first["eval_accuracy"]


def _events(event_dir):
    scalars, histograms = {}, {}
    for path in glob.glob(os.path.join(event_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.HasField("tensor"):
                    array = tf.make_ndarray(value.tensor)
                    if array.ndim == 2:  # a histogram: (buckets, 3)
                        histograms.setdefault(value.tag, {})[event.step] = array
                        continue
                    number = float(array)
                else:
                    number = value.simple_value
                scalars.setdefault(value.tag, {})[event.step] = number
    return scalars, histograms


def test_tensorboard_scalars_include_the_warmup_learning_rate(tiny_result):
    output_dir, result, _ = tiny_result
    runs = sorted(os.listdir(os.path.join(output_dir, "tensorboard")))
    assert runs == sorted(
        [
            "post_no_warmup_seed3",
            "post_warmup3_seed3",
            f"post_no_warmup_rate{TINY_MEAN_RATE:.3g}_seed3",
            "pre_no_warmup_seed3",
            "pre_warmup3_seed3",
        ]
    )
    warm, _ = _events(os.path.join(output_dir, "tensorboard", "pre_warmup3_seed3"))
    assert warm["learning_rate"][0] == pytest.approx(1e-2 / 3)
    assert warm["learning_rate"][2] == pytest.approx(1e-2)
    assert warm["learning_rate"][9] == pytest.approx(1e-2)  # held after warm-up
    plain, _ = _events(os.path.join(output_dir, "tensorboard", "pre_no_warmup_seed3"))
    assert plain["learning_rate"][0] == pytest.approx(1e-2)
    recorded = [r for r in result["runs"] if r["variant"] == "pre-LN, no warm-up"][0]
    assert [plain["loss"][s] for s in range(TINY["steps"])] == pytest.approx(
        recorded["losses"], rel=1e-6
    )
    assert sorted(plain["eval_token_accuracy"]) == [4, 9]
    assert len(plain["init_ffn_gradient_norm"]) == TINY["num_layers"]


def test_tensorboard_has_histograms_of_every_norm_output_per_run(tiny_result):
    output_dir, _, _ = tiny_result
    for run in os.listdir(os.path.join(output_dir, "tensorboard")):
        scalars, histograms = _events(
            os.path.join(output_dir, "tensorboard", run, "norms")
        )
        # Two norms per block (attention, FFN), and Pre-LN's final norm.
        expected = 2 * TINY["num_layers"] + (1 if run.startswith("pre") else 0)
        assert len(histograms) == expected, sorted(histograms)
        for tag, by_step in histograms.items():
            assert tag.endswith("/outputs")
            assert sorted(by_step) == [0, 5, 10]
            assert by_step[0][:, 2].sum() > 0  # bucket counts
        # A normalised output has (about) zero mean over its features.
        means = [v[0] for t, v in scalars.items() if t.endswith("outputs/mean")]
        assert means and all(abs(m) < 0.5 for m in means)


def test_plot_is_a_png_with_four_panels(tiny_result):
    output_dir, _, _ = tiny_result
    path = os.path.join(output_dir, "comparison.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert width > 3.5 * height  # four panels side by side
    # Not a blank canvas: many distinct colours were drawn.
    assert len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 50


def test_variant_settings_choose_the_runs(tmp_path):
    settings = [("sandwich", 0), ("deepnorm", 0), ("deepnorm", 2), ("pre", 0, 1e-3)]
    result = warmup.run_comparison(
        str(tmp_path),
        variant_settings=settings,
        log=lambda line: None,
        **{**TINY, "histogram_every": 0},
    )
    assert [row["variant"] for row in result["table"]] == [
        "sandwich-LN, no warm-up",
        "deepnorm-LN, no warm-up",
        "deepnorm-LN, warm-up 2",
        "pre-LN, no warm-up, rate 0.001",
    ]
    assert [(r["norm_position"], r["warmup_steps"]) for r in result["runs"]] == [
        s[:2] for s in settings
    ]
    assert result["runs"][-1]["learning_rate"] == pytest.approx(1e-3)
    assert all(len(r["losses"]) == TINY["steps"] for r in result["runs"])
    assert os.path.isfile(result["paths"]["plot"])
    assert len(os.listdir(result["paths"]["tensorboard"])) == len(settings)


def test_the_variants_setting_chooses_the_runs_as_variant_settings_does(tmp_path):
    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        **{**TINY, "histogram_every": 0, "variants": "post:2 pre:0:1e-3"},
    )
    assert [row["variant"] for row in result["table"]] == [
        "post-LN, warm-up 2",
        "pre-LN, no warm-up, rate 0.001",
    ]
    variants = [list(v) for v in result["config"]["variants"]]
    assert variants == [["post", 2], ["pre", 0, 1e-3]]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"layers": 2}, r"Unknown comparison setting 'layers'"),
        ({"warmup_steps": 0}, "warmup_steps=0"),
        ({"steps": 0}, "steps=0"),
        ({"steps": 2.7}, "steps=2.7"),
        ({"steps": True}, "steps=True"),
        ({"steps": 100, "warmup_steps": 31}, "at most 30% of `steps`"),
        ({"seeds": ()}, r"seeds=\(\)"),
        ({"task": "translate"}, "task='translate'"),
        ({"num_heads": 3}, "num_heads=3"),
        (
            {"variant_settings": [("middle", 0)]},
            r"variant_settings=\[\('middle', 0\)\]",
        ),
        ({"variant_settings": [("pre", -1)]}, r"variant_settings=\[\('pre', -1\)\]"),
        ({"variant_settings": []}, r"variant_settings=\[\]"),
        ({"variants": ["middle"]}, r"POSITION\[:WARMUP\[:RATE\]\]"),
        ({"variants": "post:x"}, r"variants='x'"),
        ({"variants": ["pre:0:0"]}, r"variants=0.0"),
        ({"variants": ["post:1:2:3"]}, r"variants=\['post:1:2:3'\]"),
        ({"steps": 10, "warmup_steps": 3, "variants": ["post:10"]}, "shorter than"),
    ],
)
def test_invalid_options_are_named(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        warmup.run_comparison(str(tmp_path), **overrides)
    assert not os.listdir(tmp_path)


def test_a_config_error_names_its_setting():
    with pytest.raises(ConfigError) as caught:
        warmup.run_comparison("unused", steps="many")
    assert caught.value.key == "steps"


CONTROL_SIZE = {**TINY, "steps": 6, "warmup_steps": 1, "eval_every": 3}
CONTROL_SIZE.update(histogram_every=0, eval_size=8, variants=("pre",))


def test_the_batch_norm_control_trains_on_padded_batches_and_reports_its_gap(tmp_path):
    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        **{**CONTROL_SIZE, "norm": "batch", "variable_length": True, "batch_size": 2},
    )
    assert result["task"]["variable_length"] is True
    assert result["config"]["norm"] == "batch"
    (run,) = result["runs"]
    assert run["variant"] == "pre-LN, no warm-up"
    assert np.all(np.isfinite(run["losses"]))
    # The moving averages at evaluation are not the batches' statistics.
    assert run["eval_loss_batch_statistics"] != pytest.approx(
        run["final_eval_loss"], rel=1e-4
    )
    (row,) = result["table"]
    assert row["train_inference_gap_mean"] == pytest.approx(
        run["final_eval_loss"] - run["eval_loss_batch_statistics"]
    )
    with open(result["paths"]["markdown"]) as f:
        assert "held-out loss, batch statistics" in f.read()


def test_layer_norm_has_no_train_inference_gap(tmp_path):
    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        **{**CONTROL_SIZE, "variable_length": True},
    )
    (run,) = result["runs"]
    assert run["eval_loss_batch_statistics"] == pytest.approx(
        run["final_eval_loss"], rel=1e-4
    )


def test_float16_runs_keep_the_process_policy_and_record_nonfinite_steps(tmp_path):
    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        **{**CONTROL_SIZE, "mixed_precision": "float16", "statistics": "compute"},
        epsilon=1e-8,
    )
    assert _keras.global_policy_name() == "float32"
    (run,) = result["runs"]
    assert len(run["losses"]) == CONTROL_SIZE["steps"]
    assert set(run["nonfinite_loss_steps"]) <= set(range(1, 7))
    assert result["config"]["statistics"] == "compute"


@pytest.mark.slow
def test_make_demo_at_the_default_size_isolates_warmup_on_one_seed(tmp_path):
    # The README's `make demo` (the CLI end to end, in this interpreter's
    # environment), at the default size on one seed of its three (~2
    # minutes): warm-up rescues Post-LN, its mean rate without warm-up does
    # not, and Pre-LN needs no warm-up.
    output_dir = tmp_path / "compare"
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "demo",
            f"VENV={sys.prefix}",
            f"-o{sys.prefix}/.installed",
            f"DEMO_DIR={output_dir}",
            "COMPARE_ARGS=--seeds 0",
        ],
        cwd=REPO,
        check=True,
        # As from a shell: not a part of the make that may be running this
        # suite (its jobserver, its command-line variables).
        env={
            name: value
            for name, value in os.environ.items()
            if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
        },
    )
    with open(output_dir / "results.json") as f:
        table = json.load(f)["table"]
    rows = {row["variant"]: row for row in table}
    assert rows["pre-LN, no warm-up"]["seeds_reaching_target"] == 1
    assert rows["post-LN, warm-up 60"]["seeds_reaching_target"] == 1
    assert rows["post-LN, no warm-up"]["seeds_reaching_target"] == 0
    assert rows["post-LN, no warm-up"]["final_accuracy_max"] < 0.5
    control = next(r for r in table if "rate" in r["variant"])
    assert control["seeds_reaching_target"] == 0
    assert (output_dir / "comparison.png").stat().st_size > 0
