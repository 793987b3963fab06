from __future__ import annotations

import re

import numpy as np
import pytest

import tfnorm
from tfnorm import _keras
from tfnorm.models.decoder.keras_hub import decoder_from_keras_hub


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


def _perturbed_decoder(preset, **options):
    _keras.keras.utils.set_random_seed(3)
    model = tfnorm.build_decoder(
        2, 16, 4, 32, vocab_size=41, max_len=32, preset=preset, **options
    )
    # Away from unit scales and zero biases, so a weight copied to the wrong
    # place shows in the logits.
    rng = np.random.default_rng(4)
    for variable in model.weights:
        noise = 0.2 * rng.standard_normal(variable.shape)
        variable.assign(variable.numpy() + noise.astype("float32"))
    return model


@pytest.mark.parametrize(
    "preset, options",
    [
        ("llama", {"num_kv_heads": 2, "epsilon": 1e-5}),
        ("llama", {"tie_embeddings": True}),
        ("gpt2", {}),
    ],
)
def test_to_keras_hub_gives_the_decoders_logits_and_greedy_tokens(preset, options):
    hub = _keras_hub()
    model = _perturbed_decoder(preset, **options)
    backbone = tfnorm.models.decoder_to_keras_hub(model)
    causal_lm_class = {
        "llama": hub.models.LlamaCausalLM,
        "gpt2": hub.models.GPT2CausalLM,
    }
    causal_lm = causal_lm_class[preset](backbone=backbone, preprocessor=None)
    ids = np.random.default_rng(1).integers(1, 41, (3, 9)).astype("int32")
    mask = np.ones((3, 9), bool)
    mask[1, 5:] = False
    expected = np.asarray(model([ids, mask.astype("float32")]))
    got = np.asarray(causal_lm({"token_ids": ids, "padding_mask": mask}))
    np.testing.assert_allclose(got[mask], expected[mask], rtol=1e-5, atol=1e-5)
    causal_lm.compile(sampler="greedy")
    padded = np.zeros((2, 10), "int32")
    padded[:, :3] = ids[:2, :3]
    generated = causal_lm.generate(
        {"token_ids": padded, "padding_mask": padded != 0}, stop_token_ids=None
    )["token_ids"]
    np.testing.assert_array_equal(generated, tfnorm.generate(model, ids[:2, :3], 7))


@pytest.mark.parametrize(
    "preset, options, named",
    [
        ("llama", {"norm_position": "post"}, "norm_position='post'"),
        ("llama", {"norm": "layer"}, "norm='LayerNormalization'"),
        ("llama", {"feed_forward": "gelu"}, "feed_forward='gelu'"),
        ("llama", {"position_embedding": "none"}, "position_embedding='none'"),
        ("gpt2", {"epsilon": 1e-6}, "epsilon=1e-06"),
        ("gpt2", {"tie_embeddings": False}, "lm_head='present'"),
        ("gpt2", {"num_kv_heads": 2}, "num_kv_heads=2"),
    ],
)
def test_to_keras_hub_names_the_option_keras_hub_lacks(preset, options, named):
    # Checked before keras-hub is imported: the same message in every runtime.
    model = tfnorm.build_decoder(
        1, 16, 4, 32, vocab_size=41, max_len=16, preset=preset, **options
    )
    with pytest.raises(ValueError, match=re.escape(f"Received: {named}")):
        tfnorm.models.decoder_to_keras_hub(model)


def test_to_keras_hub_refuses_a_model_that_is_not_a_tfnorm_decoder():
    model = tfnorm.build_encoder(1, 16, 4, 32)
    with pytest.raises(ValueError, match="Received: model=EncoderModel"):
        tfnorm.models.decoder_to_keras_hub(model)
