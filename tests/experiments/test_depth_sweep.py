"""The depth sweep of `tfnorm compare --depths`, `tfnorm.experiments.depth_sweep`."""

from __future__ import annotations

import os

import pytest

from tfnorm.experiments import compare_experiment as warmup
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.experiments.depth_sweep import sweep_variants

TINY = {
    "num_layers": 1,
    "d_model": 8,
    "num_heads": 2,
    "dff": 16,
    "vocab_size": 5,
    "seq_len": 4,
    "batch_size": 4,
    "steps": 10,
    "warmup_steps": 2,
    "seeds": (0,),
    "eval_size": 8,
    "eval_every": 5,
    "histogram_every": 0,
    "jit_compile": False,
}


def test_sweep_runs_post_ln_at_each_warmup_and_pre_ln_without():
    cfg = CompareConfig(steps=100, sweep_warmups=(0, 0.1, 0.25)).resolve()
    assert [(v["norm_position"], v["warmup_steps"]) for v in sweep_variants(cfg)] == [
        ("post", 0),
        ("post", 10),
        ("post", 25),
        ("pre", 0),
    ]


def test_sweep_warmups_above_30_percent_are_refused():
    with pytest.raises(ValueError, match="sweep_warmups"):
        CompareConfig(sweep_warmups=(0.5,)).resolve()


def test_depths_add_the_sweep_table_plot_and_logs(tmp_path):
    lines = []
    result = warmup.run_comparison(
        str(tmp_path),
        log=lines.append,
        variant_settings=[("pre", 0)],
        depths=(1, 2),
        sweep_warmups=(0, 0.2),
        **TINY,
    )
    sweep = result["sweep"]
    assert [(r["num_layers"], r["variant"]) for r in sweep["rows"]] == [
        (1, "post-LN, no warm-up"),
        (1, "post-LN, warm-up 2"),
        (1, "pre-LN, no warm-up"),
        (2, "post-LN, no warm-up"),
        (2, "post-LN, warm-up 2"),
        (2, "pre-LN, no warm-up"),
    ]
    assert {r["num_layers"] for r in sweep["runs"]} == {1, 2}
    assert all(
        len(r["init_layer_gradient_norms"]) == r["num_layers"] for r in sweep["runs"]
    )
    with open(result["paths"]["sweep_markdown"]) as f:
        table = f.read().splitlines()
    assert table[0].startswith("| layers | post-LN, no warm-up |")
    assert table[2].startswith("| 1 |") and table[3].startswith("| 2 |")
    with open(result["paths"]["sweep_plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(os.path.join(tmp_path, "tensorboard_sweep"))) == [
        "depth1",
        "depth2",
    ]


@pytest.mark.slow
def test_at_6_layers_post_ln_needs_the_warmup_pre_ln_does_not(tmp_path):
    # The sweep's 6-layer column on seed 0 (~2 minutes): no warm-up leaves
    # Post-LN at chance, 20% of the run as warm-up rescues it, Pre-LN trains
    # without. Measured so: docs/experiments.md, section 3.
    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        variant_settings=[("pre", 0)],
        seeds=(0,),
        histogram_every=0,
        depths=(6,),
        sweep_warmups=(0, 0.2),
        sweep_seeds=(0,),
    )
    rows = {row["variant"]: row for row in result["sweep"]["rows"]}
    assert rows["post-LN, no warm-up"]["final_accuracy_max"] < 0.5
    assert rows["post-LN, warm-up 60"]["seeds_reaching_target"] == 1
    assert rows["pre-LN, no warm-up"]["seeds_reaching_target"] == 1
