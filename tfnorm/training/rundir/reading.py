"""Reading a run directory after (or while) its run trains: the one public
way for `tfnorm generate` and `tfnorm predict` into a run's files.

A run directory may have been copied or moved since it was written, and
another run may now train where it was. So every path a run records for
its readers is relative to the run directory (`language_model.json` names
its checkpoint directory as `"checkpoints"`, not `/home/.../checkpoints`),
and a reader resolves it against the directory it was given: a copy reads
its own checkpoints, never those of whatever now trains in the original's
place.

A language model is rebuilt from its recipe (`language_model.json`'s
`build_decoder` arguments) only when the recipe is the one its checkpoints
were trained with: the run records the recipe's SHA-256 (`decoder_digest`)
in `run_config.json` beside the checkpoints, and `check_recipe` refuses a
recipe whose digest differs (an edited preset, norm, epsilon...: weights
that do not fit would stay random, and a changed epsilon fits every weight
but computes another function). Sizes far too large to build are refused
first (`tfnorm.limits`).

Example:

>>> from tfnorm.training.rundir import reading
>>> recipe = reading.read_recipe("runs/lm")  # doctest: +SKIP
>>> reading.recipe_checkpoint_dir("runs/lm", recipe)  # doctest: +SKIP
'runs/lm/checkpoints'
"""

from __future__ import annotations

import hashlib
import json
import os

from tfnorm._errors import KeyedMessage, setting_key
from tfnorm.choices import LANGUAGE_MODEL_TASK
from tfnorm.limits import check_model_sizes
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.rundir import run_identity

#: The file in the logdir that says how to build the model and sample from it.
LANGUAGE_MODEL_FILE = "language_model.json"
#: The `run_identity` key of the recipe's SHA-256 in `run_config.json`.
DECODER_DIGEST_KEY = "decoder_sha256"
#: Bytes a JSON file of a run may have: far more than a run writes.
MAX_JSON_BYTES = 16 << 20
#: Where the checkpoints are when a recipe does not say (`--checkpoint-dir`'s default).
DEFAULT_CHECKPOINT_DIR = "checkpoints"


class RunDirectoryError(KeyedMessage, ValueError):
    """A run directory cannot be used as asked; says what is missing or wrong.
    Settings of the run the message names are marked with `setting_key`."""


def decoder_digest(arguments):
    """The SHA-256 of `build_decoder`'s keyword arguments `arguments` (a
    JSON-ready mapping), the same however the keys are ordered."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def language_model_recipe(arguments, logdir, checkpoint_dir, end_of_text):
    """The contents of `language_model.json`: how to build the model
    (`arguments` of `build_decoder`), its tokens, and where its checkpoints
    are, relative to `logdir` (absolute only when on another drive)."""
    try:
        where = os.path.relpath(
            os.path.abspath(checkpoint_dir), os.path.abspath(logdir)
        )
    except ValueError:  # Windows: another drive has no relative path
        where = os.path.abspath(checkpoint_dir)
    return {
        "tokenizer": "bytes",
        "end_of_text": end_of_text,
        "build_decoder": dict(arguments),
        "checkpoint_dir": where,
    }


def read_json(path):
    """The JSON value of the file `path`, or None when it is missing,
    unreadable or larger than `MAX_JSON_BYTES`."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_JSON_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def read_summary(run_dir):
    """The run's `summary.json` as a dict, or None when it is missing or
    unreadable (a run from before it, or not a run directory)."""
    summary = read_json(os.path.join(run_dir, "summary.json"))
    return summary if isinstance(summary, dict) else None


def read_recipe(run_dir):
    """The `language_model.json` of the language-model run in `run_dir`.

    Raises:
        RunDirectoryError: there is none (not a language-model run), it is
            damaged, or it asks for a model above `tfnorm.limits`' bounds.
    """
    path = os.path.join(run_dir, LANGUAGE_MODEL_FILE)
    if not os.path.isfile(path):
        raise RunDirectoryError(
            f"{run_dir} is not the {setting_key('logdir')} of a language-model run "
            f"(it has no {LANGUAGE_MODEL_FILE}; runs of "
            f"{setting_key('task', LANGUAGE_MODEL_TASK)} write one). "
            f"Received: run_dir={run_dir!r}"
        )
    try:
        if os.path.getsize(path) > MAX_JSON_BYTES:
            raise ValueError("too large")
        with open(path, encoding="utf-8") as handle:
            recipe = json.load(handle)
        arguments = recipe["build_decoder"]
        if not isinstance(arguments, dict):
            raise ValueError("build_decoder is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise RunDirectoryError(
            f"{path} is damaged ({error}); it says how the run's model is "
            "built: rerun the run's tfnorm train command to write it again."
        ) from None
    try:
        check_model_sizes(arguments, path)
    except ValueError as error:
        raise RunDirectoryError(str(error)) from None
    return recipe


def recipe_checkpoint_dir(run_dir, recipe):
    """The checkpoint directory of the run in `run_dir`, from its `recipe`.

    A relative path is the run directory's own (where the run wrote it).
    A recipe of an earlier release names an absolute path, of the place the
    run was trained in: the run directory's own `checkpoints` is preferred
    when it has one, so that a copied run reads its own checkpoints.
    """
    recorded = recipe.get("checkpoint_dir")
    if not isinstance(recorded, str) or not recorded:
        return os.path.join(run_dir, DEFAULT_CHECKPOINT_DIR)
    if not os.path.isabs(recorded):
        return os.path.normpath(os.path.join(run_dir, recorded))
    own = os.path.join(run_dir, DEFAULT_CHECKPOINT_DIR)
    return own if os.path.isdir(own) else recorded


def check_recipe(run_dir, recipe, checkpoint_dir):
    """Refuses a recipe that is not the one the checkpoints were trained with.

    The checkpoints' `run_config.json` records the SHA-256 of the recipe's
    `build_decoder` arguments (`DECODER_DIGEST_KEY` in its `run_identity`);
    runs of earlier releases record none and are not checked here (a
    strict restore still refuses weights that do not fit).

    Raises:
        RunDirectoryError: one line naming the recipe and the checkpoints.
    """
    try:
        saved = run_identity.read_run_config(checkpoint_dir)
    except ConfigError as error:
        raise RunDirectoryError(str(error)) from None
    identity = (saved or {}).get(run_identity.IDENTITY_KEY)
    recorded = identity.get(DECODER_DIGEST_KEY) if isinstance(identity, dict) else None
    if recorded is None or recorded == decoder_digest(recipe["build_decoder"]):
        return
    path = os.path.join(run_dir, LANGUAGE_MODEL_FILE)
    raise RunDirectoryError(
        f"{path} is not the recipe the checkpoints in {checkpoint_dir} were "
        "trained with (its build_decoder arguments differ from the ones "
        f"{run_identity.RUN_CONFIG_FILE} recorded): it was edited, or comes from "
        "another run; restore it, or copy the run directory whole. "
        f"Received: run_dir={run_dir!r}"
    )
