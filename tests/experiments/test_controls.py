"""The claims' controls of `tfnorm compare`, `tfnorm.experiments.controls`."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfnorm._keras import keras
from tfnorm.callbacks.layers import find_norm_layers
from tfnorm.cli.main import main
from tfnorm.experiments import warmup
from tfnorm.experiments.controls import offset_inputs, scale_norm_gammas
from tfnorm.experiments.warmup_runs import build_model
from tfnorm.experiments.warmup_settings import CompareConfig

TINY = {
    "num_layers": 2,
    "d_model": 8,
    "num_heads": 2,
    "dff": 16,
    "vocab_size": 5,
    "seq_len": 4,
    "batch_size": 4,
    "steps": 6,
    "warmup_steps": 1,
    "seeds": (0,),
    "eval_size": 8,
    "eval_every": 3,
    "histogram_every": 0,
    "jit_compile": False,
    "variant_settings": [("post", 0)],
}


@pytest.mark.parametrize("norm", ["layer", "rms", "dyt"])
def test_gamma_init_scales_every_norms_gamma(norm):
    model, _ = build_model(2, 8, 2, 16, 5, 4, norm=norm, norm_position="pre")
    changed = scale_norm_gammas(model, 1.25)
    norms = find_norm_layers(model)
    assert changed == len(norms) == 5  # two per block and the final norm
    for _, layer in norms:
        np.testing.assert_allclose(layer.gamma.numpy(), np.full(8, 1.25))


def test_gamma_init_scales_scalenorms_g_from_its_sqrt_d_start():
    model, _ = build_model(1, 8, 2, 16, 5, 4, norm="scale", norm_position="post")
    assert scale_norm_gammas(model, 1.25) == 2
    for _, layer in find_norm_layers(model):
        assert float(layer.g.numpy()) == pytest.approx(1.25 * math.sqrt(8))


def test_input_offset_adds_one_constant_to_every_feature():
    inputs = keras.Input((3, 4))
    model = keras.Model(inputs, offset_inputs(inputs, 10.0))
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
    np.testing.assert_allclose(model(x).numpy(), x + 10.0, rtol=1e-6)
    assert model.layers[-1].name == "input_offset"


def test_the_offset_sits_between_the_embeddings_and_the_encoder():
    model, encoder = build_model(1, 8, 2, 16, 5, 4, input_offset=10.0)
    probe = keras.Model(
        model.input,
        [model.get_layer("embedding").output, model.get_layer("input_offset").output],
    )
    embedded, offset = probe(np.array([[0, 1, 2, 3]], "int32"))
    np.testing.assert_allclose(offset.numpy(), embedded.numpy() + 10.0, rtol=1e-6)
    names = [layer.name for layer in model.layers]
    assert names.index("input_offset") == names.index(encoder.name) - 1
    plain, _ = build_model(1, 8, 2, 16, 5, 4)
    assert "input_offset" not in [layer.name for layer in plain.layers]


def test_the_settings_reach_the_trained_model(tmp_path):
    plain = warmup.run_comparison(
        str(tmp_path / "plain"), log=lambda line: None, **TINY
    )
    scaled = warmup.run_comparison(
        str(tmp_path / "gamma"), log=lambda line: None, gamma_init=1.25, **TINY
    )
    offset = warmup.run_comparison(
        str(tmp_path / "offset"), log=lambda line: None, input_offset=10.0, **TINY
    )
    first = [run["losses"][0] for run in plain["runs"]]
    assert [run["losses"][0] for run in scaled["runs"]] != pytest.approx(first)
    assert [run["losses"][0] for run in offset["runs"]] != pytest.approx(first)
    assert scaled["config"]["gamma_init"] == 1.25
    assert offset["config"]["input_offset"] == 10.0


def test_defaults_leave_the_model_as_it_was():
    config = CompareConfig().resolve()
    assert (config.gamma_init, config.input_offset) == (1.0, 0.0)


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--gamma-init", "0", "--gamma-init: `gamma_init` must be a finite number"),
        ("--gamma-init", "-1.25", "Received: gamma_init=-1.25"),
        ("--gamma-init", "nan", "Received: gamma_init=nan"),
        ("--input-offset", "1e9", "--input-offset: `input_offset` must be"),
        ("--input-offset", "ten", "Received: input_offset='ten'"),
        ("--task", "lm", None),
    ],
)
def test_bad_values_are_one_line_naming_the_setting(
    tmp_path, capsys, flag, value, message
):
    output_dir = str(tmp_path / "out")
    given = [flag, value]
    if message is None:  # the decoder task has no embeddings offset
        given += ["--input-offset", "10"]
        message = "--input-offset: `input_offset` is added to the encoder tasks'"
    assert main(["compare", "--output-dir", output_dir] + given) == 2
    err = capsys.readouterr().err
    assert err.startswith("tfnorm compare: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.slow
def test_claim_gamma_init_figures_at_a_small_deep_post_ln_size(tmp_path):
    # docs/claims.md, claim 4, small: gamma 1.0 and 1.25 in a deep Post-LN
    # stack give finite figures (the verdict is the table's).
    sizes = {"num_layers": 8, "steps": 60, "seeds": (0,), "eval_size": 64}
    for gamma in (1.0, 1.25):
        result = warmup.run_comparison(
            str(tmp_path / str(gamma)),
            log=lambda line: None,
            variant_settings=[("post", 10)],
            gamma_init=gamma,
            histogram_every=0,
            **sizes,
        )
        (row,) = result["table"]
        assert np.isfinite(row["final_eval_loss_mean"])
        assert 0.0 <= row["final_accuracy_mean"] <= 1.0


@pytest.mark.slow
def test_claim_input_offset_figures_for_layernorm_and_rmsnorm(tmp_path):
    # docs/claims.md, claim 6, small: both norms with and without an offset.
    for norm in ("layer", "rms"):
        for offset in (0.0, 10.0):
            result = warmup.run_comparison(
                str(tmp_path / f"{norm}{offset}"),
                log=lambda line: None,
                variant_settings=[("pre", 0)],
                norm=norm,
                input_offset=offset,
                num_layers=4,
                steps=60,
                seeds=(0,),
                eval_size=64,
                histogram_every=0,
            )
            (row,) = result["table"]
            assert np.isfinite(row["final_eval_loss_mean"])
