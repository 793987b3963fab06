"""`tfnorm train --task lm --init-from DIR`: a Hugging Face checkpoint's
weights and tokenizer as the start of a run (the committed tiny GPT-2 with
the committed BPE, both of 300 ids)."""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

from tests.checkpoints.hf_data import fixture
from tests.training.workloads.test_language_model import corpus_text
from tfnorm.cli.main import main


def gpt2_checkpoint(tmp_path, with_tokenizer=True, edit=None):
    target = tmp_path / "gpt2"
    shutil.copytree(fixture("gpt2"), target)
    if with_tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(fixture("tokenizer"), name), target / name)
    if edit is not None:
        config = json.loads((target / "config.json").read_text())
        edit(config)
        (target / "config.json").write_text(json.dumps(config))
    return str(target)


def _text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(corpus_text(2500), encoding="utf-8")
    return str(path)


def _train(argv):
    try:
        return main(["train", *argv, "--histogram-every", "0"])
    except SystemExit as exit:
        return exit.code


def test_a_gpt2_checkpoint_fine_tunes_exports_and_generates(tmp_path, capsys):
    from tfnorm.checkpoints import SafetensorsReader

    checkpoint, logdir = gpt2_checkpoint(tmp_path), tmp_path / "run"
    argv = ["--task", "lm", "--data", _text(tmp_path), "--init-from", checkpoint]
    argv += ["--max-len", "16", "--batch-size", "4", "--steps-per-epoch", "2"]
    argv += ["--val-split", "0.2", "--norm", "rms", "--logdir", str(logdir)]
    assert _train(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert len(re.findall(r"norms are RMSNorms now", out)) == 1, out
    summary = json.loads((logdir / "summary.json").read_text())
    assert summary["status"] == "completed"
    metrics = summary["final_metrics"] if "final_metrics" in summary else summary
    assert "val_bits_per_byte" in json.dumps(metrics)
    recipe = json.loads((logdir / "language_model.json").read_text())
    assert recipe["tokenizer"] == "tokenizer" and recipe["end_of_text"] == 2
    assert recipe["build_decoder"]["norm"] == "rms"
    assert (logdir / "tokenizer" / "tokenizer.json").is_file()
    from tfnorm.inference.prediction import find_model

    assert os.path.exists(find_model(str(logdir)))  # model.keras, or TF 2.9's

    from tfnorm.inference.text_generation import TextGenerator

    generator = TextGenerator(str(logdir))
    # The run started from the checkpoint: its first block's RMSNorm scale
    # is the checkpoint's LayerNorm gamma after two small steps.
    gamma = generator.model.blocks[0].attention_norm.gamma.numpy()
    start = SafetensorsReader(checkpoint).get("transformer.h.0.ln_1.weight")
    assert np.abs(gamma - start).max() < 0.05
    text = generator.complete("the quick", 3, temperature=0)
    assert text.startswith("the quick") and generator.tokenizer is not None


def _bad(edit=None, *extra, tokenizer=True, task=True):
    def arguments(tmp_path):
        argv = ["--task", "lm", "--data", _text(tmp_path)] if task else []
        argv += ["--task", "sorted"] if not task else []
        argv += ["--logdir", str(tmp_path / "run")]
        where = gpt2_checkpoint(tmp_path, tokenizer, edit)
        return argv + ["--init-from", where, *extra]

    return arguments


def _a_run(tmp_path):
    """A directory that reads as a tfnorm run (its recipe; no weights)."""
    run = tmp_path / "earlier"
    run.mkdir()
    recipe = {"tokenizer": "bytes", "end_of_text": 256, "checkpoint_dir": "c"}
    recipe["build_decoder"] = {"num_layers": 1, "d_model": 16, "num_heads": 2}
    recipe["build_decoder"].update(dff=32, vocab_size=257, max_len=16)
    (run / "language_model.json").write_text(json.dumps(recipe))
    return str(run)


def _init_from(path):
    def arguments(tmp_path):
        argv = ["--task", "lm", "--data", _text(tmp_path)]
        return argv + ["--logdir", str(tmp_path / "run"), "--init-from", path(tmp_path)]

    return arguments


BAD = [
    ("no such dir", _init_from(lambda t: str(t / "nope")), r"--init-from\b.*no such directory.*init_from="),
    ("no config", _init_from(lambda t: str(t)), r"--init-from\b.*no config\.json"),
    ("run and --norm", lambda t: _init_from(lambda t: _a_run(t))(t) + ["--norm", "rms"], r"--norm\b.*keeps its own norms"),
    ("bert", _init_from(lambda t: fixture("bert")), r"--init-from\b.*bert encoder"),
    ("t5", _bad(lambda c: c.update(model_type="t5")), r"--init-from\b.*model_type='t5'"),
    ("not lm", _bad(task=False), r"--init-from\b.*--task lm only"),
    ("d_model too", _bad(None, "--d-model", "32"), r"--d-model .*comes from the checkpoint.*d_model=32"),
    ("no tokenizer", _bad(tokenizer=False), r"--init-from\b.*no tokenizer there"),
    ("context past positions", _bad(None, "--max-len", "64"), r"--init-from\b.*max_len=64 exceeds .*n_positions=32$"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arguments, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_init_from_is_one_line_exit_2_and_writes_nothing(
    tmp_path, capsys, arguments, expected
):
    argv = arguments(tmp_path)
    capsys.readouterr()
    status = _train(argv)
    error = capsys.readouterr().err
    assert status == 2 and error.count("\n") == 1, error
    assert error.startswith("tfnorm train: error: "), error
    assert re.search(expected, error), error
    assert not (tmp_path / "run").exists()


SMALL = ["--max-len", "16", "--num-layers", "1", "--d-model", "16"]
SMALL += ["--num-heads", "2", "--batch-size", "4", "--steps-per-epoch", "2"]


def test_a_bpe_is_fitted_saved_checked_on_resume_and_bits_stay_per_byte(
    tmp_path, capsys
):
    import math

    logdir = tmp_path / "run"
    argv = ["--task", "lm", "--data", _text(tmp_path), "--tokenizer", "bpe:300"]
    argv += [*SMALL, "--val-split", "0.2", "--logdir", str(logdir)]
    assert _train(argv) == 0, capsys.readouterr().err
    summary = json.loads((logdir / "summary.json").read_text())
    data, metrics = summary["data"], summary["metrics"]
    assert data["vocab_size"] == 300 and data["val_bytes"] > data["val_tokens"]
    per_token = metrics["val_loss"] * (data["val_tokens"] - 1)
    expected = per_token / data["val_bytes"] / math.log(2)
    assert abs(metrics["val_bits_per_byte"] - expected) < 1e-6 * expected
    saved = logdir / "tokenizer" / "tokenizer.json"
    assert saved.is_file()
    # A tfnorm run is a start too: its weights and its tokenizer.
    follow = ["--task", "lm", "--data", _text(tmp_path), "--init-from", str(logdir)]
    follow += ["--max-len", "16", "--batch-size", "4", "--steps-per-epoch", "1"]
    follow += ["--no-export", "--logdir", str(tmp_path / "next")]
    capsys.readouterr()
    assert _train(follow) == 0, capsys.readouterr().err
    assert f"starting from the weights of {logdir}" in capsys.readouterr().out
    again = tmp_path / "next" / "tokenizer" / "tokenizer.json"
    assert json.loads(again.read_text()) == json.loads(saved.read_text())
    # A saved tokenizer edited between runs no longer gives the trained ids.
    definition = json.loads(saved.read_text())
    vocab = definition["model"]["vocab"]
    first, second = sorted(vocab)[:2]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    saved.write_text(json.dumps(definition))
    capsys.readouterr()
    assert _train([*argv, "--epochs", "2"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "another tokenizer" in error, error


def test_a_tokenizer_json_path_trains(tmp_path, capsys):
    logdir = tmp_path / "run"
    path = os.path.join(fixture("tokenizer"), "tokenizer.json")
    argv = ["--task", "lm", "--data", _text(tmp_path), "--tokenizer", path]
    argv += [*SMALL, "--logdir", str(logdir), "--no-export"]
    assert _train(argv) == 0, capsys.readouterr().err
    recipe = json.loads((logdir / "language_model.json").read_text())
    assert recipe["build_decoder"]["vocab_size"] == 300


def _tokenizer(value, *extra, task="lm"):
    def arguments(tmp_path):
        argv = ["--task", task, "--logdir", str(tmp_path / "run")]
        if task == "lm":
            argv += ["--data", _text(tmp_path)]
        return argv + ["--tokenizer", value(tmp_path), *extra]

    return arguments


def _no_eos(tmp_path):
    shutil.copy(os.path.join(fixture("tokenizer"), "tokenizer.json"), tmp_path)
    return str(tmp_path / "tokenizer.json")


BAD_TOKENIZERS = [
    ("bpe too small", _tokenizer(lambda t: "bpe:12"), r"--tokenizer\b.*bpe:N needs .*tokenizer='bpe:12'"),
    ("bpe not a number", _tokenizer(lambda t: "bpe:x"), r"--tokenizer\b.*tokenizer='bpe:x'"),
    ("no such file", _tokenizer(lambda t: str(t / "nope.json")), r"--tokenizer\b.*no such file.*nope\.json"),
    ("no eos", _tokenizer(_no_eos), r"--tokenizer\b.*no end-of-text id.*tokenizer="),
    ("not lm", _tokenizer(lambda t: "bpe:300", task="sorted"), r"--tokenizer\b.*--task lm only"),
    ("with init_from", lambda t: _bad()(t) + ["--tokenizer", "bpe:300"], r"--tokenizer\b.*comes from the checkpoint"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arguments, expected",
    [b[1:] for b in BAD_TOKENIZERS],
    ids=[b[0] for b in BAD_TOKENIZERS],
)
def test_bad_tokenizer_is_one_line_exit_2_and_writes_nothing(
    tmp_path, capsys, arguments, expected
):
    test_bad_init_from_is_one_line_exit_2_and_writes_nothing(
        tmp_path, capsys, arguments, expected
    )


class _Log:
    def __init__(self):
        self.lines = []

    def line(self, text):
        self.lines.append(text)


def _dropout_rates(model):
    block = model.blocks[0]
    return (
        model.get_layer("embedding_dropout").rate,
        block.dropout_rate,
        block.attention_dropout_layer.rate,
    )


def test_the_runs_dropout_rate_replaces_the_checkpoints(tmp_path):
    from tfnorm.training.config.train_config import TrainConfig
    from tfnorm.training.workloads import checkpoint_start

    settings = dict(task="lm", data=_text(tmp_path), max_len=16)
    config = TrainConfig(**settings, init_from=fixture("gpt2"), dropout_rate=0.3)
    config = config.resolve()
    # The checkpoint says 0.1 (resid_pdrop, attn_pdrop); the run says 0.3,
    # and its recipe (what `tfnorm generate` and a resume rebuild) too.
    model = checkpoint_start.starting_model(config, _Log())
    assert _dropout_rates(model) == pytest.approx((0.3, 0.3, 0.3))
    assert checkpoint_start.start_arguments(config)["dropout_rate"] == 0.3
    # A tfnorm run as the start: its recipe's rate is replaced the same way.
    run = TrainConfig(**settings, init_from=_a_run(tmp_path), dropout_rate=0.0)
    arguments = checkpoint_start.start_arguments(run.resolve())
    assert arguments["dropout_rate"] == 0.0 and "attention_dropout" not in arguments


def test_without_a_dropout_rate_a_checkpoint_keeps_its_own(tmp_path):
    from tfnorm.training.config.train_config import TrainConfig
    from tfnorm.training.workloads import checkpoint_start

    settings = dict(task="lm", data=_text(tmp_path), max_len=16)
    # Llama's config has no dropout (0), GPT-2's says 0.1: a fine-tune that
    # names no rate trains with the checkpoint's, as its library would.
    llama = TrainConfig(**settings, init_from=fixture("llama_gqa_llama3")).resolve()
    assert llama.dropout_rate is None
    model = checkpoint_start.starting_model(llama, _Log())
    assert _dropout_rates(model) == pytest.approx((0.0, 0.0, 0.0))
    gpt2 = TrainConfig(**settings, init_from=fixture("gpt2")).resolve()
    model = checkpoint_start.starting_model(gpt2, _Log())
    assert _dropout_rates(model) == pytest.approx((0.1, 0.1, 0.1))
    # A tfnorm run as the start keeps its recipe's rate; its own models'
    # default stays 0.1.
    run = TrainConfig(**settings, init_from=_a_run(tmp_path)).resolve()
    recipe = checkpoint_start._run_recipe(run)["build_decoder"]
    assert checkpoint_start.start_arguments(run) == recipe
    assert TrainConfig(**settings).resolve().dropout_rate == 0.1
