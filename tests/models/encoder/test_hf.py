"""encoder_from_hf against transformers' outputs on the committed BERT
checkpoint (tests/data/hf/bert, written by tools/make_hf_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import CheckpointError, SafetensorsReader, save_safetensors
from tfnorm.models import TransformerEncoderBlock, checkpoint_copy, encoder_from_hf


def _reference():
    with np.load(os.path.join(fixture("bert"), "reference.npz")) as data:
        return dict(data)


def _inputs(ref):
    return {key: ref[key] for key in ("token_ids", "segment_ids", "padding_mask")}


@pytest.mark.parametrize("slab_bytes", [None, 256])
def test_outputs_equal_transformers(monkeypatch, slab_bytes):
    if slab_bytes is not None:
        # Weights copied a few rows at a time, as a full-size BERT's are.
        monkeypatch.setattr(checkpoint_copy, "SLAB_BYTES", slab_bytes)
    ref = _reference()
    model = encoder_from_hf(fixture("bert"))
    out = model(_inputs(ref))
    assert sorted(out) == ["mlm_logits", "sequence_output"]
    real = ref["padding_mask"].astype(bool)
    # Outputs at padded positions are meaningless; compare the real ones.
    np.testing.assert_allclose(
        np.asarray(out["sequence_output"])[real],
        ref["last_hidden_state"][real],
        atol=1e-4,
        rtol=0,
    )
    np.testing.assert_allclose(
        np.asarray(out["mlm_logits"])[real], ref["mlm_logits"][real], atol=1e-4, rtol=0
    )
    block = model.get_layer("block_1")
    assert isinstance(block, TransformerEncoderBlock)
    assert block.norm_position == "post" and block.attention_norm.epsilon == 1e-12


def _copy(tmp_path, edit=None, tensors=None):
    target = str(tmp_path / "bert")
    shutil.copytree(fixture("bert"), target)
    if edit is not None:
        path = os.path.join(target, "config.json")
        with open(path) as handle:
            config = json.load(handle)
        edit(config)
        with open(path, "w") as handle:
            json.dump(config, handle)
    if tensors is not None:
        with SafetensorsReader(target) as reader:
            stored = {key: reader.get(key) for key in reader.keys()}
        os.remove(os.path.join(target, "model.safetensors"))
        save_safetensors(tensors(stored), target)
    return target


def test_a_bert_model_checkpoint_gives_the_pooled_output(tmp_path):
    """`BertModel`'s layout: no `bert.` prefix, no MLM head, a pooler."""
    rng = np.random.default_rng(0)
    weight = rng.normal(size=(32, 32)).astype("float32")
    bias = rng.normal(size=(32,)).astype("float32")

    def as_bert_model(stored):
        kept = {k[len("bert.") :]: v for k, v in stored.items() if k[:5] == "bert."}
        kept.update({"pooler.dense.weight": weight, "pooler.dense.bias": bias})
        return kept

    ref = _reference()
    model = encoder_from_hf(_copy(tmp_path, tensors=as_bert_model))
    out = model(_inputs(ref))
    assert sorted(out) == ["pooled_output", "sequence_output"]
    expected = np.tanh(ref["last_hidden_state"][:, 0] @ weight.T + bias)
    np.testing.assert_allclose(out["pooled_output"], expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "edit, tensors, named",
    [
        (lambda c: c.update(model_type="t5"), None, "model_type='t5'"),
        (lambda c: c.update(hidden_size=64), None, "'bert.embeddings.word_embed"),
        (lambda c: c.update(intermediate_size=64), None, "intermediate.dense.weight"),
        (lambda c: c.update(hidden_act="gelu_new"), None, "hidden_act='gelu_new'"),
        (
            lambda c: c.update(position_embedding_type="relative_key"),
            None,
            "position_embedding_type='relative_key'",
        ),
        (
            None,
            lambda t: {**t, "cls.seq_relationship.bias": np.zeros(2, "float32")},
            "'cls.seq_relationship.bias'",
        ),
    ],
)
def test_what_tfnorm_does_not_compute_is_refused_naming_it(
    tmp_path, edit, tensors, named
):
    with pytest.raises(CheckpointError) as error:
        encoder_from_hf(_copy(tmp_path, edit, tensors))
    assert named in str(error.value) and "\n" not in str(error.value)


def test_a_decoder_checkpoint_is_refused_naming_the_reader_to_use():
    with pytest.raises(CheckpointError, match="decoder_from_hf"):
        encoder_from_hf(fixture("gpt2"))
