"""The checks of `TrainConfig.resolve` that involve several settings.

Each setting reads and checks its own value (`tfnorm.settings.readers`,
`tfnorm.training.config.readers`);
these are the rules no single value decides: exactly one data
source, a validation split only of a file, the synthetic tasks' needs, a
model and a step that fit in memory (`model_checks`), a norm spec with its
epsilon, and a log file that is neither a link, nor a data file, nor the
user's module (`path_checks`). Each
failure is a `ConfigError` naming the key to change.

Like the rest of `config`, this module must not import TensorFlow at import time.
"""

from __future__ import annotations

import os

from tfnorm._checks import check_heads
from tfnorm._errors import setting_key
from tfnorm.choices import DECODER_PRESET_NORMS, LANGUAGE_MODEL_TASK, SYNTHETIC_TASKS
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.model_checks import check_model_size, check_norm
from tfnorm.training.config.path_checks import check_log_file
from tfnorm.training.config.train_defaults import default_vocab_size


def check_one_source(task, data, model_fn=None, data_fn=None):
    """Checks that exactly one data source is given: a synthetic task, a data
    file, or the user's `data_fn` (which goes with `model_fn`).

    Runs before the values are read: "both given" is the error to report
    even when the file does not exist. `train(config, model_fn=...,
    data_fn=...)` passes its callables here in place of the names.
    """

    def given(value):
        return value is not None and str(value).strip().lower() not in ("none", "null")

    if given(model_fn) != given(data_fn):
        key = "data_fn" if given(model_fn) else "model_fn"
        raise ConfigError(
            key,
            f"{setting_key('model_fn')} and {setting_key('data_fn')} go together: your "
            "model trains on your data. Received: "
            f"model_fn={model_fn!r}, data_fn={data_fn!r}",
        )
    if given(model_fn):
        if given(task) or given(data):
            raise ConfigError(
                "task" if given(task) else "data",
                "With model_fn and data_fn, the data come from data_fn: leave "
                f"out task and data. Received: task={task!r}, data={data!r}",
            )
        return
    if given(task) and str(task).strip() == LANGUAGE_MODEL_TASK:
        if not given(data):
            raise ConfigError(
                "data",
                f"{setting_key('task', LANGUAGE_MODEL_TASK)} trains on text: give "
                f"{setting_key('data')} (UTF-8 text files, or a directory of .txt "
                f"files). Received: data={data!r}",
            )
        return
    if given(task) == given(data):
        raise ConfigError(
            "task",
            f"Give exactly one data source: a synthetic task ({setting_key('task')}, "
            f"one of {', '.join(SYNTHETIC_TASKS)}), a file ({setting_key('data')}), or "
            f"your own {setting_key('model_fn')} and {setting_key('data_fn')}. "
            f"Received: task={task!r}, data={data!r}",
        )


def check_combinations(values):
    """Checks that involve several settings; `values` are already read."""
    task, data = values["task"], values["data"]
    if task != LANGUAGE_MODEL_TASK and data is not None:
        _check_one_file(data)
    if values["val_data"] is not None and data is None:
        raise ConfigError(
            "val_data",
            f"{setting_key('val_data')} needs {setting_key('data')}; synthetic tasks make "
            f"their own validation set. Received: val_data={values['val_data']!r}",
        )
    # 0 ("no split") is harmless anywhere; a share only means something for
    # a file without a validation file.
    if values["val_split"] and (values["val_data"] or not data):
        reason = (
            f"splits {setting_key('data')}; synthetic tasks make their own validation"
        )
        if data:
            reason = f"splits {setting_key('data')} when no {setting_key('val_data')} is given"
        raise ConfigError(
            "val_split",
            f"{setting_key('val_split')} {reason}. Received: "
            f"val_split={values['val_split']!r}, val_data={values['val_data']!r}",
        )
    try:
        check_heads(values["d_model"], values["num_heads"])
    except ValueError as error:
        raise ConfigError("d_model", str(error)) from None
    if task in SYNTHETIC_TASKS:
        _check_task(values)
    check_log_file(values)
    _check_optimisation(values)
    _check_evaluation(values)
    if values["model_fn"] is not None:
        return  # the user's model: tfnorm's model settings do not apply
    check_model_size(values)
    norm = values["norm"]
    if norm is None:  # a language model's: its preset's
        norm = DECODER_PRESET_NORMS[values["preset"]]
    check_norm(norm, values["epsilon"], values)


def _check_optimisation(values):
    """A floor above the peak, and Adam's settings for an optimizer that has
    none, are refused rather than ignored."""
    floor, peak = values["min_learning_rate"], values["learning_rate"]
    if floor > peak:
        raise ConfigError(
            "min_learning_rate",
            "min_learning_rate must be at most the peak "
            f"{setting_key('learning_rate')} (the decay goes down to it). "
            f"Received: min_learning_rate={floor!r}, learning_rate={peak!r}",
        )
    defaults = {"beta1": 0.9, "beta2": 0.999, "adam_epsilon": 1e-8}
    if values["optimizer"] != "adamw":
        defaults["weight_decay_on"] = "matrices"
    for key, default in defaults.items():
        if values[key] != default and (
            values["optimizer"] == "sgd" or key == "weight_decay_on"
        ):
            raise ConfigError(
                key,
                f"{key} applies to "
                f"{'adamw' if key == 'weight_decay_on' else 'adam and adamw'}, "
                f"not {setting_key('optimizer', values['optimizer'])}. "
                f"Received: {key}={values[key]!r}",
            )


def _check_evaluation(values):
    """A language model without held-out text has nothing to evaluate: the
    evaluation settings would be silently ignored."""
    if values["task"] != LANGUAGE_MODEL_TASK or values["val_split"] != 0:
        return
    for key in ("eval_every", "eval_batches", "keep_best"):
        if values[key] not in (None, False):
            raise ConfigError(
                key,
                f"{key} needs held-out text to evaluate, but "
                f"{setting_key('val_split', 0)} holds none out. "
                f"Received: {key}={values[key]!r}, val_split=0.0",
            )


def _check_one_file(data):
    """The classifier reads one file; several, or a directory, are text for
    a language model."""
    if isinstance(data, list) or os.path.isdir(data):
        what = "it is a directory" if not isinstance(data, list) else "several files"
        raise ConfigError(
            "data",
            f"`data` must name a file ({what}; several text files or a "
            f"directory train a language model: "
            f"{setting_key('task', LANGUAGE_MODEL_TASK)}). Received: data={data!r}",
        )


def _check_task(values):
    task, max_len, classes = values["task"], values["max_len"], values["num_classes"]
    vocab = values["vocab_size"] or default_vocab_size(None, max_len)
    if task == "duplicate" and vocab - 1 < max_len:
        raise ConfigError(
            "vocab_size",
            "The duplicate task needs vocab_size > max_len, so that sequences "
            f"without repeats exist. Received: vocab_size={vocab}, max_len={max_len}",
        )
    if task == "majority" and classes is not None and classes > vocab - 1:
        raise ConfigError(
            "num_classes",
            "The majority task needs num_classes < vocab_size (each class "
            f"holds token ids). Received: num_classes={classes}, vocab_size={vocab}",
        )
