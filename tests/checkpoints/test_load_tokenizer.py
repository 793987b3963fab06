"""load_tokenizer: "bytes", a directory, a tokenizer.json; anything else named."""

from __future__ import annotations

import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import (
    ByteTokenizer,
    CheckpointError,
    HFTokenizer,
    load_tokenizer,
)


def test_each_spec_gives_its_kind(tmp_path):
    assert isinstance(load_tokenizer("bytes"), ByteTokenizer)
    assert isinstance(load_tokenizer(fixture("tokenizer")), HFTokenizer)
    by_file = load_tokenizer(fixture("tokenizer/tokenizer.json"))
    assert isinstance(by_file, HFTokenizer) and by_file.eos_id is not None
    with pytest.raises(CheckpointError) as error:
        load_tokenizer(str(tmp_path))
    assert f"tokenizer={str(tmp_path)!r}" in str(error.value)
