"""The checks of `model_checks` on the model a run builds; here, a start
from a checkpoint (`init_from`): the settings its config.json and weights
fix are refused by flag, never silently ignored."""

from __future__ import annotations

import re

import pytest

from tests.checkpoints.hf_data import fixture
from tfnorm.cli.main import main
from tfnorm.training.config.model_checks import CHECKPOINT_FIXED, CHECKPOINT_SHAPED

FIXED_BY_THE_CHECKPOINT = [
    ("--feed-forward", "relu", "feed_forward='relu'"),
    ("--bias", "false", "bias=False"),
    ("--init-std", "0.02", "init_std=0.02"),
    ("--epsilon", "1e-06", "epsilon=1e-06"),
    ("--norm-position", "post", "norm_position='post'"),
    ("--d-model", "32", "d_model=32"),
]


@pytest.mark.parametrize("flag, value, received", FIXED_BY_THE_CHECKPOINT)
def test_a_setting_the_checkpoint_fixes_is_refused_naming_its_flag(
    tmp_path, capsys, flag, value, received
):
    text = tmp_path / "text.txt"
    text.write_text("some text to train on. " * 20, encoding="utf-8")
    argv = ["train", "--task", "lm", "--data", str(text), "--init-from"]
    argv += [fixture("gpt2"), flag, value, "--logdir", str(tmp_path / "run")]
    try:
        status = main([*argv, "--print-config"])
    except SystemExit as exit:
        status = exit.code
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert re.search(
        rf"^tfnorm train: error: {flag} .*comes from the checkpoint's "
        rf"config\.json with .*--init-from.*; leave it out\. "
        rf"Received: {re.escape(received)}$",
        err.strip(),
    ), err
    assert not (tmp_path / "run").exists()


def test_every_model_setting_is_either_fixed_by_the_checkpoint_or_applied():
    import dataclasses

    from tfnorm.settings.setting import setting_of
    from tfnorm.training.config.train_config import TrainConfig
    from tfnorm.training.config.train_defaults import MODEL

    model_settings = {
        field.name
        for field in dataclasses.fields(TrainConfig)
        if setting_of(field).group == MODEL
    }
    # Applied to the checkpoint's model: the norms swapped in, the dropout;
    # `init_from` itself; `pooling` is the classifier's (refused with lm).
    applied = {"norm", "dropout_rate", "init_from", "pooling"}
    assert model_settings - applied == set(CHECKPOINT_SHAPED + CHECKPOINT_FIXED)
