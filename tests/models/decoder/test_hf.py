"""decoder_from_hf against transformers' outputs on the committed checkpoints
(tests/data/hf, written by tools/make_hf_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import tfnorm
from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import CheckpointError
from tfnorm.models import checkpoint_copy, decoder_from_hf

DECODERS = [
    "llama_gqa_llama3",
    "llama_linear_bias",
    "llama_dynamic",
    "qwen2",
    "mistral",
    "gpt2",
    "llama_bf16",
    "llama_sharded",
]


def _reference(name):
    with np.load(os.path.join(fixture(name), "reference.npz")) as data:
        return dict(data)


# Greedy generation (the cached path, a few seconds each) runs on the
# checkpoints whose positions differ in kind: scaled RoPE, RoPE whose base
# grows with the length (dynamic), Qwen2's biases, learned positions.
GENERATED = ["llama_gqa_llama3", "llama_dynamic", "qwen2", "gpt2"]


@pytest.mark.parametrize("name", DECODERS)
def test_logits_equal_transformers(name):
    _assert_logits_equal_transformers(name)


@pytest.mark.parametrize("name", ["llama_gqa_llama3", "gpt2", "llama_bf16"])
def test_weights_copied_a_few_rows_at_a_time_give_the_same_logits(monkeypatch, name):
    # Every layout's slab path (rows, a head's rows, GPT-2's fused columns,
    # transposed matrices), which the tiny files never reach by default.
    monkeypatch.setattr(checkpoint_copy, "SLAB_BYTES", 256)
    _assert_logits_equal_transformers(name)


def _assert_logits_equal_transformers(name):
    ref = _reference(name)
    model = decoder_from_hf(fixture(name), max_len=32)
    assert isinstance(model, tfnorm.models.DecoderModel) and model.max_len == 32
    logits = np.asarray(model([ref["token_ids"], ref["padding_mask"]]))
    real = ref["padding_mask"].astype(bool)
    # Outputs at padded positions are meaningless (both libraries compute
    # something there); compare the real ones.
    np.testing.assert_allclose(logits[real], ref["logits"][real], atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", GENERATED)
def test_greedy_tokens_equal_transformers(name):
    ref = _reference(name)
    model = decoder_from_hf(fixture(name), max_len=32)
    tokens = np.asarray(
        tfnorm.generate(model, ref["prompt"], max_new_tokens=8, jit_compile=False)
    )
    np.testing.assert_array_equal(tokens[:, ref["prompt"].shape[1] :], ref["generated"])


def test_the_options_land_in_the_blocks():
    block = decoder_from_hf(fixture("llama_gqa_llama3")).blocks[0]
    assert (block.num_heads, block.num_kv_heads) == (4, 2)
    assert block.rope_max_wavelength == 500000.0
    assert block.rope_scaling["rope_type"] == "llama3"
    assert block.attention_norm.epsilon == 1e-5
    qwen = decoder_from_hf(fixture("qwen2")).blocks[0]
    assert qwen.query.bias is not None and qwen.attention_output.bias is None
    assert qwen.ffn_inner.bias is None


def _copy(tmp_path, name, edit=None):
    target = str(tmp_path / name)
    shutil.copytree(fixture(name), target)
    if edit is not None:
        path = os.path.join(target, "config.json")
        with open(path) as handle:
            config = json.load(handle)
        edit(config)
        with open(path, "w") as handle:
            json.dump(config, handle)
    return target


@pytest.mark.parametrize(
    "name, edit, named",
    [
        ("mistral", lambda c: c.update(sliding_window=16), "sliding_window=16"),
        (
            "llama_linear_bias",
            lambda c: c.update(hidden_act="gelu"),
            "hidden_act='gelu'",
        ),
        ("qwen2", lambda c: c.update(head_dim=16), "head_dim=16"),
        ("gpt2", lambda c: c.update(activation_function="tanh"), "activation_function"),
        ("gpt2", lambda c: c.update(n_embd=64), "'transformer.wte.weight'"),
        ("bert", None, "encoder_from_hf"),
        (
            "llama_linear_bias",
            lambda c: c.update(rope_parameters={"rope_type": "yarn", "factor": 2.0}),
            "rope_type='yarn'",
        ),
    ],
)
def test_what_tfnorm_does_not_compute_is_refused_naming_the_setting(
    tmp_path, name, edit, named
):
    with pytest.raises(CheckpointError) as error:
        decoder_from_hf(_copy(tmp_path, name, edit), max_len=32)
    assert named in str(error.value) and "\n" not in str(error.value)


def test_a_tensor_the_config_does_not_declare_is_refused(tmp_path):
    from tfnorm.checkpoints import SafetensorsReader, save_safetensors

    target = _copy(tmp_path, "mistral")
    reader = SafetensorsReader(target)
    tensors = {key: reader.get(key) for key in reader.keys()}
    tensors["model.layers.0.self_attn.q_norm.weight"] = np.ones(8, np.float32)
    os.remove(os.path.join(target, "model.safetensors"))
    save_safetensors(tensors, target)
    with pytest.raises(CheckpointError, match="'model.layers.0.self_attn.q_norm"):
        decoder_from_hf(target, max_len=32)


def test_norm_rms_over_gpt2_keeps_each_scale_and_leaves_the_biases_out():
    from tfnorm.checkpoints import SafetensorsReader
    from tfnorm.layers import RMSNorm

    model = decoder_from_hf(fixture("gpt2"), max_len=16, norm="rms")
    reader = SafetensorsReader(fixture("gpt2"))
    for index, block in enumerate(model.blocks):
        for norm, key in ((block.attention_norm, "ln_1"), (block.ffn_norm, "ln_2")):
            assert isinstance(norm, RMSNorm) and norm.epsilon == 1e-5
            expected = reader.get(f"transformer.h.{index}.{key}.weight")
            np.testing.assert_array_equal(norm.gamma.numpy(), expected)
    final = model.get_layer("final_norm").gamma.numpy()
    np.testing.assert_array_equal(final, reader.get("transformer.ln_f.weight"))
