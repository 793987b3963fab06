"""read_token_corpus: text split as bytes are, then as a tokenizer's ids, with
the bytes they cover (the committed BPE of tests/data/hf/tokenizer)."""

from __future__ import annotations

import numpy as np

from tests.checkpoints.hf_data import fixture
from tfnorm.checkpoints import load_tokenizer
from tfnorm.training.data.token_text import read_token_corpus


def test_ids_end_each_file_and_the_validation_bytes_are_its_text(tmp_path):
    tokenizer = load_tokenizer(fixture("tokenizer"))
    first, second = "naïve café — déjà vu " * 3, "東京タワー and 😀 the quick brown fox"
    (tmp_path / "a.txt").write_text(first, encoding="utf-8")
    (tmp_path / "b.txt").write_text(second, encoding="utf-8")
    ids_a = tokenizer.encode(first, add_special_tokens=False)
    ids_b = tokenizer.encode(second, add_special_tokens=False)
    # Split by bytes, as a byte model's: b.txt and its end-of-text token.
    held_out = len(second.encode("utf-8")) + 1
    total = len(first.encode("utf-8")) + 1 + held_out
    corpus, same = read_token_corpus(str(tmp_path), 4, held_out / total, tokenizer)
    assert same is tokenizer
    eos = tokenizer.eos_id
    expected = np.concatenate([ids_a, [eos], ids_b, [eos]])
    np.testing.assert_array_equal(
        np.concatenate([corpus.train.tokens, corpus.val.tokens]), expected
    )
    # The targets are b.txt's tokens but its first: its bytes but theirs.
    first_bytes = len(tokenizer.decode(ids_b[:1]).encode("utf-8"))
    assert corpus.report["val_bytes"] == len(second.encode("utf-8")) - first_bytes
