"""Tokenizer.encode_batch: right padding with the pad id and a mask."""

from __future__ import annotations

from tfnorm.checkpoints import ByteTokenizer


def test_encode_batch_pads_on_the_right():
    ids, mask = ByteTokenizer().encode_batch(["ab", "c"])
    assert ids.tolist() == [[97, 98], [99, 0]]
    assert mask.tolist() == [[1, 1], [1, 0]]
