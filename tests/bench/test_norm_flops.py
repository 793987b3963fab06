"""`bench/norm_flops.py`: the arithmetic behind claim 2, checked against
published parameter counts and the norms' own operation counts."""

from __future__ import annotations

import json

import pytest

from bench import norm_flops

LLAMA_7B = norm_flops.MODELS["LLaMA 7B"]
#: LLaMA 7B's parameter count as published (Touvron et al., 2023; the
#: Hugging Face checkpoint's 6,738,415,616).
LLAMA_7B_PARAMETERS = 6_738_415_616


def test_the_products_are_two_operations_per_weight_of_the_published_model():
    counted = norm_flops.decoder_flops_per_token(norm="rms", **LLAMA_7B)
    d = LLAMA_7B["d_model"]
    embedding = LLAMA_7B["vocab_size"] * d  # a lookup, not a product
    gammas = (2 * LLAMA_7B["num_layers"] + 1) * d
    assert counted["products"] == 2 * (LLAMA_7B_PARAMETERS - embedding - gammas)


def test_layer_norm_costs_seven_operations_per_feature_and_rms_norm_four():
    for norm, per_feature in (("rms", 4), ("layer", 7)):
        counted = norm_flops.decoder_flops_per_token(norm=norm, **LLAMA_7B)
        assert counted["norms"] == 65 * per_feature * 4096
        assert counted["total"] == sum(
            counted[part] for part in ("products", "attention", "residual", "norms")
        )
    shares = norm_flops.norm_shares(LLAMA_7B)
    assert shares["saving_of_norm"] == pytest.approx(3 / 7)
    # The claim's 7% (and another article's 15%) cannot be arithmetic: the
    # norms are a hundredth of a percent of the 7B model's operations.
    assert shares["layer_share"] < 2e-4 and shares["saving_of_model"] < 1e-4


def test_grouped_query_attention_counts_narrower_key_and_value_products():
    full = norm_flops.decoder_flops_per_token(norm="rms", **LLAMA_7B)
    grouped = norm_flops.decoder_flops_per_token(norm="rms", num_kv_heads=8, **LLAMA_7B)
    d, layers = LLAMA_7B["d_model"], LLAMA_7B["num_layers"]
    # Key and value shrink from d x d to d x d/4 each.
    assert full["products"] - grouped["products"] == layers * 2 * 2 * d * (d - d // 4)


def test_an_unknown_norm_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"norm='batch'"):
        norm_flops.decoder_flops_per_token(norm="batch", **LLAMA_7B)


def test_main_writes_the_table_and_the_figures(tmp_path, capsys):
    table, raw = tmp_path / "f.md", tmp_path / "f.json"
    norm_flops.main(["--markdown", str(table), "--json", str(raw)])
    printed = capsys.readouterr().out
    total = norm_flops.norm_shares(LLAMA_7B)["total_flops_per_token"]
    assert f"| LLaMA 7B | {total / 1e9:.3f} |" in printed
    assert table.read_text() in printed + "\n"
    figures = json.loads(raw.read_text())
    assert set(figures["shares"]) == set(norm_flops.MODELS)
