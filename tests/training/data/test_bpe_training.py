"""train_byte_bpe: a byte-level BPE fitted to text, deterministic."""

from __future__ import annotations

from tfnorm.training.data.bpe_training import END_OF_TEXT_TOKEN, train_byte_bpe

TEXTS = ["the quick brown fox jumps over the lazy dog " * 5, "Grüße aus Köln"]


def test_the_same_text_gives_the_same_ids_and_every_string_round_trips():
    first, again = train_byte_bpe(TEXTS, 280), train_byte_bpe(TEXTS, 280)
    assert first.tokenizer.to_str() == again.tokenizer.to_str()
    assert first.vocab_size <= 280 and first.vocab_size > 257  # merges learnt
    assert first.tokenizer.id_to_token(first.eos_id) == END_OF_TEXT_TOKEN
    unseen = "東京タワー 😀 ÿ"
    ids = first.encode(unseen)
    assert max(ids) < 280 and first.decode(ids) == unseen
    assert len(first.encode("the quick brown fox")) < len("the quick brown fox")
