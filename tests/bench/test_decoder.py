"""`bench/decoder.py` runs end to end and writes its tables (tiny sizes: a
smoke test, no figure), and its keras-hub reference has tfnorm's layout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench import decoder, llama_reference


@pytest.fixture
def tiny(monkeypatch):
    for name, value in {
        "LAYERS": 1,
        "D_MODEL": 16,
        "HEADS": 2,
        "DFF": 32,
        "VOCAB": 40,
        "SEQ": 8,
        "BATCH": 2,
        "PROMPT": 4,
        "NEW_TOKENS": 4,
        "GEN_BATCHES": (2,),
        "PRESETS": ("gpt2",),  # the training table has the llama preset
    }.items():
        monkeypatch.setattr(decoder, name, value)


def test_decoder_bench_writes_its_three_tables(tmp_path, tiny):
    table, raw = tmp_path / "d.md", tmp_path / "d.json"
    decoder.main(
        ["--rounds", "2", "--gen-rounds", "1", "--repeats", "1"]
        + ["--uncached-tokens", "2"]
        + ["--markdown", str(table), "--json", str(raw)]
    )
    text = table.read_text()
    missing = llama_reference.keras_hub_missing()
    if missing:
        assert f"| graph | - | - | skipped: {missing} |" in text
    else:
        assert "| graph |" in text
    for preset in decoder.PRESETS:
        assert f"| {preset} | graph |" in text
    assert "| 2 |" in text
    results = json.loads(raw.read_text())
    assert len(results["training"]) == (0 if missing else 1)
    for cell in results["training"]:
        assert [len(cell["seconds"][0][n]) for n in ("tfnorm", "keras-hub")] == [2, 2]
    (generation,) = results["generation"]
    # Greedy with the cache gives the full model's argmax tokens, and
    # keras-hub's Llama on the copied weights the same.
    assert generation["same_tokens"]["uncached"]
    if not missing:
        assert generation["same_tokens"]["keras-hub"]
    names = {"tfnorm", "uncached"} | (set() if missing else {"keras-hub"})
    assert set(generation["seconds"][0]) == names
    assert len(results["norm_cost"]) == len(decoder.PRESETS)
    for cell in results["norm_cost"]:
        assert set(cell["seconds"][0]) == set(decoder.NORMS)


def test_keras_hub_reference_has_the_tfnorm_llama_layout():
    if llama_reference.keras_hub_missing():
        pytest.skip(llama_reference.keras_hub_missing())
    ours, theirs = decoder.tfnorm_decoder(), decoder.keras_hub_llama()
    assert ours.count_params() == theirs.count_params()
    llama_reference.copy_weights(ours, theirs)
    ids = np.random.default_rng(0).integers(0, decoder.VOCAB, (2, 16))
    expected = ours(ids).numpy()
    got = theirs({"token_ids": ids, "padding_mask": np.ones_like(ids)}).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_training_steps_compile_with_xla(tiny):
    # `--xla` times these; the end-to-end test above keeps to graph mode.
    model = decoder.tfnorm_decoder("gpt2", "identity")
    step = decoder.training_step(model, decoder.tfnorm_forward(model), True)
    assert step() > 0 and step() > 0
