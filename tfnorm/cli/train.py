"""`tfnorm train`: trains a Transformer classifier; a thin layer over `tfnorm.training.train`.

Settings come from `--config FILE` (YAML or JSON, keys as in `TrainConfig`)
and from flags; a flag given on the command line wins over the file. The
flags are generated from `TrainConfig`'s declarations (`cli.flags`, as for
`tfnorm compare`), and their values are
read by the same code as the file's, so both give the same one-line error.

Exit statuses: 0 finished, 2 bad flag/config/data or a checkpoint directory
in use by another run (nothing trained), or a label out of range met mid-run
(the checkpoints before it kept), 3 stopped on a NaN loss (last good
checkpoint kept), 74 failed writing an output such as a checkpoint on a full
disk, or out of memory during a step (summary.json says why), 129 stopped by SIGHUP (the terminal or SSH
session closed without nohup), 130 stopped by SIGINT and 143 stopped by SIGTERM
(all three after saving a checkpoint and summary.json; rerun the same command
to resume). Under `nohup` SIGHUP stays ignored and the run goes on. A closed
stdout (`tfnorm train ... | head -2`, a closed terminal) does not stop the run:
progress goes on in --log-file and the run ends as it would have. The
status-to-exit table is `tfnorm.training.rundir.outputs.EXIT_STATUS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from tfnorm.choices import LANGUAGE_MODEL_TASK
from tfnorm.cli.flags import add_setting_flags, describe, fail
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import setting_of
from tfnorm.training.config.config_file import load_config_file
from tfnorm.training.config.path_checks import same_file
from tfnorm.training.config.train_config import TrainConfig
from tfnorm.training.config.train_defaults import DEFAULT_VAL_SPLIT

EPILOG = """\
examples (from the repository's root; the README says what they reach):
  tfnorm train --model-fn examples/keras_transformer_classifier.py:build_model \\
      --data-fn examples/keras_transformer_classifier.py:load_data --epochs 3 --logdir runs/mine
  tfnorm train --task sorted --num-layers 2 --d-model 64 --norm-position pre --max-len 6 \\
      --num-examples 4096 --warmup-steps 50 --epochs 3 --logdir runs/sorted --log-file runs/sorted/train.log
  tfnorm train --data examples/data/reviews.csv --max-len 32 --epochs 5 --logdir runs/reviews
  tfnorm predict runs/reviews "a wonderful, moving film"
  tfnorm train --task lm --data runs/corpus --max-len 128 --num-layers 2 --d-model 64 --num-heads 4 \\
      --batch-size 16 --steps-per-epoch 300 --learning-rate 3e-3 --warmup-steps 30 --logdir runs/lm
  tfnorm generate runs/lm "The " --max-new-tokens 80 --temperature 0.7 --seed 1
  nohup tfnorm train --config run.yaml --log-file run.log &   # then: tail -f run.log

data files: CSV/TSV with a header naming `text` and `label` columns, or JSON
Lines with {"text": ..., "label": ...} objects, in UTF-8. Labels are names
(pos, neg, ...: class ids in their sorted order, saved as labels.json with
the run) or class ids 0, 1, ... (below --num-classes when it is given), not
both. Without --val-data, --val-split holds out a seeded share of --data. A
progress line at the start says how many texts --max-len cuts and which
--max-len keeps 95% whole.

outputs: progress lines on stdout and in --log-file; TensorBoard logs
(train/, validation/, norms/) and summary.json in --logdir; checkpoints in
--checkpoint-dir; the final model in --logdir (model.keras, or the SavedModel
directory `model` on TensorFlow 2.9), checked by loading it back, with
vocabulary.json and labels.json for `tfnorm predict RUN_DIR TEXT...`. A model
that does not load back the same is exported as model.weights.h5 with the
line of Python that loads it (summary.json: export). Rerunning the same command resumes
from the last checkpoint.

exit status: 0 finished; 2 bad flag, config or data, or the checkpoint
directory is in use by another run (nothing trained), or a label out of range
met mid-run (the checkpoints before it kept); 3 stopped on a NaN loss
(the last good checkpoint is kept); 74 an output could not be written, e.g. a
full disk, or memory ran out during a step (summary.json has the reason;
rerun to resume); 129 stopped by SIGHUP (terminal or SSH session closed;
under nohup it is ignored), 130 stopped by SIGINT, 143 stopped by SIGTERM (a checkpoint and summary.json are saved first).
A closed stdout (`| head`, a closed terminal) does not stop the run: progress
goes on in --log-file.
"""


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "train",
        help="train your Keras model, a Transformer text classifier or a "
        "language model of text (resumable, logs for SSH/tmux)",
        description="Train your own Keras model (--model-fn, --data-fn) or a "
        "tfnorm Transformer classifier on a synthetic task or a "
        "text-classification file, or a causal language model of UTF-8 text "
        "(--task lm, then tfnorm generate), with warm-up, AdamW (no decay on norms "
        "or biases), checkpoints that survive kill -9, and TensorBoard logs. "
        "Settings come from --config and flags; flags win.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="YAML (.yaml/.yml) or JSON file of settings; keys are the flag "
        "names with _ for - (e.g. learning_rate)",
    )
    groups = add_setting_flags(parser, TrainConfig)
    groups["outputs"].add_argument(
        "--print-config",
        action="store_true",
        help="print the merged settings as JSON and exit without training",
    )
    parser.set_defaults(func=run)


def merge_settings(args):
    """The config file's settings overridden by the flags given on the command line."""
    given = dict(vars(args))
    for key in ("func", "command", "print_config"):
        given.pop(key, None)
    config_path = given.pop("config", None)
    keys = {field.name for field in dataclasses.fields(TrainConfig)}
    settings = load_config_file(config_path, keys) if config_path else {}
    settings = {str(key).replace("-", "_"): value for key, value in settings.items()}
    settings.update(given)
    return settings


def _check_log_is_not_config(log_file, config_path):
    if log_file and config_path and same_file(log_file, config_path):
        raise ConfigError(
            "log_file",
            "log_file is the same file as the config file (--config); progress "
            "lines would be appended to the settings. Received: "
            f"log_file={log_file!r}, config={config_path!r}",
        )


def _fail(message):
    return fail("train", message)


def _describe_config_error(error):
    return describe(error, TrainConfig, with_key=True)


def run(args):
    from tfnorm.training.data import DataError

    printing = getattr(args, "print_config", False)
    try:
        config = TrainConfig.from_dict(merge_settings(args))
        if not printing:
            _check_text(config)
        config = config.resolve()
        _check_log_is_not_config(config.log_file, getattr(args, "config", None))
    except (ConfigError, DataError) as error:
        return _fail(_describe_config_error(error))
    if printing:
        import json

        print(json.dumps(config.to_dict(), indent=2))
        return 0

    from tfnorm.training.trainer import EXIT_STATUS, train
    from tfnorm.training.workloads.user_code import UserCodeError

    try:
        summary = train(config)
    except UserCodeError as error:
        # Their code, their traceback: one line to grep, then the details.
        status = _fail(_describe_config_error(error))
        print(error.details, file=sys.stderr, end="", flush=True)
        return status
    except ConfigError as error:
        return _fail(_describe_config_error(error))
    except DataError as error:
        return _fail(_describe_config_error(error))
    try:
        print(
            f"status {summary['status']}: step {summary['final_step']}/"
            f"{summary['total_steps']}, summary in {config.logdir}/summary.json",
            flush=True,
        )
    except OSError:
        # stdout is gone (`| head`, a closed terminal); summary.json says it.
        _silence_stdout()
    return EXIT_STATUS[summary["status"]]


def _check_text(config):
    """Reads a language model's text before the settings are resolved (the
    norm's check loads TensorFlow, seconds), so an empty, non-UTF-8 or too
    short text fails at once; the run then uses the corpus read here
    (`byte_text.read_corpus` keeps it). Settings that do not read are left
    for `resolve` to report."""
    if str(config.task).strip() != LANGUAGE_MODEL_TASK or config.val_data:
        return
    fields = {field.name: field for field in dataclasses.fields(TrainConfig)}
    try:
        data, max_len, val_split = (
            setting_of(fields[key]).parse(key, getattr(config, key))
            for key in ("data", "max_len", "val_split")
        )
    except ConfigError:
        return
    if data is None:
        return
    from tfnorm.training.data import byte_text

    if val_split is None:
        val_split = DEFAULT_VAL_SPLIT
    byte_text.read_corpus(data, max_len, val_split)


def _silence_stdout():
    """Points stdout at /dev/null so Python's flush at exit cannot fail."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
