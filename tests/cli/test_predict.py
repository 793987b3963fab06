"""`tfnorm predict`: output lines, --json, --file, one-line errors, a light --help."""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.inference.test_prediction import run_config
from tfnorm import _keras
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
        # The library names the run's settings by key; the command line by flag.
        (["NOWHERE", "text"], r"NOWHERE: no such run directory \(give the --logdir "),
        (["EMPTY", "text"], r"EMPTY: no exported model .*is it the --logdir of a"),
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


# ------------------------------------------------- damaged and foreign run files


@pytest.fixture(scope="module")
def other_run_dir(tmp_path_factory):
    """A run on other texts: its model and vocabulary are not `run_dir`'s."""
    directory = tmp_path_factory.mktemp("predict_other")
    data = directory / "other.csv"
    rows = [f"a {w} song,{w}" for w in ("loud", "quiet", "sweet")] * 10
    data.write_text("text,label\n" + "\n".join(rows) + "\n")
    summary = train(run_config(directory, data=str(data)), stdout=io.StringIO())
    assert summary["status"] == "completed"
    return str(directory / "run")


@pytest.fixture(scope="module")
def own_run_dir(tmp_path_factory):
    from tests.training import user_module

    directory = tmp_path_factory.mktemp("predict_own")
    config = dict(logdir=str(directory / "run"), epochs=1, batch_size=32)
    config.update(
        histogram_every=0, steps_per_epoch=2, loss="sparse_categorical_crossentropy"
    )
    config.update(from_logits=True)
    summary = train(
        config,
        stdout=io.StringIO(),
        model_fn=user_module.functional_model,
        data_fn=user_module.array_data,
    )
    assert summary["status"] == "completed"
    return config["logdir"]


def export_of(run):
    """The exported model's file or SavedModel directory in `run`."""
    return next(
        run / name for name in ("model.keras", "model") if os.path.exists(run / name)
    )


def model_file(run):
    """The file holding the exported model (a SavedModel's saved_model.pb)."""
    path = export_of(run)
    return path / "saved_model.pb" if path.is_dir() else path


def truncate(run, other):
    path = model_file(run)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def as_directory(run, other):
    path = export_of(run)
    shutil.rmtree(path) if path.is_dir() else path.unlink()
    (run / "model.keras").mkdir()
    (run / "model.keras" / "model.keras").write_bytes(b"")


def others(name):
    def replace(run, other):
        target = export_of(run) if name == "model" else run / name
        source = export_of(other) if name == "model" else other / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()
        copy = shutil.copytree if source.is_dir() else shutil.copyfile
        copy(source, target)

    return replace


def vocabulary(text):
    return lambda run, other: (run / "vocabulary.json").write_text(text)


# A `.keras` archive cut short is recognised as such; a SavedModel (TF 2.9)
# whose saved_model.pb is cut short fails to load.
TRUNCATED = (
    r"is not a whole Keras archive"
    if _keras.NATIVE_FORMAT == "keras"
    else r"(the model cannot be loaded|is not the file this run exported)"
)

# (name, what is done to a copy of the run, what the one line says)
RUN_FAULT_CASES = [
    ("empty model", lambda run, other: model_file(run).write_bytes(b""), r"is empty or missing: the export was cut short"),
    ("truncated model", truncate, TRUNCATED),
    ("model.keras a directory", as_directory, r"model\.keras is a directory, not a model file"),
    ("another run's model", others("model"), r"is not the file this run exported with its model .*another run"),
    ("another run's vocabulary", others("vocabulary.json"), r"vocabulary\.json is not the file this run exported"),
    ("another run's labels", others("labels.json"), r"labels\.json is not the file this run exported"),
    ("vocabulary []", vocabulary("[]"), r"vocabulary\.json cannot be read: it holds no tokens"),
    ("vocabulary repeats a token", vocabulary('["the", "film", "the"]'), r"token 2 'the' repeats token 0"),
    ("vocabulary has an empty token", vocabulary('["the", ""]'), r"token 1 is '', which no saved vocabulary"),
    ("vocabulary has [UNK]", vocabulary('["[UNK]", "the"]'), r"token 0 is '\[UNK\]'"),
]  # fmt: skip


@pytest.mark.parametrize(
    "damage, expected", [pytest.param(d, e, id=n) for n, d, e in RUN_FAULT_CASES]
)
def test_a_damaged_or_foreign_run_file_is_one_line_exit_2(
    run_dir, other_run_dir, tmp_path, capsys, damage, expected
):
    copy = shutil.copytree(run_dir, tmp_path / "copy")
    damage(copy, pathlib.Path(other_run_dir))
    status, out, err = predict([str(copy), "the film was great"], capsys)
    assert_one_line(status, 2, out, err, expected)


def test_an_own_model_run_says_how_to_load_its_export(own_run_dir, capsys):
    status, out, err = predict([own_run_dir, "some text"], capsys)
    # The keras.io block it holds is not registered: the export is its weights.
    exported = json.loads(open(os.path.join(own_run_dir, "summary.json")).read())
    load = exported["export"]["load"]
    expected = r"is a run of your own model \(--model-fn .*functional_model\)"
    expected += r".* load its export in Python: " + re.escape(load) + "$"
    assert_one_line(status, 2, out, err, expected)


def test_dev_zero_as_file_is_read_with_a_bound(run_dir, capsys):
    status, out, err = predict([run_dir, "--file", "/dev/zero"], capsys)
    assert_one_line(status, 2, out, err, r"--file /dev/zero: more than 32 MiB")


def assert_one_line(status, expected_status, out, err, expected):
    assert status == expected_status and out == "", (status, err)
    assert err.startswith("tfnorm predict: error: ") and err.count("\n") == 1, err
    assert re.search(expected, err), err


# ----------------------------------------------------- an output that fails


def start_predict(run_dir, texts_file, **popen):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as in a shell: the command quiets TF
    argv = [sys.executable, "-m", "tfnorm", "predict", run_dir, "--file", texts_file]
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True, **popen)


def closed_pipe(run_dir, texts):
    process = start_predict(run_dir, texts, stdout=subprocess.PIPE)
    assert process.stdout.readline()  # `| head -1`
    process.stdout.close()
    return process


def full_disk(run_dir, texts):
    with open("/dev/full", "w") as full:
        return start_predict(run_dir, texts, stdout=full)


def closed_stdout(run_dir, texts):
    return start_predict(
        run_dir, texts, stdout=subprocess.DEVNULL, preexec_fn=lambda: os.close(1)
    )


OUTPUT_FAULT_CASES = [
    ("closed pipe", closed_pipe, r"stdout stopped taking output \(Broken pipe\); stopped after \d+ of 3000 predictions"),
    ("/dev/full", full_disk, r"stdout stopped taking output \(No space left on device\)"),
    ("closed stdout", closed_stdout, r"stdout is closed; nothing was classified"),
]  # fmt: skip


@pytest.mark.parametrize(
    "start, expected", [pytest.param(s, e, id=n) for n, s, e in OUTPUT_FAULT_CASES]
)
def test_an_output_that_fails_is_one_line_exit_74(run_dir, tmp_path, start, expected):
    texts = tmp_path / "texts.txt"
    texts.write_text("the film was great\n" * 3000)
    process = start(run_dir, str(texts))
    err = process.stderr.read()
    status = process.wait(timeout=300)
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 74 and len(lines) == 1, err
    assert lines[0].startswith("tfnorm predict: error: "), err
    assert re.search(expected, lines[0]), err
