"""`tfnorm train --task lm --init-from DIR` as issue 45 asks: the committed
tiny GPT-2 (with the committed BPE tokenizer) fine-tuned, killed with
kill -9 and resumed, ends with the weights of an uninterrupted run."""

from __future__ import annotations

import pytest

from tests.cli.test_train_faults import kill_9_trials
from tests.training.workloads.test_checkpoint_start import gpt2_checkpoint
from tests.training.workloads.test_language_model import corpus_text


@pytest.mark.slow  # five processes of TensorFlow: ~110 s on 2 busy cores
def test_kill_9_of_a_fine_tune_of_a_gpt2_checkpoint_resumes_to_the_same_weights(
    tmp_path,
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(corpus_text(), encoding="utf-8")
    # Dropout stays at its default (0.1, the run's, not the checkpoint's):
    # the resume must restore the dropout generators too.
    flags = ["--task", "lm", "--data", str(corpus)]
    flags += ["--init-from", gpt2_checkpoint(tmp_path), "--max-len", "16"]
    flags += ["--batch-size", "4", "--histogram-every", "0"]
    table = kill_9_trials(tmp_path, 2, model_flags=flags)
    assert table["survived"] == table["tried"] == 2
    assert table["data_lost"] == 0 and table["during_write"] >= 1
