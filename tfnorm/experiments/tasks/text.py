"""Masked-language modelling on real English text that ships with Python.

`pydoc_data.topics.topics` is part of every CPython installation: the
Python language reference's prose (79 topics, about 64,000 words or 430,000
characters in Python 3.11; other Python versions ship slightly different
text), which `help()` shows offline. `MaskedTextTask` turns it into a
BERT-style masked-language-modelling task (Devlin et al., 2019,
https://arxiv.org/abs/1810.04805), the setting the LayerNorm-placement
literature measures (Xiong et al., 2020; Liu et al., 2020):

* units: characters (the default: a few hundred steps on 2 CPU cores show
  learning beyond unigram guessing) or words. Text is lower-cased,
  whitespace runs become one space and runs of 3 or more of the same
  punctuation mark (reStructuredText underlines) become one, so masked
  underline characters are not free points; words are runs of letters
  (`[a-z]+`);
* vocabulary: `[MASK]`, `[UNK]` and the `vocab_size - 2` most frequent units
  of the training split;
* split: the last 10% of every topic is held out, the rest trains;
* masking: 15% of the positions of a window (at least one) are chosen,
  except units outside the vocabulary; of those 80% become `[MASK]`, 10% a
  random unit, 10% stay; the loss and the accuracy count the chosen
  positions only;
* training windows start anywhere in the training stream, drawn afresh at
  every step; the evaluation windows are consecutive held-out windows with
  one fixed masking.
"""

from __future__ import annotations

import collections
import re

import numpy as np

from tfnorm.choices import TEXT_UNITS

MASK, UNK = 0, 1
SPECIAL_TOKENS = ("[MASK]", "[UNK]")
MASK_FRACTION = 0.15
HELD_OUT_FRACTION = 0.1
SOURCE = (
    "pydoc_data.topics.topics (the Python language reference, shipped with CPython)"
)

UNITS = TEXT_UNITS

_WORD = re.compile(r"[a-z]+")
_SPACES = re.compile(r"\s+")
_UNDERLINE = re.compile(r"([^\w\s])\1{2,}")


def topic_units(unit="char"):
    """`{topic: [unit, ...]}` of `pydoc_data.topics.topics`, topics sorted.

    Args:
        unit: `"char"` or `"word"`.
    """
    from pydoc_data.topics import topics

    if unit not in UNITS:
        raise ValueError(f"`unit` must be one of {UNITS}. Received: unit={unit!r}")
    result = {}
    for key in sorted(topics):
        text = topics[key].lower()
        if unit == "word":
            result[key] = _WORD.findall(text)
        else:
            text = _UNDERLINE.sub(r"\1", _SPACES.sub(" ", text))
            result[key] = list(text.strip())
    return result


def split_units(words_by_topic, held_out=HELD_OUT_FRACTION):
    """(training units, held-out units): the last `held_out` of every topic held out."""
    train, test = [], []
    for words in words_by_topic.values():
        cut = len(words) - int(round(held_out * len(words)))
        train.extend(words[:cut])
        test.extend(words[cut:])
    return train, test


def build_vocabulary(words, vocab_size):
    """The special tokens, then the `vocab_size - 2` most frequent units (ties by unit)."""
    if vocab_size < len(SPECIAL_TOKENS) + 1:
        raise ValueError(
            f"`vocab_size` must be at least {len(SPECIAL_TOKENS) + 1} for the mlm "
            f"task (two special tokens and one unit). Received: vocab_size={vocab_size}"
        )
    counts = collections.Counter(words)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return list(SPECIAL_TOKENS) + [w for w, _ in ranked[: vocab_size - 2]]


def encode(words, vocabulary):
    index = {word: i for i, word in enumerate(vocabulary)}
    return np.array([index.get(word, UNK) for word in words], dtype="int32")


def mask_windows(rng, windows, vocab_size):
    """BERT-style masking of `windows` (int32, `(n, seq_len)`).

    Returns:
        `(inputs, targets, weights)`: the corrupted windows, the original
        ones, and float32 weights, 1 at the chosen positions and 0 elsewhere.
    """
    count, seq_len = windows.shape
    chosen = rng.random((count, seq_len)) < MASK_FRACTION
    # At least one chosen position per window, so every window counts.
    chosen[np.arange(count), rng.integers(0, seq_len, count)] = True
    # A rare unit is not one to predict: "[UNK]" is right for 8% of the
    # words with a 1000-word vocabulary, and a model could score by guessing it.
    chosen &= windows != UNK
    action = rng.random((count, seq_len))
    inputs = windows.copy()
    inputs[chosen & (action < 0.8)] = MASK
    randomised = chosen & (action >= 0.8) & (action < 0.9)
    inputs[randomised] = rng.integers(len(SPECIAL_TOKENS), vocab_size, randomised.sum())
    return inputs, windows.copy(), chosen.astype("float32")


class MaskedTextTask:
    """Masked-language modelling on `pydoc_data.topics` (see the module docstring).

    Args:
        vocab_size: int, the vocabulary size including the 2 special tokens.
        seq_len: int, units per window.
        eval_size: int, at most this many held-out windows are evaluated.
        unit: `"char"` or `"word"`. Defaults to `"char"`.
    """

    name = "mlm"
    #: No fixed accuracy or loss to reach: the table reports accuracy and loss.
    target_accuracy = None
    target_loss = None

    def __init__(self, vocab_size, seq_len, eval_size, unit="char"):
        self.description = f"masked-language modelling ({unit}s) on {SOURCE}"
        train_words, test_words = split_units(topic_units(unit))
        self.vocabulary = build_vocabulary(train_words, vocab_size)
        self.vocab_size = len(self.vocabulary)
        self.seq_len = seq_len
        self.train_ids = encode(train_words, self.vocabulary)
        test_ids = encode(test_words, self.vocabulary)
        count = min(eval_size, len(test_ids) // seq_len)
        windows = test_ids[: count * seq_len].reshape(count, seq_len)
        self.eval_data = mask_windows(
            np.random.default_rng(12_345), windows, self.vocab_size
        )
        _, targets, weights = self.eval_data
        # The accuracy of always predicting the commonest training unit.
        commonest = np.bincount(self.train_ids, minlength=self.vocab_size)
        commonest[: len(SPECIAL_TOKENS)] = 0
        self.chance = float(
            np.sum((targets == commonest.argmax()) * weights) / weights.sum()
        )
        self.sizes = {
            "unit": unit,
            "train_units": int(len(train_words)),
            "held_out_units": int(len(test_words)),
            "eval_windows": int(count),
            "unknown_fraction_train": float(np.mean(self.train_ids == UNK)),
        }

    def batch(self, rng, batch_size):
        starts = rng.integers(0, len(self.train_ids) - self.seq_len, batch_size)
        windows = self.train_ids[starts[:, None] + np.arange(self.seq_len)]
        return mask_windows(rng, windows, self.vocab_size)

    def final_measures(self, evaluate):
        """Nothing beyond the curves: the evaluation set is the whole measure."""
        return {}
