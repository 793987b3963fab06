from __future__ import annotations

import re

import numpy as np
import pytest

import tfnorm
from tfnorm import _keras
from tfnorm.models.decoder_interop import decoder_from_keras_hub


def _keras_hub():
    if not _keras.IS_KERAS_3:
        pytest.skip("keras-hub needs Keras 3 (this runtime is Keras 2)")
    return pytest.importorskip("keras_hub", reason="keras_hub is not importable")


def _backbone(name, **overrides):
    hub = _keras_hub()
    _keras.keras.utils.set_random_seed(0)
    if name == "llama":
        backbone = hub.models.LlamaBackbone(
            **{
                "vocabulary_size": 41,
                "num_layers": 2,
                "num_query_heads": 4,
                "num_key_value_heads": 2,
                "hidden_dim": 16,
                "intermediate_dim": 32,
                "layer_norm_epsilon": 1e-5,
                **overrides,
            }
        )
        causal_lm = hub.models.LlamaCausalLM
    else:
        backbone = hub.models.GPT2Backbone(
            vocabulary_size=41,
            num_layers=2,
            num_heads=4,
            hidden_dim=16,
            intermediate_dim=32,
            max_sequence_length=32,
        )
        causal_lm = hub.models.GPT2CausalLM
    # Weights away from their initial values (zero biases, unit scales).
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        noise = 0.2 * rng.standard_normal(variable.shape)
        variable.assign(variable.numpy() + noise.astype("float32"))
    return backbone, causal_lm(backbone=backbone, preprocessor=None)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_logits_equal_keras_hubs_causal_lm_on_a_padded_batch(name):
    backbone, causal_lm = _backbone(name)
    model = decoder_from_keras_hub(backbone, max_len=32)
    assert isinstance(model, tfnorm.models.DecoderModel)
    ids = np.random.default_rng(1).integers(1, 41, (3, 9)).astype("int32")
    mask = np.ones((3, 9), bool)
    mask[1, 6:] = False
    mask[2, 3:] = False
    expected = np.asarray(causal_lm({"token_ids": ids, "padding_mask": mask}))
    got = np.asarray(model([ids, mask.astype("float32")]))
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-5)
    if name == "llama":
        block = model.get_layer("block_0")
        assert block.num_kv_heads == 2 and block.attention_norm.epsilon == 1e-5


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_greedy_generation_equals_keras_hubs_token_for_token(name):
    backbone, causal_lm = _backbone(name)
    causal_lm.compile(sampler="greedy")
    model = decoder_from_keras_hub(backbone, max_len=32)
    prompts = np.random.default_rng(2).integers(1, 41, (2, 4)).astype("int32")
    padded = np.zeros((2, 12), "int32")
    padded[:, :4] = prompts
    real = np.zeros((2, 12), bool)
    real[:, :4] = True
    expected = causal_lm.generate(
        {"token_ids": padded, "padding_mask": real}, stop_token_ids=None
    )["token_ids"]
    np.testing.assert_array_equal(tfnorm.generate(model, prompts, 8), expected)


def test_an_unsupported_option_is_named_with_its_value():
    backbone, _ = _backbone("llama", rope_position_scaling_factor=2.0)
    with pytest.raises(ValueError, match=re.escape("rope_position_scaling_factor=2.0")):
        decoder_from_keras_hub(backbone)


def test_another_backbone_is_rejected():
    hub = _keras_hub()
    backbone = hub.models.BertBackbone(
        vocabulary_size=30,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    with pytest.raises(ValueError, match="Received: backbone=BertBackbone"):
        decoder_from_keras_hub(backbone)
