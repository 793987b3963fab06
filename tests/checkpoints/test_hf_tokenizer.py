"""HFTokenizer against the ids transformers gave (tests/data/hf/tokenizer/reference.json)."""

from __future__ import annotations

import json
import os

import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import CheckpointError, HFTokenizer


@pytest.fixture(scope="module")
def reference():
    with open(fixture("tokenizer/reference.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_ids_and_text_equal_transformers_on_non_ascii_text(reference):
    tokenizer = HFTokenizer.from_directory(fixture("tokenizer"))
    for text, ids, decoded in zip(
        reference["texts"], reference["ids"], reference["decoded"]
    ):
        assert tokenizer.encode(text).tolist() == ids
        assert tokenizer.decode(ids) == decoded == text


def test_special_ids_come_from_tokenizer_config(reference):
    tokenizer = HFTokenizer.from_directory(fixture("tokenizer"))
    special = reference["special_ids"]
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (
        special["bos"],
        special["eos"],
        special["pad"],
    )
    assert tokenizer.vocab_size == 300


def test_generation_config_gives_ids_the_tokenizer_config_lacks(tmp_path):
    tokenizer = HFTokenizer.from_directory(fixture("tokenizer"))
    tokenizer.tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": [2, 0]})
    )
    loaded = HFTokenizer.from_directory(str(tmp_path))
    assert (loaded.bos_id, loaded.eos_id, loaded.pad_id) == (1, 2, None)


def test_save_and_load_keep_ids_and_specials(tmp_path, reference):
    tokenizer = HFTokenizer.from_directory(fixture("tokenizer"))
    names = tokenizer.save(str(tmp_path))
    assert sorted(names) == sorted(os.listdir(tmp_path))
    loaded = HFTokenizer.from_directory(str(tmp_path))
    assert loaded.encode(reference["texts"][1]).tolist() == reference["ids"][1]
    assert (loaded.bos_id, loaded.eos_id, loaded.pad_id) == (
        tokenizer.bos_id,
        tokenizer.eos_id,
        tokenizer.pad_id,
    )


def test_a_missing_or_broken_tokenizer_json_is_named(tmp_path):
    with pytest.raises(CheckpointError, match="tokenizer.json: no such file"):
        HFTokenizer.from_directory(str(tmp_path))
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(CheckpointError, match="tokenizer.json: not a tokenizers file"):
        HFTokenizer.from_directory(str(tmp_path))
