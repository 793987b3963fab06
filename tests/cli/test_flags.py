"""Every command's flags are generated from its declared settings
(`tfnorm.cli.flags`), and a bad value is one line naming the flag."""

from __future__ import annotations

import dataclasses

import pytest

from tfnorm.cli.flags import flags_of, with_flags
from tfnorm.cli.main import build_parser, main
from tfnorm.experiments.compare_settings import CompareConfig
from tfnorm.inference.generate_settings import GenerateSettings
from tfnorm.inference.predict_settings import PredictSettings
from tfnorm.settings.setting import setting_of
from tfnorm.training.config.train_config import TrainConfig

COMMANDS = {
    "train": TrainConfig,
    "compare": CompareConfig,
    "predict": PredictSettings,
    "generate": GenerateSettings,
}


def subparser(command):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    return subparsers.choices[command]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_declared_setting_is_a_flag_with_its_help(command):
    config_class = COMMANDS[command]
    actions = {a.dest: a for a in subparser(command)._actions}
    for field in dataclasses.fields(config_class):
        action = actions[field.name]
        assert tuple(action.option_strings) == flags_of(field), field.name
        help_text = with_flags(setting_of(field).help, config_class)
        assert action.help.replace("%%", "%").startswith(help_text), field.name


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["generate", "RUN", "x", "--top-k", "abc"],
         "tfnorm generate: error: --top-k must be an integer >= 1. Received: --top-k=abc\n"),
        (["generate", "RUN", "x", "--seed", "1.5"],
         "tfnorm generate: error: --seed must be an integer. Received: --seed=1.5\n"),
        (["predict", "RUN", "x", "--batch-size", "many"],
         "tfnorm predict: error: --batch-size must be a positive integer. "
         "Received: --batch-size=many\n"),
    ],
)  # fmt: skip
def test_a_value_argparse_once_refused_is_one_line_naming_the_flag(
    argv, expected, capsys
):
    # argparse's own type errors printed the usage and a second line.
    assert main(argv) == 2
    assert capsys.readouterr().err == expected
