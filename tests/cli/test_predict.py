"""`tfnorm predict`: output lines, --json, --file, one-line errors, a light --help."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.training.test_prediction import run_config
from tfnorm.cli.main import main
from tfnorm.training import train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("predict_cli")
    summary = train(run_config(directory), stdout=io.StringIO())
    assert summary["status"] == "completed"
    return str(directory / "run")


def predict(argv, capsys):
    try:
        status = main(["predict", *argv])
    except SystemExit as exit:
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_one_tab_separated_line_per_text(run_dir, capsys):
    status, out, err = predict([run_dir, "the film was great", "so  so\tfilm"], capsys)
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 2
    label, probability, shown, text = lines[1].split("\t")
    assert text == "so so film"
    names = [item.split("=")[0] for item in shown.split(" ")]
    assert names == ["meh", "neg", "pos"] and label in names
    assert f"{label}={probability}" in shown


def test_json_and_file_and_texts_after_options(run_dir, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("awful film\n\n  \nthe film was great\n", encoding="utf-8")
    status, out, err = predict(
        [run_dir, "--json", "first", "--file", str(texts)], capsys
    )
    assert status == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in results] == ["first", "awful film", "the film was great"]
    assert set(results[0]["probabilities"]) == {"meh", "neg", "pos"}


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["RUN", "--file", "missing.txt"], r"--file missing\.txt: cannot be read"),
        (["RUN", "--file", "latin1.txt"], r"--file latin1\.txt, line 2: not UTF-8"),
        (["RUN"], r"no texts to classify"),
        (["NOWHERE", "text"], r"NOWHERE: no such run directory"),
        (["EMPTY", "text"], r"EMPTY: no exported model"),
    ],
)
def test_errors_are_one_line_exit_2(run_dir, tmp_path, capsys, argv, expected):
    os.chdir(tmp_path)
    (tmp_path / "latin1.txt").write_bytes(b"fine\ncaf\xe9\n")
    (tmp_path / "EMPTY").mkdir()
    argv = [run_dir if word == "RUN" else word for word in argv]
    status, out, err = predict(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith("tfnorm predict: error: ") and err.count("\n") == 1, err
    assert __import__("re").search(expected, err), err


def test_unknown_options_are_still_errors(run_dir, capsys):
    status, _, err = predict([run_dir, "text", "--jsn"], capsys)
    assert status == 2 and "unrecognized arguments: --jsn" in err


PROBE = """
import atexit, sys
atexit.register(lambda: print("tensorflow imported:", "tensorflow" in sys.modules))
from tfnorm.cli.main import main
sys.exit(main())
"""


def test_help_and_a_bad_file_answer_without_importing_tensorflow(tmp_path):
    script = tmp_path / "tfnorm"
    script.write_text(PROBE)
    env = dict(
        os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    for argv, status in (
        (["predict", "--help"], 0),
        (["predict", "r", "--file", "x"], 2),
    ):
        result = subprocess.run(
            [sys.executable, str(script), *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(tmp_path),
            timeout=120,
        )
        assert result.returncode == status, result.stderr
        assert "tensorflow imported: False" in result.stdout
    assert "tfnorm predict runs/reviews" in subprocess.run(
        [sys.executable, str(script), "predict", "--help"],
        capture_output=True, text=True, env=env, timeout=120,
    ).stdout  # fmt: skip
