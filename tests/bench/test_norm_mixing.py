"""`bench/norm_mixing.py`: the measures behind claims 8 and 9 see a leak
where one exists (BatchNorm's batch statistics) and none where the norm is
per token (tfnorm's LayerNormalization)."""

from __future__ import annotations

import json

import tensorflow as tf

from bench import norm_mixing

#: float32 round-off of a compiled function against eager ops, relative to
#: the logits' spread (measured: ~1e-6).
ROUND_OFF = 1e-4


def test_layer_norm_is_causal_and_per_example_and_batch_norm_is_neither():
    rows = norm_mixing.measure(norms=("layer", "batch"), replicas=False, modes=(True,))
    layer, batch = rows
    assert (layer["future"], layer["batch"], layer["halves"]) == (0.0, 0.0, 0.0)
    # In training, one changed token moves earlier positions' logits and
    # another sequence's, by far more than round-off.
    assert batch["future"] > 100 * ROUND_OFF
    assert batch["batch"] > 100 * ROUND_OFF
    assert batch["halves"] > 100 * ROUND_OFF
    assert layer["replicas"] is None


def test_batch_norm_at_inference_uses_its_moving_averages_only():
    (row,) = norm_mixing.measure(norms=("batch",), replicas=False, modes=(False,))
    assert (row["future"], row["batch"], row["halves"]) == (0.0, 0.0, 0.0)


def test_two_replicas_change_batch_norm_unless_it_is_synchronised():
    assert len(tf.config.list_logical_devices("CPU")) >= 2  # tests/conftest.py
    rows = norm_mixing.measure(
        norms=("layer", "batch", "batch_synchronized"), modes=(True,)
    )
    layer, batch, synchronized = (row["replicas"] for row in rows)
    assert layer < ROUND_OFF
    assert batch > 100 * ROUND_OFF
    assert synchronized < ROUND_OFF
    # Per-replica statistics are the statistics of each half of the batch.
    assert abs(batch - rows[1]["halves"]) < ROUND_OFF * rows[1]["halves"] * 100


def test_the_script_writes_its_table_and_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(norm_mixing, "NORMS", ("rms",))
    markdown, figures = tmp_path / "mixing.md", tmp_path / "mixing.json"
    norm_mixing.main(["--markdown", str(markdown), "--json", str(figures)])
    table = markdown.read_text(encoding="utf-8")
    assert "| RMSNorm (tfnorm) | training | 0 | 0 | 0 |" in table
    rows = json.loads(figures.read_text(encoding="utf-8"))["rows"]
    assert [row["mode"] for row in rows] == ["training", "inference"]
