"""Masked-language modelling on `pydoc_data.topics`, `tfnorm.experiments.tasks.text`."""

from __future__ import annotations

import numpy as np
import pytest

from tfnorm.experiments.tasks import text as text_task
from tfnorm.experiments.tasks.text import MASK, UNK, MaskedTextTask


@pytest.fixture(scope="module")
def task():
    return MaskedTextTask(vocab_size=200, seq_len=16, eval_size=64, unit="word")


def test_the_text_is_real_english_prose_shipped_with_python():
    words = text_task.topic_units("word")
    assert len(words) > 50  # topics of the language reference
    flat = [w for topic in words.values() for w in topic]
    assert len(flat) > 30_000
    assert {"the", "is", "of", "class", "function"} <= set(flat)


def test_held_out_split_is_the_end_of_every_topic():
    words = {"a": list("abcdefghij"), "b": list("klmnopqrst")}
    train, test = text_task.split_units(words, held_out=0.2)
    assert train == list("abcdefgh") + list("klmnopqr")
    assert test == list("ij") + list("st")


def test_vocabulary_is_the_specials_then_the_commonest_training_words():
    vocabulary = text_task.build_vocabulary(["b", "a", "b", "c", "b", "a"], 4)
    assert vocabulary == ["[MASK]", "[UNK]", "b", "a"]
    ids = text_task.encode(["a", "c", "b"], vocabulary)
    assert ids.tolist() == [3, UNK, 2]
    with pytest.raises(ValueError, match="vocab_size=2"):
        text_task.build_vocabulary(["a"], 2)


def test_masking_follows_bert():
    rng = np.random.default_rng(0)
    windows = rng.integers(2, 50, (4000, 20)).astype("int32")
    inputs, targets, weights = text_task.mask_windows(rng, windows, 50)
    np.testing.assert_array_equal(targets, windows)
    chosen = weights.astype(bool)
    assert chosen.any(axis=1).all()  # every window counts
    assert 0.15 < chosen.mean() < 0.2  # 15%, plus one forced per window
    np.testing.assert_array_equal(inputs[~chosen], windows[~chosen])
    masked = (inputs == MASK)[chosen].mean()
    unchanged = (inputs == windows)[chosen].mean()
    assert masked == pytest.approx(0.8, abs=0.02)
    # 10% kept, plus the random replacements that drew the same word.
    assert unchanged == pytest.approx(0.1 + 0.1 / 48, abs=0.02)


def test_task_batches_and_a_fixed_evaluation_set(task):
    assert task.vocab_size == 200
    inputs, targets, weights = task.batch(np.random.default_rng(1), 8)
    assert inputs.shape == targets.shape == weights.shape == (8, 16)
    assert inputs.dtype == np.int32 and weights.dtype == np.float32
    assert targets.max() < 200
    again = MaskedTextTask(vocab_size=200, seq_len=16, eval_size=64, unit="word")
    for part, same in zip(task.eval_data, again.eval_data):
        np.testing.assert_array_equal(part, same)
    assert task.eval_data[0].shape == (64, 16)
    # Always guessing "the" is right for a few percent of the masked words.
    assert 0.01 < task.chance < 0.2
    assert task.sizes["held_out_units"] > 0.05 * task.sizes["train_units"]


def test_characters_collapse_whitespace_and_underlines():
    chars = text_task.topic_units("char")
    text = "".join(next(iter(chars.values())))
    assert "  " not in text and "\n" not in text
    assert "***" not in text and "---" not in text
    assert text == text.lower()
    task = MaskedTextTask(vocab_size=48, seq_len=64, eval_size=16)
    assert task.vocabulary[2] == " "  # the commonest character
    assert task.sizes["unknown_fraction_train"] < 0.01
    assert task.eval_data[0].shape == (16, 64)


def test_words_outside_the_vocabulary_are_never_targets():
    rng = np.random.default_rng(3)
    windows = rng.integers(1, 6, (500, 10)).astype("int32")  # 1 is [UNK]
    _, _, weights = text_task.mask_windows(rng, windows, 6)
    assert weights[windows == UNK].sum() == 0
    assert weights[windows != UNK].sum() > 0


@pytest.mark.slow
def test_on_real_text_pre_ln_learns_where_post_ln_guesses_spaces(tmp_path):
    # The default mlm size on seed 0 (~1-2 minutes): at the peak rate 1e-2
    # Post-LN without warm-up only ever predicts the commonest character,
    # Pre-LN learns beyond it. docs/experiments.md, section 4.
    from tfnorm.experiments import compare_experiment as warmup

    result = warmup.run_comparison(
        str(tmp_path),
        log=lambda line: None,
        task="mlm",
        seeds=(0,),
        histogram_every=0,
        variant_settings=[("post", 0), ("pre", 0)],
    )
    chance = result["task"]["chance_accuracy"]
    post, pre = result["table"]
    assert post["final_accuracy_max"] < chance + 0.01
    assert pre["final_accuracy_min"] > chance + 0.03
