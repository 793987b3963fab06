"""`tfnorm generate` on run directories that were copied, moved, replaced or
edited: it reads the run's own checkpoints, or refuses in one line.

A run without an export is rebuilt from its `language_model.json` and
restored from its newest checkpoint. The promise for each row: the text is
the one the run's own weights give, or exit status 2 with exactly one stderr
line naming the file, no traceback, and nothing written into the run.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import time

import pytest

from tests.training.workloads.test_language_model import TINY_LM, corpus_text
from tfnorm.cli.main import main
from tfnorm.inference.text_generation import TextGenerator
from tfnorm.training import train

GREEDY = ["The ", "--temperature", "0", "--max-new-tokens", "8"]


def train_tiny(corpus, logdir, **overrides):
    config = dict(
        TINY_LM,
        data=corpus,
        logdir=logdir,
        epochs=1,
        steps_per_epoch=2,
        checkpoint_every=2,
        **overrides,
    )
    summary = train(config, handle_signals=False, stdout=io.StringIO())
    assert summary["status"] == "completed", summary


def generate(argv, capsys):
    capsys.readouterr()
    try:
        status = main(["generate", *argv])
    except SystemExit as exit:
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One tiny run (no export) at `original`, copied twice, then deleted; the
    greedy text its weights gave before."""
    base = tmp_path_factory.mktemp("generate_bad_input")
    corpus = str(base / "corpus.txt")
    (base / "corpus.txt").write_text(corpus_text(3000), encoding="utf-8")
    original = base / "original"
    train_tiny(corpus, str(original))
    text = TextGenerator(original).complete("The ", 8, temperature=0)
    for name in ("copy_a", "copy_b", "pristine"):
        shutil.copytree(original, base / name)
    shutil.rmtree(original)
    return {"base": base, "corpus": corpus, "original": original, "text": text}


def greedy_text(run_dir, capsys):
    status, out, err = generate([str(run_dir), *GREEDY], capsys)
    assert status == 0, err
    return out


def snapshot(directory):
    return {
        os.path.join(root, name): os.stat(os.path.join(root, name)).st_mtime_ns
        for root, _, names in os.walk(directory)
        for name in names
    }


def test_a_copy_whose_original_is_deleted_reads_its_own_checkpoints(runs, capsys):
    assert greedy_text(runs["base"] / "copy_a", capsys) == runs["text"] + "\n"


def test_a_copy_never_reads_the_run_now_in_the_originals_place(runs, capsys):
    train_tiny(runs["corpus"], str(runs["original"]), preset="gpt2")
    assert greedy_text(runs["base"] / "copy_b", capsys) == runs["text"] + "\n"


def edit_recipe(run_dir, key, value, keep_digest=True):
    path = run_dir / "language_model.json"
    recipe = json.loads(path.read_text())
    recipe["build_decoder"][key] = value
    path.write_text(json.dumps(recipe))
    if not keep_digest:  # a run of an earlier release: no digest to compare
        config = run_dir / "checkpoints" / "run_config.json"
        saved = json.loads(config.read_text())
        saved["run_identity"].pop("decoder_sha256")
        config.write_text(json.dumps(saved))


EDITS = [
    ("preset", "gpt2"),
    ("norm", "layer"),
    ("tie_embeddings", True),
    ("final_norm", False),
    ("epsilon", 1e-3),
]


def refused(run_dir, capsys, expected):
    before = snapshot(run_dir)
    status, out, err = generate([str(run_dir), *GREEDY], capsys)
    assert status == 2 and out == "", err
    assert err.startswith("tfnorm generate: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and re.search(expected, err), err
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("key, value", EDITS, ids=[key for key, _ in EDITS])
def test_an_edited_recipe_is_refused_naming_it(runs, tmp_path, capsys, key, value):
    run_dir = tmp_path / "edited"
    shutil.copytree(runs["base"] / "pristine", run_dir)
    edit_recipe(run_dir, key, value)
    refused(run_dir, capsys, r"language_model\.json is not the recipe the checkpoints")


# Without the digest (runs of earlier releases), the restore itself must
# refuse weights that do not fit: each of these changes the variables.
WEIGHT_EDITS = EDITS[:4]


@pytest.mark.parametrize("key, value", WEIGHT_EDITS, ids=[k for k, _ in WEIGHT_EDITS])
def test_an_edited_recipe_without_a_digest_is_refused_by_the_restore(
    runs, tmp_path, capsys, key, value
):
    run_dir = tmp_path / "edited"
    shutil.copytree(runs["base"] / "pristine", run_dir)
    edit_recipe(run_dir, key, value, keep_digest=False)
    refused(run_dir, capsys, r"ckpt-2 does not hold the model .*language_model\.json")


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("num_layers", 10_000_000, r"`num_layers` must be at most 1024"),
        ("d_model", 2**20, r"`d_model` must be at most 65536"),
        ("vocab_size", 2**30, r"`vocab_size` must be at most 16777216"),
    ],
)
def test_absurd_sizes_in_a_recipe_are_refused_before_building(
    runs, tmp_path, capsys, key, value, expected
):
    run_dir = tmp_path / "absurd"
    shutil.copytree(runs["base"] / "pristine", run_dir)
    edit_recipe(run_dir, key, value)
    started = time.monotonic()
    refused(run_dir, capsys, r"language_model\.json: " + expected)
    assert time.monotonic() - started < 10


def test_absurd_num_layers_flag_is_refused_before_building(tmp_path, capsys):
    (tmp_path / "corpus.txt").write_text(corpus_text(3000), encoding="utf-8")
    status = main(
        ["train", "--task", "lm", "--data", str(tmp_path / "corpus.txt"),
         "--num-layers", "10000000", "--logdir", str(tmp_path / "run")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert re.search(r"--num-layers .*1024.*10000000", err), err
    assert not (tmp_path / "run").exists()


def test_deleted_checkpoints_beside_their_state_file_give_one_line(
    runs, tmp_path, capsys, caplog
):
    # `tf.train.latest_checkpoint` logged "ERROR:tensorflow:Couldn't match
    # files for checkpoint" (a Python log record, on stderr before tfnorm's
    # line), and tfnorm's line said "no checkpoint yet".
    run_dir = tmp_path / "deleted"
    shutil.copytree(runs["base"] / "pristine", run_dir)
    for path in (run_dir / "checkpoints").glob("ckpt-*"):
        path.unlink()
    caplog.clear()
    refused(run_dir, capsys, r"its state file names ckpt-2, whose files are gone")
    assert [r.getMessage() for r in caplog.records if r.name == "tensorflow"] == []
