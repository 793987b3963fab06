"""`tfnorm generate`: text from a language-model run, deterministic per seed;
one-line errors for what cannot be used."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.cli.test_train import HELP_PROBE, environment
from tests.conftest import REPO
from tests.training.workloads.test_language_model import TINY_LM, corpus_text
from tfnorm.cli.main import main
from tfnorm.training import train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("generate")
    (directory / "corpus.txt").write_text(corpus_text(), encoding="utf-8")
    config = dict(
        TINY_LM,
        data=str(directory / "corpus.txt"),
        logdir=str(directory / "run"),
        epochs=1,
        steps_per_epoch=20,
        max_len=32,
        export=True,
    )
    summary = train(config, handle_signals=False, stdout=io.StringIO())
    assert summary["status"] == "completed"
    return str(directory / "run")


def generate(argv, capsys):
    try:
        status = main(["generate", *argv])
    except SystemExit as exit:
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_same_seed_gives_the_same_text(run_dir, capsys):
    argv = [run_dir, "The ", "--max-new-tokens", "20", "--json"]
    outputs = [generate([*argv, "--seed", seed], capsys) for seed in "112"]
    assert all(status == 0 for status, _, _ in outputs), outputs
    first, again, other = (json.loads(out) for _, out, _ in outputs)
    assert first == again and first["prompt"] == "The " and first["seed"] == 1
    assert len(first["text"].encode("utf-8", "surrogatepass")) > 0
    assert other["text"] != first["text"]


def test_prompts_after_options_and_a_file_each_get_a_text(run_dir, tmp_path, capsys):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("A two-line\nprompt: ", encoding="utf-8")
    status, out, err = generate(
        [run_dir, "--json", "--seed", "3", "--max-new-tokens", "5", "One",
         "--file", str(prompt), "--temperature", "0"],
        capsys,
    )  # fmt: skip
    assert status == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["prompt"] for r in results] == ["One", "A two-line\nprompt: "]


def test_greedy_and_top_k_and_top_p_run(run_dir, capsys):
    for extra in (["--temperature", "0"], ["--top-k", "5"], ["--top-p", "0.5"]):
        status, out, err = generate(
            [run_dir, "x", "--seed", "0", "--max-new-tokens", "4", *extra], capsys
        )
        assert status == 0 and out.startswith("x"), (extra, err)


def test_a_run_still_training_samples_from_its_newest_checkpoint(
    run_dir, tmp_path, capsys
):
    argv = ["The ", "--seed", "5", "--max-new-tokens", "12"]
    _, from_export, _ = generate([run_dir, *argv], capsys)
    running = tmp_path / "running"
    shutil.copytree(run_dir, running)
    remove_export(running)
    os.remove(running / "summary.json")
    status, from_checkpoint, err = generate([str(running), *argv], capsys)
    assert status == 0, err
    # The final checkpoint holds the exported weights.
    assert from_checkpoint == from_export


def export_path(run_dir):
    """The export: model.keras, or the SavedModel directory `model` (TF 2.9)."""
    with open(os.path.join(run_dir, "summary.json")) as handle:
        return os.path.basename(json.load(handle)["model_path"])


def remove_export(run_dir):
    path = os.path.join(run_dir, export_path(run_dir))
    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def not_a_language_model(tmp_path, run_dir):
    status = main(
        ["train", "--task", "sorted", "--num-examples", "32", "--max-len", "4",
         "--num-layers", "1", "--d-model", "8", "--num-heads", "2",
         "--steps-per-epoch", "1", "--no-export", "--histogram-every", "0",
         "--logdir", str(tmp_path / "classifier")]
    )  # fmt: skip
    assert status == 0
    return [str(tmp_path / "classifier"), "x"]


def damaged_export(tmp_path, run_dir):
    shutil.copytree(run_dir, tmp_path / "damaged")
    path = tmp_path / "damaged" / export_path(run_dir)
    if path.is_dir():
        path = path / "saved_model.pb"
    with open(path, "r+b") as handle:
        handle.truncate(100 if path.suffix == ".keras" else 0)
    return [str(tmp_path / "damaged"), "x"]


def another_runs_export(tmp_path, run_dir):
    shutil.copytree(run_dir, tmp_path / "mixed")
    recipe = tmp_path / "mixed" / "language_model.json"
    recipe.write_text(recipe.read_text().replace('"dff": 32', '"dff": 33'))
    return [str(tmp_path / "mixed"), "x"]


BAD = [
    ("empty prompt", lambda t, r: [r, ""], r"a prompt is empty"),
    ("prompt not UTF-8", lambda t, r: [r, "ab\udcff"], r"PROMPT is not UTF-8 text \(byte 3 .*Received: PROMPT=b'ab\\xff'$"),
    ("no prompt", lambda t, r: [r], r"no prompt to continue"),
    ("no such directory", lambda t, r: [str(t / "nowhere"), "x"], r"no such run directory"),
    ("not a language model", not_a_language_model, r"is not the --logdir of a language-model run"),
    ("damaged export", damaged_export, r"model\.keras is not a whole Keras archive|saved_model\.pb is empty"),
    ("another run's files", another_runs_export, r"language_model\.json is not the file this run exported"),
    ("top-k 0", lambda t, r: [r, "x", "--top-k", "0"], r"--top-k must be an integer >= 1\. Received: --top-k=0"),
    ("top-k and top-p", lambda t, r: [r, "x", "--top-k", "2", "--top-p", "0.5"], r"--top-k and --top-p choose two different samplers"),
    ("no new tokens", lambda t, r: [r, "x", "--max-new-tokens", "0"], r"--max-new-tokens must be at least 1\. Received: --max-new-tokens=0$"),
    ("no samples", lambda t, r: [r, "x", "--num-samples", "0"], r"--num-samples"),
    ("bad top-p", lambda t, r: [r, "x", "--top-p", "2"], r"Received: --top-p=2"),
    ("bad temperature", lambda t, r: [r, "x", "--temperature", "-1"], r"^tfnorm generate: error: --temperature must be a number >= 0\. Received: --temperature=-1$"),
    ("temperature nan", lambda t, r: [r, "x", "--temperature", "nan"], r"--temperature must be a number >= 0\. Received: --temperature=nan$"),
    ("top-p 0", lambda t, r: [r, "x", "--top-p", "0"], r"--top-p must be a number in \(0, 1\]\. Received: --top-p=0$"),
]  # fmt: skip


@pytest.mark.parametrize(
    "make, expected", [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_what_cannot_be_used_is_one_line_and_no_traceback(
    run_dir, tmp_path, capsys, make, expected
):
    argv = make(tmp_path, run_dir)
    capsys.readouterr()
    status, out, err = generate(argv, capsys)
    assert status == 2 and out == ""
    assert err.startswith("tfnorm generate: error: ") and err.count("\n") == 1, err
    assert __import__("re").search(expected, err), err


def test_a_closed_stdout_is_one_line_and_exit_74(run_dir):
    process = subprocess.run(
        [sys.executable, "-m", "tfnorm", "generate", run_dir, "x", "--seed", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        cwd=REPO,
        preexec_fn=lambda: os.close(1),
        timeout=300,
    )
    assert process.returncode == 74, process.stderr
    assert process.stderr.count("\n") == 1 and "Traceback" not in process.stderr
    assert "stdout is closed; nothing was generated" in process.stderr


def test_help_answers_without_importing_tensorflow(tmp_path):
    script = tmp_path / "tfnorm"
    script.write_text(HELP_PROBE)
    result = subprocess.run(
        [sys.executable, str(script), "generate", "--help"],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--max-new-tokens" in result.stdout and "--top-p" in result.stdout
    assert "tensorflow imported: False" in result.stdout


def _hf_checkpoint(tmp_path, with_tokenizer=True):
    """The committed GPT-2 fixture with the committed BPE (both 300 ids)."""
    from tests.checkpoints.hf_data import fixture

    target = tmp_path / "gpt2"
    shutil.copytree(fixture("gpt2"), target)
    if with_tokenizer:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(fixture("tokenizer"), name), target / name)
    return str(target)


def test_a_hugging_face_checkpoint_continues_in_its_own_tokens(tmp_path, capsys):
    import numpy as np

    import tfnorm
    from tfnorm.checkpoints import load_tokenizer
    from tfnorm.models import decoder_from_hf

    directory = _hf_checkpoint(tmp_path)
    argv = [directory, "the quick", "--temperature", "0", "--max-new-tokens", "5"]
    status, out, err = generate([*argv, "--json"], capsys)
    assert status == 0, err
    tokenizer = load_tokenizer(directory)
    ids = tokenizer.encode("the quick")
    greedy = tfnorm.generate(
        decoder_from_hf(directory), [ids], 5, temperature=0, jit_compile=False
    )
    new = [int(t) for t in np.asarray(greedy)[0, len(ids) :]]
    eos = tokenizer.eos_id
    expected = tokenizer.decode(new[: new.index(eos)] if eos in new else new)
    assert json.loads(out)["text"] == expected
    status, out, err = generate(argv, capsys)  # streamed as it comes
    assert status == 0 and out == "the quick" + expected + "\n", (out, err)


def test_a_checkpoint_without_a_tokenizer_is_one_line(tmp_path, capsys):
    status, out, err = generate([_hf_checkpoint(tmp_path, False), "hi"], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "tokenizer" in err and "gpt2" in err, err


def test_num_samples_gives_n_texts_with_seeds_s_to_s_plus_n_minus_1(run_dir, capsys):
    argv = [run_dir, "The ", "--max-new-tokens", "6", "--json"]
    status, out, err = generate([*argv, "--seed", "7", "--num-samples", "2"], capsys)
    assert status == 0, err
    samples = [json.loads(line) for line in out.splitlines()]
    assert [s["seed"] for s in samples] == [7, 8]
    # Each sample is the text of a separate call with its seed.
    for sample in samples:
        _, alone, _ = generate([*argv, "--seed", str(sample["seed"])], capsys)
        assert json.loads(alone) == sample


def test_stop_ends_the_text_just_after_the_stop_string(run_dir, capsys):
    """--stop TEXT keeps TEXT: the continuation ends at its end (inclusive)."""
    argv = [run_dir, "The ", "--temperature", "0", "--max-new-tokens", "24", "--json"]
    status, out, err = generate(argv, capsys)
    assert status == 0, err
    full = json.loads(out)["text"]
    stop = full[4:6]
    end = full.find(stop) + len(stop)
    assert end < len(full), full  # the stop cuts something off
    status, out, err = generate([*argv, "--stop", stop], capsys)
    assert status == 0, err
    assert json.loads(out)["text"] == full[:end]


class WriteRecorder(io.StringIO):
    """A stdout that records each write and whether a flush followed it."""

    def __init__(self):
        super().__init__()
        self.events = []

    def write(self, text):
        self.events.append(("write", text))
        return super().write(text)

    def flush(self):
        self.events.append(("flush", None))


def test_the_text_is_written_to_stdout_piece_by_piece(run_dir, capsys, monkeypatch):
    argv = [run_dir, "The ", "--seed", "2", "--max-new-tokens", "10"]
    _, as_json, _ = generate([*argv, "--json"], capsys)
    text = json.loads(as_json)["text"]
    recorder = WriteRecorder()
    monkeypatch.setattr(sys, "stdout", recorder)
    assert main(["generate", *argv]) == 0
    monkeypatch.undo()
    writes = [piece for kind, piece in recorder.events if kind == "write"]
    # The prompt first, then the continuation in several flushed pieces.
    assert writes[0] == "The " and "".join(writes) == "The " + text + "\n"
    pieces = [piece for piece in writes[1:] if piece not in ("", "\n")]
    assert len(pieces) > 1 and "".join(pieces) == text
    for index, event in enumerate(recorder.events[:-2]):
        if event[0] == "write" and event[1] in pieces:
            assert recorder.events[index + 1] == ("flush", None)


def test_the_api_callback_receives_the_pieces_in_order(run_dir):
    from tfnorm.inference.text_generation import TextGenerator

    pieces = []
    text = TextGenerator(run_dir).complete("The ", 10, seed=2, callback=pieces.append)
    assert len(pieces) > 1 and "The " + "".join(pieces) == text


def test_a_prompt_longer_than_the_context_is_cropped_with_one_stderr_line(
    run_dir, capsys
):
    prompt = "0123456789" * 5  # 50 bytes; the context is 32
    status, out, err = generate(
        [run_dir, prompt, "--seed", "1", "--max-new-tokens", "4", "--json"], capsys
    )
    assert status == 0, err
    assert err.count("\n") == 1 and "cropped to its last 32 bytes" in err, err
    result = json.loads(out)
    assert result["prompt"] == prompt
    assert len(result["text"].encode("utf-8", "surrogatepass")) >= 1


def test_max_new_tokens_past_the_context_slides_the_window(run_dir, capsys):
    status, out, err = generate(
        [run_dir, "The ", "--temperature", "0", "--max-new-tokens", "45", "--json"],
        capsys,
    )
    assert status == 0 and err == "", err
    # Greedy never picks the end-of-text token of a corpus without it, so
    # all 45 bytes come: 4 + 45 > 32, the model's context.
    made = json.loads(out)["text"].encode("utf-8", "surrogatepass")
    assert len(made) == 45, made
