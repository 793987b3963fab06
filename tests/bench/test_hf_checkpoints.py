"""`bench/hf_checkpoints.py` runs end to end on a tiny checkpoint (a smoke
test, no figure; marked slow), where the reference venv exists (`make
hf-reference` builds .venv-hf); its refusal without one is tested everywhere."""

from __future__ import annotations

import json
import os

import pytest

from bench import hf_checkpoints
from tests.conftest import REPO

HF_VENV = os.path.join(REPO, ".venv-hf")


def test_missing_reference_venv_says_how_to_make_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        hf_checkpoints.main(["--hf-venv", str(tmp_path / "none"), "--tiny"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "make hf-reference" in err
    assert f"hf_venv={tmp_path / 'none'}" in err


# About 9 processes (40-120 s): `make test-slow`.
@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists(os.path.join(HF_VENV, "bin", "python")),
    reason="no reference venv (`make hf-reference` builds .venv-hf)",
)
def test_hf_bench_loads_and_generates_on_both_sides(tmp_path):
    table, raw = tmp_path / "h.md", tmp_path / "h.json"
    hf_checkpoints.main(
        ["--tiny", "--repeats", "1", "--gen-rounds", "1", "--dtypes", "bfloat16"]
        + ["--batches", "2", "--new-tokens", "8", "--threads", "1"]
        + ["--markdown", str(table), "--json", str(raw)]
    )
    text = table.read_text()
    assert "| bfloat16 |" in text and "| 2 |" in text
    results = json.loads(raw.read_text())
    (load,) = results["load"]
    for side in ("tfnorm", "transformers"):
        # Both build a float32 model from the bfloat16 file.
        assert load[side]["bfloat16"]["dtype"] == "float32"
        assert load[side]["bfloat16"]["seconds"] > 0
        assert load[side]["baseline_bytes"] > 0
    # Greedy decoding of the same weights: the same tokens on both sides.
    assert results["same_tokens"] == {"batch_2": True}
    assert results["params"] == 2 * 12 * 64**2 + 2 * 13 * 64 + (512 + 128 + 2) * 64
