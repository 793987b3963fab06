"""Sampling text from a language-model run (`tfnorm train --task lm`).

A finished run's export is used as it is, checked as `tfnorm predict` checks
a classifier's (`prediction.find_model`: a damaged or foreign export is one
error, never a traceback). A run without an export (still training, stopped,
or trained without one) is rebuilt from `language_model.json` and restored
from its newest checkpoint. The text is byte tokens in and out
(`data.byte_text`), sampled by `tfnorm.generate` with its KV cache.

Example:

>>> from tfnorm.training.text_generation import TextGenerator
>>> TextGenerator("runs/lm").complete("The ", 40, seed=0)  # doctest: +SKIP
'The model of the statement is ...'
"""

from __future__ import annotations

import os

from tfnorm.training.data import byte_text
from tfnorm.training.prediction import (
    MODEL_NAMES,
    PredictionError,
    _check_same_export,
    _load_model,
    find_model,
    read_summary,
)
from tfnorm.training.rundir import checkpoints, reading
from tfnorm.training.rundir.reading import LANGUAGE_MODEL_FILE


class TextGenerator:
    """The model of a language-model run, ready to continue prompts.

    Attributes:
        source: what the model was read from (the export's path, or the
            checkpoint's).
        max_len: the model's context, in tokens (bytes).

    Raises:
        PredictionError: the directory is not a language-model run, its
            export is damaged or of another run, or it has neither an
            export nor a checkpoint yet.
    """

    def __init__(self, run_dir):
        self.run_dir = os.fspath(run_dir)
        if not os.path.isdir(self.run_dir):
            find_model(self.run_dir)  # says "no such run directory"
        recipe = reading.read_recipe(self.run_dir)
        summary = read_summary(self.run_dir)
        if any(os.path.lexists(os.path.join(self.run_dir, n)) for n in MODEL_NAMES):
            self.source = find_model(self.run_dir)
            _check_same_export(self.run_dir, summary)
            self.model = _load_model(self.source)
        else:
            self.model, self.source = _from_checkpoint(self.run_dir, recipe)
        self.max_len = int(self.model.max_len)

    def complete(
        self,
        prompt,
        max_new_tokens=None,
        *,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=None,
        jit_compile=False,
    ):
        """`prompt` (a str) followed by the text sampled after it.

        `temperature` 0 picks the likeliest byte each step (greedy); else
        bytes are sampled from the softmax at that temperature, among the
        `top_k` likeliest, or the smallest set reaching `top_p`, or all.
        `max_new_tokens` None fills the context. The same `seed` gives the
        same text (in the same runtime and with the same `jit_compile`).
        Sampling stops at the end-of-text token. XLA is off by default: for
        a context of a few hundred bytes, compiling the loop takes seconds
        longer than running it.

        Raises:
            ValueError: an empty prompt, a prompt that leaves no room in the
                context, or a bad sampling argument (naming it).
        """
        from tfnorm.generation import generate

        ids = byte_text.encode(prompt)
        if not len(ids):
            raise ValueError("the prompt is empty; give some text to continue.")
        room = self.max_len - len(ids)
        if room < 1:
            raise ValueError(
                f"the prompt is {len(ids)} bytes; the model's context is "
                f"{self.max_len} bytes, so it leaves no room to generate: "
                "shorten the prompt."
            )
        if max_new_tokens is None:
            max_new_tokens = room
        if temperature == 0:
            options = {"sampler": "greedy"}
        elif top_p is not None:
            options = {"sampler": "top_p", "p": top_p, "temperature": temperature}
        else:
            options = {"sampler": "top_k", "k": top_k or byte_text.VOCAB_SIZE}
            options["temperature"] = temperature
        [row] = generate(
            self.model,
            [ids],
            max_new_tokens,
            seed=seed,
            stop_token_ids=[byte_text.END_OF_TEXT],
            jit_compile=jit_compile,
            **options,
        )
        return prompt + byte_text.decode(row[len(ids) :])


def _from_checkpoint(run_dir, recipe):
    """The run's model rebuilt from `recipe` and restored, every variable of
    it, from the run's own newest checkpoint."""
    from tfnorm._keras import tf
    from tfnorm.models import build_decoder

    directory = reading.recipe_checkpoint_dir(run_dir, recipe)
    latest = tf.train.latest_checkpoint(directory)
    if latest is None:
        raise PredictionError(
            f"{run_dir}: no exported model and no checkpoint in {directory} "
            "yet; wait for the run's first checkpoint. "
            f"Received: run_dir={run_dir!r}"
        )
    reading.check_recipe(run_dir, recipe, directory)
    try:
        model = build_decoder(**recipe["build_decoder"])
        checkpoints.restore_model(model, latest)
    except checkpoints.CheckpointMismatchError as error:
        raise PredictionError(
            f"{latest} does not hold the model "
            f"{os.path.join(run_dir, LANGUAGE_MODEL_FILE)} describes "
            f"({error.reason}); restore the recipe, or copy the run directory "
            f"whole. Received: run_dir={run_dir!r}"
        ) from None
    except Exception as error:  # whatever a damaged checkpoint makes TF raise
        raise PredictionError(
            f"{latest}: the model cannot be restored from it "
            f"({type(error).__name__}: {' '.join(str(error).split())[:200]})"
        ) from None
    return model, latest
