"""ByteTokenizer: tfnorm's bytes behind the Tokenizer interface."""

from __future__ import annotations

from tfnorm.checkpoints import ByteTokenizer, load_tokenizer


def test_bytes_round_trip_non_ascii_and_stop_at_end_of_text(tmp_path):
    tokenizer = ByteTokenizer()
    ids = tokenizer.encode("Grüße 😀")
    assert len(ids) == len("Grüße 😀".encode()) and ids.max() < 256
    assert tokenizer.decode(list(ids) + [256, 65]) == "Grüße 😀"
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (None, 256, None)
    assert tokenizer.save(str(tmp_path)) == ["tfnorm_tokenizer.json"]
    assert isinstance(load_tokenizer(str(tmp_path)), ByteTokenizer)
