"""`bench/train_loop.py` runs and writes its table (tiny: a smoke test, no figure)."""

from __future__ import annotations

import json

from bench import train_loop


def test_train_loop_bench_writes_a_ratio(tmp_path):
    table, raw = tmp_path / "t.md", tmp_path / "t.json"
    train_loop.main(
        ["--steps", "2", "--repeats", "1", "--markdown", str(table), "--json", str(raw)]
    )
    assert "| tfnorm train |" in table.read_text()
    times = json.loads(raw.read_text())["seconds_per_step"]
    assert len(times["tfnorm"]) == len(times["fit"]) == 1
