"""`tfnorm.build_decoder`'s GPT-2 initialisation (`init_std`)."""

from __future__ import annotations

import numpy as np
import pytest

import tfnorm


def _std(layer, name="kernel"):
    return float(np.std(next(w for w in layer.weights if name in w.name).numpy()))


def test_init_std_draws_every_kernel_from_it_and_scales_the_residual_writes():
    model = tfnorm.build_decoder(
        2, 64, 4, 128, vocab_size=300, max_len=8, preset="gpt2", init_std=0.02
    )
    block = model.get_layer("block_1")
    assert _std(block.query) == pytest.approx(0.02, rel=0.05)
    assert _std(block.ffn_inner) == pytest.approx(0.02, rel=0.05)
    scaled = 0.02 / np.sqrt(2 * 2)
    assert _std(block.attention_output) == pytest.approx(scaled, rel=0.05)
    assert _std(block.ffn_output) == pytest.approx(scaled, rel=0.05)
    embedding = model.get_layer("token_embedding")
    assert _std(embedding, "embeddings") == pytest.approx(0.02, rel=0.05)
    default = tfnorm.build_decoder(
        2, 64, 4, 128, vocab_size=300, max_len=8, preset="gpt2"
    ).get_layer("block_1")
    # glorot_uniform of a 64 x 64 matrix: std sqrt(2 / 128) = 0.125.
    assert _std(default.query) == pytest.approx(0.125, rel=0.05)


@pytest.mark.parametrize("value", [0, -0.02, "big"])
def test_a_bad_init_std_is_refused_by_name(value):
    with pytest.raises(ValueError, match=r"init_std"):
        tfnorm.build_decoder(1, 8, 2, 16, vocab_size=10, max_len=4, init_std=value)
