"""Sampling text from a language-model run (`tfnorm train --task lm`).

A Hugging Face checkpoint directory works too: its decoder
(`tfnorm.models.decoder_from_hf`) with its own tokenizer.
A finished run's export is used as it is, checked as `tfnorm predict` checks
a classifier's (`prediction.find_model`: a damaged or foreign export is one
error, never a traceback). A run without an export (still training, stopped,
or trained without one) is rebuilt from `language_model.json` and restored
from its newest checkpoint. The text is byte tokens in and out
(`data.byte_text`), sampled by `tfnorm.generate` with its KV cache.

Example:

>>> from tfnorm.inference.text_generation import TextGenerator
>>> TextGenerator("runs/lm").complete("The ", 40, seed=0)  # doctest: +SKIP
'The model of the statement is ...'
"""

from __future__ import annotations

import os

from tfnorm.inference.prediction import (
    MODEL_NAMES,
    PredictionError,
    check_same_export,
    find_model,
    load_exported_model,
)
from tfnorm.training.data import byte_text
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
        self.tokenizer = None
        if is_hf_checkpoint(self.run_dir):
            self.model, self.tokenizer = _from_hf(self.run_dir)
            self.source = self.run_dir
            self.max_len = int(self.model.max_len)
            return
        recipe = reading.read_recipe(self.run_dir)
        summary = reading.read_summary(self.run_dir)
        if any(os.path.lexists(os.path.join(self.run_dir, n)) for n in MODEL_NAMES):
            self.source = find_model(self.run_dir)
            check_same_export(self.run_dir, summary)
            self.model = load_exported_model(self.source)
        else:
            self.model, self.source = _from_checkpoint(self.run_dir, recipe)
        self.max_len = int(self.model.max_len)
        if recipe.get("tokenizer", "bytes") != "bytes":
            # A run started from a checkpoint (`init_from`) kept its tokenizer
            # in its own folder, never elsewhere.
            from tfnorm.checkpoints import load_tokenizer

            if recipe["tokenizer"] != "tokenizer":
                raise PredictionError(
                    f"{os.path.join(self.run_dir, LANGUAGE_MODEL_FILE)}: unknown "
                    f"tokenizer {recipe['tokenizer']!r}. Received: "
                    f"run_dir={self.run_dir!r}"
                )
            self.tokenizer = load_tokenizer(
                os.path.join(self.run_dir, recipe["tokenizer"])
            )

    def complete(
        self,
        prompt,
        max_new_tokens=None,
        *,
        temperature=1.0,
        top_k=None,
        top_p=None,
        seed=None,
        stop_strings=None,
        callback=None,
        jit_compile=False,
    ):
        """`prompt` (a str) followed by the text sampled after it.

        The sampling arguments are `tfnorm.generate`'s, by the same names:
        `temperature` 0 picks the likeliest byte each step (greedy); else
        bytes are sampled from the softmax at that temperature, among the
        `top_k` likeliest (k >= 1), or the smallest set reaching `top_p`, or
        all; `top_k` with `top_p` is refused. `max_new_tokens` None fills
        the context (one whole context when the prompt already fills it);
        more slides the window past it (see `tfnorm.generate`), and a
        prompt longer than the context is cropped to its last bytes for the
        model, with a warning. The same `seed` gives the same text (in the
        same runtime and with the same `jit_compile`). Sampling stops at the
        end-of-text token, or after any of `stop_strings` (kept in the
        text). `callback(text)` receives the new text piece by piece as it
        is made (whole UTF-8 characters). XLA is off by default: for a
        context of a few hundred bytes, compiling the loop takes seconds
        longer than running it.

        Raises:
            ValueError: an empty prompt, or a bad sampling argument (naming it).
        """
        import codecs

        from tfnorm.generation import generate

        sampling = {
            "temperature": temperature,
            "top_k": top_k,
            "top_p": top_p,
            "seed": seed,
            "jit_compile": jit_compile,
        }
        if self.tokenizer is not None:
            return _complete_tokens(
                self, prompt, max_new_tokens, sampling, stop_strings, callback
            )
        ids = byte_text.encode(prompt)
        if not len(ids):
            raise ValueError("the prompt is empty; give some text to continue.")
        if max_new_tokens is None:
            room = self.max_len - len(ids)
            max_new_tokens = room if room >= 1 else self.max_len
        stops = [s for s in (stop_strings or ()) if s]
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = []

        def on_token(row, token):
            if token == byte_text.END_OF_TEXT:
                return True
            piece = decoder.decode(bytes([token]))
            if piece:
                text.append(piece)
                if callback is not None:
                    callback(piece)
            made = "".join(text)
            return any(stop in made[-(len(stop) + len(piece)) :] for stop in stops)

        streaming = callback is not None or bool(stops)
        [row] = generate(
            self.model,
            [ids],
            max_new_tokens,
            stop_token_ids=[byte_text.END_OF_TEXT],
            callback=on_token if streaming else None,
            **sampling,
        )
        if not streaming:
            return prompt + byte_text.decode(row[len(ids) :])
        tail = decoder.decode(b"", final=True)
        if tail:
            text.append(tail)
            if callback is not None:
                callback(tail)
        return prompt + _cut_after_stop("".join(text), stops)


