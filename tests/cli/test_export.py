"""`tfnorm export RUN_DIR OUT --format hf`: a language-model run as a Hugging
Face checkpoint that tfnorm (and transformers, where the reference venv is)
reads back with the run's logits; one-line errors that write nothing."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from tests.checkpoints.hf_data import fixture
from tests.conftest import REPO
from tests.models.decoder.test_hf_export import HF_PYTHON, live
from tests.training.workloads.test_checkpoint_start import gpt2_checkpoint
from tests.training.workloads.test_language_model import TINY_LM, corpus_text
from tfnorm.cli.main import main
from tfnorm.training import train


def _train(directory, name, **overrides):
    config = dict(TINY_LM, data=str(directory / "corpus.txt"), max_steps=3)
    config.update(logdir=str(directory / name), export=True, **overrides)
    summary = train(config, handle_signals=False, stdout=io.StringIO())
    assert summary["status"] == "completed"
    return str(directory / name)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("export")
    (directory / "corpus.txt").write_text(corpus_text(3000), encoding="utf-8")
    return _train(directory, "run")


def tfnorm(argv, capsys):
    try:
        status = main(argv)
    except SystemExit as exit:
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _batch(vocab_size):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, vocab_size, (2, 12)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    return ids, mask


def _logits(model, ids, mask):
    return np.asarray(model([ids, mask]))[mask.astype(bool)]


def test_the_checkpoint_has_the_run_models_logits_and_generates(
    run_dir, tmp_path, capsys
):
    from tfnorm.inference.text_generation import TextGenerator
    from tfnorm.models import decoder_from_hf

    out = tmp_path / "hf"
    status, printed, err = tfnorm(["export", run_dir, str(out)], capsys)
    assert status == 0, err
    assert printed.startswith(f"wrote {out}: a llama checkpoint of ")
    names = sorted(os.listdir(out))
    assert names == [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tfnorm_tokenizer.json",
    ]
    assert json.loads((out / "config.json").read_text())["eos_token_id"] == 256
    ids, mask = _batch(257)
    run_model = TextGenerator(run_dir).model
    np.testing.assert_allclose(
        _logits(decoder_from_hf(str(out)), ids, mask),
        _logits(run_model, ids, mask),
        atol=1e-5,
    )
    # The same greedy text from the run and from its checkpoint (bytes).
    argv = ["The ", "--max-new-tokens", "6", "--temperature", "0", "--seed", "0"]
    texts = [
        tfnorm(["generate", where, *argv], capsys) for where in (run_dir, str(out))
    ]
    assert [t[0] for t in texts] == [0, 0], texts
    assert texts[0][1] == texts[1][1]


def test_a_run_without_export_writes_its_newest_checkpoint(run_dir, tmp_path, capsys):
    from tfnorm.inference.prediction import find_model
    from tfnorm.models import decoder_from_hf

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    exported = find_model(str(copy))
    (shutil.rmtree if os.path.isdir(exported) else os.remove)(exported)
    out = tmp_path / "empty"
    out.mkdir()  # an empty OUT is taken
    status, printed, err = tfnorm(["export", str(copy), str(out)], capsys)
    assert status == 0, err
    assert "ckpt-3" in printed, printed
    ids, mask = _batch(257)
    from tfnorm.inference.text_generation import TextGenerator

    np.testing.assert_allclose(
        _logits(decoder_from_hf(str(out)), ids, mask),
        _logits(TextGenerator(run_dir).model, ids, mask),
        atol=1e-5,
    )


def _not_empty(tmp_path, run_dir):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    return [run_dir, str(tmp_path / "out")]


def _file(tmp_path, run_dir):
    (tmp_path / "out").write_text("mine")
    return [run_dir, str(tmp_path / "out")]


def _checkpoint_dir(tmp_path, run_dir):
    return [fixture("gpt2"), str(tmp_path / "out" / "hf")]


def _classifier_run(tmp_path, run_dir):
    (tmp_path / "classifier").mkdir()
    (tmp_path / "classifier" / "summary.json").write_text("{}")
    return [str(tmp_path / "classifier"), str(tmp_path / "out" / "hf")]


def _bad_format(tmp_path, run_dir):
    return [run_dir, str(tmp_path / "out"), "--format", "gguf"]


BAD = [
    ("OUT not empty", _not_empty, r"out exists and is not an empty directory.*OUT="),
    ("OUT a file", _file, r"out exists and is not an empty directory"),
    ("a checkpoint, not a run", _checkpoint_dir, r"gpt2 is not the --logdir of a language-model run"),
    ("a classifier run", _classifier_run, r"classifier is not the --logdir of a language-model run"),
    ("no such run", lambda t, r: [str(t / "nope"), str(t / "out" / "hf")], r"nope"),
    ("unknown format", _bad_format, r"--format: invalid choice: 'gguf'"),
]  # fmt: skip


@pytest.mark.parametrize(
    "arguments, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    run_dir, tmp_path, capsys, arguments, expected
):
    import re

    argv = arguments(tmp_path, run_dir)
    before = sorted(os.listdir(tmp_path))
    status, printed, err = tfnorm(["export", *argv], capsys)
    assert status == 2 and err.count("\n") == 1, err
    assert err.startswith("tfnorm export: error: ") and re.search(expected, err), err
    assert printed == "" and sorted(os.listdir(tmp_path)) == before
    if (tmp_path / "out").is_dir():
        assert os.listdir(tmp_path / "out") in ([], ["keep.txt"])


def test_gpt2_with_rms_norms_trains_but_has_no_checkpoint_layout(tmp_path, capsys):
    # The seeds' question: GPT-2 with RMSNorms. It fine-tunes (the log says
    # what the swap did) and exports as a tfnorm run, but Hugging Face has
    # no such layout (GPT-2 has no RMSNorm, Llama no learned positions).
    logdir = _gpt2_run(tmp_path, "--norm", "rms")
    assert "norms are RMSNorms now" in capsys.readouterr().out
    from tfnorm.inference.prediction import find_model

    assert os.path.exists(find_model(logdir))
    status, printed, err = tfnorm(
        ["export", logdir, str(tmp_path / "a" / "hf")], capsys
    )
    assert status == 2 and err.count("\n") == 1, err
    assert "cannot be written: decoder_to_hf: Llama has no counterpart" in err, err
    assert "Received: position_embedding='learned'" in err, err
    assert not (tmp_path / "a").exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".export")] == []


def _gpt2_run(tmp_path, *extra):
    """A 2-step fine-tune of the committed tiny GPT-2 with its BPE tokenizer."""
    (tmp_path / "text.txt").write_text(corpus_text(2500), encoding="utf-8")
    logdir = str(tmp_path / "gpt2-run")
    argv = ["train", "--task", "lm", "--data", str(tmp_path / "text.txt")]
    argv += ["--init-from", gpt2_checkpoint(tmp_path), "--max-len", "16"]
    argv += ["--batch-size", "4", "--max-steps", "2", "--histogram-every", "0"]
    assert main([*argv, "--logdir", logdir, *extra]) == 0
    return logdir


def test_a_gpt2_fine_tune_is_written_as_gpt2_with_its_tokenizer(tmp_path, capsys):
    logdir = _gpt2_run(tmp_path)
    capsys.readouterr()
    out = tmp_path / "hf"
    status, printed, err = tfnorm(["export", logdir, str(out)], capsys)
    assert status == 0 and "a gpt2 checkpoint" in printed, err
    config = json.loads((out / "config.json").read_text())
    assert (config["n_positions"], config["eos_token_id"]) == (32, 2)
    written = json.loads((out / "tokenizer.json").read_text())
    assert written == json.loads(
        (tmp_path / "gpt2-run" / "tokenizer" / "tokenizer.json").read_text()
    )
    if _transformers_available():
        _assert_transformers_gives_the_runs_logits(logdir, out, 300, tmp_path)


def _transformers_available():
    return not live.args[0]


def _assert_transformers_gives_the_runs_logits(run_dir, exported, vocab_size, tmp_path):
    """transformers (the reference venv) reads `exported` and gives the logits
    tfnorm's model of `run_dir` gives, on a padded batch of random ids."""
    from tfnorm.inference.text_generation import TextGenerator

    ids, mask = _batch(vocab_size)
    np.savez(tmp_path / "in.npz", token_ids=ids, padding_mask=mask)
    subprocess.run(
        [HF_PYTHON, os.path.join(REPO, "tools", "hf_reference_logits.py")]
        + [str(exported), str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        check=True,
        capture_output=True,
    )
    with np.load(tmp_path / "out.npz") as reference:
        theirs = reference["logits"][mask.astype(bool)]
    ours = _logits(TextGenerator(run_dir).model, ids, mask)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)


@live
def test_transformers_loads_a_byte_run_with_the_same_logits(run_dir, tmp_path, capsys):
    out = tmp_path / "hf"
    assert tfnorm(["export", run_dir, str(out)], capsys)[0] == 0
    _assert_transformers_gives_the_runs_logits(run_dir, out, 257, tmp_path)
