"""`bench/memory.py` measures a training step's memory and writes its table
(on a tiny encoder: a smoke test, no figure)."""

from __future__ import annotations

import json

from bench import encoder, memory


def test_memory_bench_writes_each_norms_share(tmp_path, monkeypatch):
    monkeypatch.setattr(encoder, "SEQ", 8)
    monkeypatch.setattr(encoder, "D_MODEL", 16)
    monkeypatch.setattr(encoder, "BATCH", 2)
    monkeypatch.setattr(encoder, "LAYERS", 1)
    monkeypatch.setattr(encoder, "HEADS", 2)
    monkeypatch.setattr(encoder, "DFF", 32)
    table, raw = tmp_path / "m.md", tmp_path / "m.json"
    memory.main(
        [
            "--positions",
            "post",
            "--samples",
            "2",
            "--markdown",
            str(table),
            "--json",
            str(raw),
        ]
    )
    text = table.read_text()
    assert "| post | graph |" in text and "| post | XLA |" in text
    results = json.loads(raw.read_text())["results"]
    assert [(r["position"], r["mode"]) for r in results] == [
        ("post", "graph"),
        ("post", "XLA"),
    ]
    for result in results:
        for name in memory.NORMS:
            taken = result["bytes"][name]
            assert len(taken) == 2
            assert all(isinstance(b, int) and b >= 0 for b in taken)
