"""`train_byte_bpe`: a byte-level BPE tokenizer fitted to the training text.

What `tfnorm train --task lm --tokenizer bpe:N` trains on the training split
(never the held-out end): the Rust `tokenizers` library's BPE trainer over
GPT-2's byte-level alphabet, so every string still encodes, with one special
token, `<|endoftext|>`, which ends each file. Training is deterministic: the
same text and N give the same merges, hence the same ids on a resume.
"""

from __future__ import annotations

END_OF_TEXT_TOKEN = "<|endoftext|>"


def train_byte_bpe(texts, vocab_size):
    """An `HFTokenizer` of at most `vocab_size` ids fitted to `texts`.

    The 256 byte symbols and `<|endoftext|>` always have ids, so a small
    text may give fewer than `vocab_size` ids; ids stay below it.

    Args:
        texts: an iterable of str, the training documents.
        vocab_size: int, at least 257.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from tfnorm.checkpoints import HFTokenizer

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer)
    eos = tokenizer.token_to_id(END_OF_TEXT_TOKEN)
    return HFTokenizer(
        tokenizer, eos_id=eos, special_tokens={"eos_token": END_OF_TEXT_TOKEN}
    )
