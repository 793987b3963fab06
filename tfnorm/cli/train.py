"""`tfnorm train`: trains a Transformer classifier; a thin layer over `tfnorm.training.train`.

Settings come from `--config FILE` (YAML or JSON, keys as in `TrainConfig`)
and from flags; a flag given on the command line wins over the file.

Exit statuses: 0 finished, 2 bad flag/config/data or a checkpoint directory
in use by another run (nothing trained), 3 stopped on a NaN loss (last good
checkpoint kept), 74 failed writing an output such as a checkpoint on a full
disk (summary.json says why), 130 stopped by SIGINT and 143 stopped by SIGTERM
(both after saving a checkpoint; rerun the same command to resume). The
status-to-exit table is `tfnorm.training.run_files.EXIT_STATUS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from tfnorm.training.config import (
    DECAYS,
    MIXED_PRECISION_MODES,
    NORM_POSITIONS,
    OPTIMIZERS,
    POOLINGS,
    STRATEGIES,
    ConfigError,
    TrainConfig,
    flag_name,
    load_config_file,
)
from tfnorm.training.data import SYNTHETIC_TASKS

_DEFAULTS = {field.name: field.default for field in dataclasses.fields(TrainConfig)}

EPILOG = """\
examples:
  tfnorm train --task sorted --num-layers 2 --d-model 64 --epochs 3 --logdir runs/sorted
  tfnorm train --data train.csv --val-data val.csv --max-len 128 --logdir runs/text
  nohup tfnorm train --config run.yaml --log-file run.log &   # then: tail -f run.log

data files: CSV/TSV with a header naming `text` and `label` columns, or JSON
Lines with {"text": ..., "label": ...} objects; labels are class ids 0, 1, ...

outputs: progress lines on stdout and in --log-file; TensorBoard logs
(train/, validation/, norms/) and summary.json in --logdir; checkpoints in
--checkpoint-dir; the final model in --logdir (model.keras, or the SavedModel
directory `model` on TensorFlow 2.9). Rerunning the same command resumes from
the last checkpoint.