def is_hf_checkpoint(directory):
    """Whether `directory` is a Hugging Face checkpoint (a `config.json` and
    no `language_model.json`, which a tfnorm run writes)."""
    return os.path.isfile(
        os.path.join(directory, "config.json")
    ) and not os.path.isfile(os.path.join(directory, LANGUAGE_MODEL_FILE))


def _from_hf(directory):
    """The decoder and tokenizer of a Hugging Face checkpoint directory."""
    from tfnorm.checkpoints import CheckpointError, load_tokenizer
    from tfnorm.models import decoder_from_hf

    try:
        return decoder_from_hf(directory), load_tokenizer(directory)
    except CheckpointError as error:
        raise PredictionError(
            f"{error} Received: run_dir={directory!r}"
            if "Received:" not in str(error)
            else str(error)
        ) from None


def _complete_tokens(generator, prompt, max_new_tokens, sampling, stops, callback):
    """`TextGenerator.complete` with the checkpoint's tokenizer: its ids in
    and out, its end-of-text id ending a text, the text streamed as whole
    characters (a piece whose last character is still cut waits)."""
    from tfnorm.generation import generate

    tokenizer = generator.tokenizer
    ids = tokenizer.encode(prompt)
    if not len(ids):
        raise ValueError("the prompt is empty; give some text to continue.")
    if max_new_tokens is None:
        room = generator.max_len - len(ids)
        max_new_tokens = room if room >= 1 else generator.max_len
    stops = [s for s in (stops or ()) if s]
    made, shown = [], [""]

    def on_token(row, token):
        if token == tokenizer.eos_id:
            return True
        made.append(token)
        text = tokenizer.decode(made)
        if not text.endswith("\ufffd") and len(text) > len(shown[0]):
            if callback is not None:
                callback(text[len(shown[0]) :])
            shown[0] = text
        return any(stop in text for stop in stops)

    eos = [] if tokenizer.eos_id is None else [tokenizer.eos_id]
    streaming = callback is not None or bool(stops)
    [row] = generate(
        generator.model,
        [ids],
        max_new_tokens,
        stop_token_ids=eos,
        callback=on_token if streaming else None,
        **sampling,
    )
    if not streaming:
        new = [int(t) for t in row[len(ids) :]]
        if tokenizer.eos_id in new:
            new = new[: new.index(tokenizer.eos_id)]
        return prompt + tokenizer.decode(new)
    text = tokenizer.decode(made)
    if callback is not None and len(text) > len(shown[0]):
        callback(text[len(shown[0]) :])
    return prompt + _cut_after_stop(text, stops)


def _cut_after_stop(text, stops):
    """`text` up to and including the first of `stops` in it."""
    found = [text.find(stop) + len(stop) for stop in stops if stop in text]
    return text[: min(found)] if found else text


def _from_checkpoint(run_dir, recipe):
    """The run's model rebuilt from `recipe` and restored, every variable of
    it, from the run's own newest checkpoint."""
    from tfnorm.models import build_decoder

    directory = reading.recipe_checkpoint_dir(run_dir, recipe)
    # The checkpoint files are the truth, not the state file
    # (`tf.train.latest_checkpoint` logs a TensorFlow ERROR line when the
    # state file names checkpoints that were deleted).
    found = checkpoints.scan(directory)
    latest = found[-1][1] if found else None
    if latest is None:
        listed = checkpoints.read_state_file(directory)
        why = (
            "yet; wait for the run's first checkpoint"
            if not listed
            else f"(its state file names {os.path.basename(listed[-1])}, whose "
            "files are gone); restore the checkpoint files or train again"
        )
        raise PredictionError(
            f"{run_dir}: no exported model and no checkpoint in {directory} "
            f"{why}. Received: run_dir={run_dir!r}"
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
