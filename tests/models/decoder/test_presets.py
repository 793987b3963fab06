"""The decoder presets: one table, which the TensorFlow-free CLI choices
mirror."""

from __future__ import annotations

import pytest

import tfnorm
from tfnorm.choices import DECODER_PRESET_NORMS
from tfnorm.models.decoder.presets import DECODER_PRESETS


def test_the_cli_knows_every_preset_and_its_norm():
    # `tfnorm train --preset` is parsed before TensorFlow loads, from
    # `choices`; a preset added to one table only would be refused or
    # mislabelled there.
    assert DECODER_PRESET_NORMS == {
        name: options["norm"] for name, options in DECODER_PRESETS.items()
    }


@pytest.mark.parametrize("preset", sorted(DECODER_PRESETS))
def test_each_preset_builds_the_architecture_it_names(preset):
    options = DECODER_PRESETS[preset]
    model = tfnorm.build_decoder(1, 16, 4, 32, vocab_size=11, max_len=8, preset=preset)
    block = model.get_layer("block_0")
    assert block.feed_forward == options["feed_forward"]
    assert block.use_bias == options["use_bias"]
    assert (model.optional_layer("lm_head") is None) == options["tie_embeddings"]