exit status: 0 finished; 2 bad flag, config or data, or the checkpoint
directory is in use by another run (nothing trained); 3 stopped on a NaN loss
(the last good checkpoint is kept); 74 an output could not be written, e.g. a
full disk (summary.json has the reason; rerun to resume); 130 stopped by
SIGINT, 143 stopped by SIGTERM (a checkpoint is saved first).
"""


def _int_at_least(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(
                f"expected an integer >= {minimum}. Received: {text!r}"
            )
        return value

    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _float_at_least(minimum, inclusive):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not (value >= minimum if inclusive else value > minimum) or value == float(
            "inf"
        ):
            relation = ">=" if inclusive else ">"
            raise argparse.ArgumentTypeError(
                f"expected a number {relation} {minimum:g}. Received: {text!r}"
            )
        return value

    return parse


def _optional_positive_float(text):
    if text.lower() in ("none", "off", "0"):
        return None
    return _float_at_least(0.0, inclusive=False)(text)


def _default(key):
    value = _DEFAULTS[key]
    return "none" if value is None else value


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "train",
        help="train a Transformer text classifier (resumable, logs for SSH/tmux)",
        description="Train a tfnorm Transformer classifier on a synthetic task or "
        "a text-classification file, with warm-up, AdamW (no decay on norms "
        "or biases), checkpoints that survive kill -9, and TensorBoard logs. "
        "Settings come from --config and flags; flags win.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        argument_default=argparse.SUPPRESS,
    )
    add = parser.add_argument
    add(
        "--config",
        metavar="FILE",
        help="YAML (.yaml/.yml) or JSON file of settings; keys are the flag "
        "names with _ for - (e.g. learning_rate)",
    )

    data = parser.add_argument_group("data (give --task or --data)")
    data.add_argument(
        "--task",
        choices=SYNTHETIC_TASKS,
        help="synthetic task: sorted (is the sequence sorted), duplicate (does "
        "a token occur twice), majority (most frequent token class)",
    )
    data.add_argument(
        "--data", metavar="PATH", help="training file (CSV, TSV or JSONL)"
    )
    data.add_argument(
        "--val-data", metavar="PATH", help="validation file (same formats as --data)"
    )
    data.add_argument(
        "--num-examples",
        type=_positive_int,
        help=f"synthetic training examples (default {_default('num_examples')})",
    )
    data.add_argument(
        "--vocab-size",
        type=_positive_int,
        help="synthetic: token ids (default max(16, 2*max_len+1)); files: "
        "vocabulary limit (default 20000)",
    )
    data.add_argument(
        "--num-classes",
        type=_positive_int,
        help=f"classes of --task majority (default {_default('num_classes')})",
    )
    data.add_argument(
        "--max-len",
        type=_positive_int,
        help=f"tokens per example (default {_default('max_len')})",
    )

    model = parser.add_argument_group("model")
    model.add_argument(
        "--num-layers",
        type=_positive_int,
        help=f"encoder blocks (default {_default('num_layers')})",
    )
    model.add_argument(
        "--d-model", type=_positive_int, help=f"width (default {_default('d_model')})"
    )
    model.add_argument(
        "--num-heads",
        type=_positive_int,
        help=f"attention heads, must divide --d-model (default {_default('num_heads')})",
    )
    model.add_argument(
        "--dff", type=_positive_int, help="feed-forward width (default 4 * d_model)"
    )
    model.add_argument(
        "--norm",
        help=f"normalisation: layer, rms or scale (default {_default('norm')})",
    )
    model.add_argument(
        "--norm-position",
        choices=NORM_POSITIONS,
        help=f"where the norms sit (default {_default('norm_position')})",
    )
    model.add_argument(
        "--pooling", choices=POOLINGS, help=f"(default {_default('pooling')})"
    )
    model.add_argument(
        "--dropout-rate",
        "--dropout",
        dest="dropout_rate",
        type=_float_at_least(0.0, inclusive=True),
        help=f"dropout in [0, 1) (default {_default('dropout_rate')})",
    )
    model.add_argument(
        "--epsilon",
        type=_float_at_least(0.0, inclusive=False),
        help="norm epsilon (default: the norm's own)",
    )

    optim = parser.add_argument_group("optimisation")
    optim.add_argument(
        "--optimizer", choices=OPTIMIZERS, help=f"(default {_default('optimizer')})"
    )
    optim.add_argument(
        "--learning-rate",
        type=_float_at_least(0.0, inclusive=False),
        help=f"peak learning rate (default {_default('learning_rate')})",
    )
    optim.add_argument(
        "--warmup-steps",
        type=_non_negative_int,
        help=f"linear warm-up steps, 0 for none (default {_default('warmup_steps')})",
    )
    optim.add_argument(
        "--decay",
        choices=DECAYS,
        help=f"learning-rate decay after warm-up (default {_default('decay')})",
    )
    optim.add_argument(
        "--weight-decay",
        type=_float_at_least(0.0, inclusive=True),
        help="decoupled weight decay of adamw; never applied to norms or biases "
        f"(default {_default('weight_decay')})",
    )
    optim.add_argument(
        "--clipnorm",
        type=_optional_positive_float,
        help="global gradient-norm clipping, 'none' to disable "
        f"(default {_default('clipnorm')})",
    )
    optim.add_argument(
        "--epochs", type=_positive_int, help=f"(default {_default('epochs')})"
    )
    optim.add_argument(
        "--steps-per-epoch",
        type=_positive_int,
        help="steps per epoch (default: one pass over the training set)",
    )
    optim.add_argument(
        "--batch-size",
        type=_positive_int,
        help="global batch size, split over the replicas "
        f"(default {_default('batch_size')})",
    )
    optim.add_argument(
        "--seed",
        type=_non_negative_int,
        help=f"seed of the data, weights and order (default {_default('seed')})",
    )

    runtime = parser.add_argument_group("runtime")
    runtime.add_argument(
        "--strategy",
        choices=STRATEGIES,
        help="distribution: auto picks multi_worker from a multi-worker TF_CONFIG, "
        "mirrored for 2+ GPUs, one_device for 1 GPU, else default "
        f"(default {_default('strategy')})",
    )
    runtime.add_argument(
        "--devices",
        metavar="LIST",
        help="comma-separated devices for --strategy mirrored/one_device "
        "(e.g. /gpu:0,/gpu:1)",
    )
    runtime.add_argument(
        "--mixed-precision",
        choices=MIXED_PRECISION_MODES,
        help="float16 (with loss scaling) or bfloat16 compute "
        f"(default {_default('mixed_precision')})",
    )

    outputs = parser.add_argument_group("outputs")
    outputs.add_argument(
        "--logdir",
        metavar="DIR",
        help="TensorBoard logs, summary.json and the exported model "
        f"(default {_default('logdir')})",
    )
    outputs.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="checkpoints; rerunning with the same one resumes (default LOGDIR/checkpoints)",
    )
    outputs.add_argument(
        "--checkpoint-every",
        type=_positive_int,
        help=f"steps between checkpoints, plus one at each epoch end "
        f"(default {_default('checkpoint_every')})",
    )
    outputs.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        help=f"checkpoints kept (default {_default('keep_checkpoints')})",
    )
    outputs.add_argument(
        "--log-every",
        type=_positive_int,
        help=f"steps between progress lines (default {_default('log_every')})",
    )
    outputs.add_argument(
        "--histogram-every",
        type=_non_negative_int,
        help="steps between norm histograms in LOGDIR/norms, 0 for none "
        f"(default {_default('histogram_every')})",
    )
    outputs.add_argument(
        "--log-file",
        metavar="PATH",
        help="also append the progress lines to this file (line-buffered)",
    )
    outputs.add_argument(
        "--no-export",
        dest="export",
        action="store_false",
        help="do not export the final model (checkpoints and logs only)",
    )
    outputs.add_argument(
        "--print-config",
        action="store_true",
        help="print the merged settings as JSON and exit without training",
    )
    parser.set_defaults(func=run)


def merge_settings(args):
    """The config file's settings overridden by the flags given on the command line."""
    given = dict(vars(args))
    given.pop("func", None)
    given.pop("command", None)
    given.pop("print_config", None)
    config_path = given.pop("config", None)
    settings = load_config_file(config_path) if config_path else {}
    settings = {str(key).replace("-", "_"): value for key, value in settings.items()}
    settings.update(given)
    return settings


def _fail(message):
    print(f"tfnorm train: error: {message}", file=sys.stderr)
    return 2


def _describe_config_error(error):
    if error.key in (None, "config"):
        return str(error)
    return f"{flag_name(error.key)} (config key {error.key}): {error}"


def run(args):
    try:
        settings = merge_settings(args)
        config = TrainConfig.from_dict(settings).validate()
    except ConfigError as error:
        return _fail(_describe_config_error(error))
    if getattr(args, "print_config", False):
        import json

        print(json.dumps(config.to_dict(), indent=2))
        return 0

    from tfnorm.training.data import DataError
    from tfnorm.training.trainer import EXIT_STATUS, train

    try:
        summary = train(config)
    except ConfigError as error:
        return _fail(_describe_config_error(error))
    except DataError as error:
        return _fail(str(error))
    print(
        f"status {summary['status']}: step {summary['final_step']}/"
        f"{summary['total_steps']}, summary in {config.logdir}/summary.json",
        flush=True,
    )
    return EXIT_STATUS[summary["status"]]
