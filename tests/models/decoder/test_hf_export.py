"""decoder_to_hf: tfnorm decoders written as Hugging Face checkpoints.

Every runtime reads what it wrote back with decoder_from_hf. Where the
reference venv exists (`make hf-reference`: .venv-hf with transformers), the
checkpoints are also loaded by transformers itself (tools/hf_reference_logits.py)."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import tfnorm
from tests.checkpoints.hf_data import fixture
from tests.conftest import REPO
from tfnorm.checkpoints import CheckpointError, load_tokenizer
from tfnorm.models import decoder_from_hf, decoder_to_hf

HF_PYTHON = os.path.join(REPO, ".venv-hf", "bin", "python")
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 4.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
LAYOUTS = {
    "llama": dict(
        preset="llama", num_kv_heads=2, rope_scaling=LLAMA3, tie_embeddings=True
    ),
    "qwen2": dict(preset="llama", num_kv_heads=2, attention_bias="qkv"),
    "gpt2": dict(preset="gpt2", dropout_rate=0.0),
}


def _batch():
    with np.load(os.path.join(fixture("qwen2"), "reference.npz")) as data:
        return data["token_ids"], data["padding_mask"]


def _model(layout):
    model = tfnorm.build_decoder(
        2, 32, 4, 48, vocab_size=300, max_len=32, **LAYOUTS[layout]
    )
    # Norm gains and biases away from 1 and 0, so a misplaced one shows.
    rng = np.random.default_rng(0)
    for variable in model.weights:
        name = getattr(variable, "path", variable.name)  # Keras 2: name
        if "norm" in name or "bias" in name:
            variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype("float32"))
    return model


def _logits(model, ids, mask):
    return np.asarray(model([ids, mask]))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_written_checkpoints_read_back_with_the_same_logits(tmp_path, layout):
    model = _model(layout)
    names = decoder_to_hf(model, str(tmp_path))
    assert sorted(names) == sorted(os.listdir(tmp_path))
    with open(tmp_path / "config.json") as handle:
        assert json.load(handle)["model_type"] == layout
    ids, mask = _batch()
    again = decoder_from_hf(str(tmp_path), max_len=32)
    np.testing.assert_array_equal(_logits(again, ids, mask), _logits(model, ids, mask))


def test_the_tokenizer_and_its_special_ids_are_written(tmp_path):
    tokenizer = load_tokenizer(fixture("tokenizer"))
    names = decoder_to_hf(_model("llama"), str(tmp_path), tokenizer=tokenizer)
    assert "tokenizer.json" in names
    with open(tmp_path / "generation_config.json") as handle:
        assert json.load(handle)["eos_token_id"] == tokenizer.eos_id
    assert load_tokenizer(str(tmp_path)).encode("Grüße").tolist() == (
        tokenizer.encode("Grüße").tolist()
    )


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(norm_position="post"), "norm_position='post'"),
        (dict(norm="dyt"), "norm='DynamicTanh'"),
        (dict(norm_position="sandwich"), "norm_position='sandwich'"),
        (dict(feed_forward="gelu"), "feed_forward='gelu'"),
        (dict(attention_bias="qkv", ffn_bias=True), "attention_bias='qkv'"),
    ],
)
def test_layouts_without_a_counterpart_are_refused_by_name(tmp_path, options, named):
    model = tfnorm.build_decoder(2, 32, 4, 48, vocab_size=300, max_len=32, **options)
    target = tmp_path / "out"
    with pytest.raises(CheckpointError) as error:
        decoder_to_hf(model, str(target))
    assert named in str(error.value)
    assert not target.exists()


def _transformers_runs():
    if not os.path.exists(HF_PYTHON):
        return False
    check = subprocess.run([HF_PYTHON, "-c", "import transformers, torch"])
    return check.returncode == 0


live = pytest.mark.skipif(
    not _transformers_runs(),
    reason="no reference venv with transformers (`make hf-reference` builds .venv-hf)",
)


@live
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_transformers_loads_the_checkpoint_with_the_same_logits(tmp_path, layout):
    model = _model(layout)
    tokenizer = load_tokenizer(fixture("tokenizer"))
    checkpoint = tmp_path / "checkpoint"
    decoder_to_hf(model, str(checkpoint), tokenizer=tokenizer)
    ids, mask = _batch()
    texts = ["naïve café — déjà vu; 東京タワー 😀", "Ελληνικά, русский текст"]
    np.savez(tmp_path / "in.npz", token_ids=ids, padding_mask=mask, texts=texts)
    subprocess.run(
        [HF_PYTHON, os.path.join(REPO, "tools", "hf_reference_logits.py")]
        + [str(checkpoint), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        check=True,
        capture_output=True,
    )
    with np.load(tmp_path / "out.npz") as reference:
        real = mask.astype(bool)
        theirs = reference["logits"][real]
        np.testing.assert_allclose(_logits(model, ids, mask)[real], theirs, atol=1e-4)
        for index, text in enumerate(texts):
            assert reference[f"ids_{index}"].tolist() == tokenizer.encode(text).tolist()
