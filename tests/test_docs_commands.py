"""The README's and docs/training.md's `tfnorm train` and `tfnorm predict`
lines run as written, and learn.

For each shell block (`sh`, `bash`, `shell`) of those pages holding a
`tfnorm train` command, its `tfnorm train`/`tfnorm predict` lines (with
their `\\` continuations, a leading `nohup` and a trailing `&` as written)
run one after the other in bash, in a fresh temporary directory holding a
copy of `examples/` (the README's commands run from the repository's root),
with the venv's `bin` first on PATH, so `tfnorm` is the installed console
script. Each run must complete and reach the validation accuracy the README
states for it, give or take a little for another CPU's rounding; every
`tfnorm train` example of `tfnorm train --help` must be one of them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.test_docs import README, code_blocks
from tfnorm.cli.train import EPILOG

SHELL_LANGUAGES = ("sh", "bash", "shell")
BIN = os.path.dirname(sys.executable)
# The README's figures are from this suite's own runs; another machine's
# float rounding may move them a little, never to chance.
TOLERANCE = 0.05


def commands(code):
    """The `tfnorm train` / `tfnorm predict` commands of a shell block."""
    found = []
    for line in code.replace("\\\n", " ").split("\n"):
        words = line.split()
        if words[:1] == ["nohup"]:
            words = words[1:]
        if words[:2] in (["tfnorm", "train"], ["tfnorm", "predict"]):
            found.append(" ".join(line.split()))
    return found


#: The pages whose shell blocks train: the README's short examples and the
#: training page's reference.
PAGES = (README, os.path.join(REPO, "docs", "training.md"))


def pages_text():
    """The pages' text, one after the other (where the figures are stated)."""
    texts = []
    for page in PAGES:
        with open(page, encoding="utf-8") as handle:
            texts.append(handle.read())
    return "\n".join(texts)


def readme_blocks():
    """The shell blocks of `PAGES` that train, each with its `page`."""
    found = []
    for page in PAGES:
        with open(page, encoding="utf-8") as handle:
            blocks = code_blocks(handle.read())
        found += [
            dict(block, page=os.path.relpath(page, REPO))
            for block in blocks
            if block["language"] in SHELL_LANGUAGES
            and any(" train " in f" {c} " for c in commands(block["code"]))
        ]
    return found


#: The README's language-model block: its corpus is made first, by Python.
LANGUAGE_MODEL = "--task lm"
#: The checkpoint blocks (README, docs/checkpoints.md): run whole, see
#: `test_checkpoint_blocks_run_as_written`.
INIT_FROM = "--init-from"
# Where the README states what each example reaches: the sentence naming
# the example's data, then its figure.
STATED = {
    "sorted": r"`sorted` task[^.]*?validation accuracy of (0\.\d+)",
    "examples/data/reviews.csv": r"reviews\.csv`?\)?,.*?validation accuracy of (0\.\d+)",
    "examples/keras_transformer_classifier.py": (
        r"`examples/keras_transformer_classifier\.py` reaches a validation "
        r"accuracy of (0\.\d+)"
    ),
}


def stated_accuracy(readme, words):
    """The validation accuracy the README states for the run of `words`."""
    if "--model-fn" in words:
        source = words[words.index("--model-fn") + 1].split(":")[0]
    else:
        source = words[words.index("--task" if "--task" in words else "--data") + 1]
    match = re.search(STATED[source], " ".join(readme.split()))
    return float(match.group(1)) if match else None


def test_the_readme_has_train_examples_and_the_help_shows_only_those():
    blocks = readme_blocks()
    assert len(blocks) >= 2
    lines = {c for block in blocks for c in commands(block["code"])}
    assert any("--data" in c for c in lines) and any("--task" in c for c in lines)
    assert any("--model-fn" in c for c in lines)
    for command in commands(EPILOG):
        if command.startswith("tfnorm train") and "--config" not in command:
            assert command in lines, f"tfnorm train --help example {command!r}"


def units():
    """The README's commands grouped into runs: a `tfnorm train` line with the
    `tfnorm predict` lines reading its logdir, or a line that trains nothing
    (`--help`); each group runs on its own, so the long ones can be marked."""
    found, seen = [], set()
    for block in readme_blocks():
        if LANGUAGE_MODEL in block["code"]:
            continue  # needs its corpus first: see the language-model test
        for line in commands(block["code"]):
            # The README repeats some of the training page's lines: each
            # line runs once.
            if line in seen:
                continue
            seen.add(line)
            words = shlex.split(line.rstrip("&").split(">")[0])
            if words[1] == "predict" and found and words[2] in found[-1][2]:
                found[-1][1].append(line)
                continue
            logdirs = (
                words[words.index("--logdir") + 1 :][:1] if "--logdir" in words else []
            )
            found.append((f"{block['page']}:{block['line']}", [line], logdirs))
    params = []
    for where, lines, _ in found:
        marks = ()
        if "--task sorted" in lines[0]:
            # Some 400 steps: ~25 s on 2 idle cores, over a minute on a busy
            # machine; run by `make test-slow`.
            marks = (pytest.mark.slow,)
        params.append(pytest.param(lines, id=f"{where}:{lines[0][:40]}", marks=marks))
    return params


@pytest.mark.skipif(
    shutil.which("tfnorm", path=BIN) is None,
    reason="this runtime has no tfnorm console script beside its python",
)
@pytest.mark.parametrize("lines", units())
def test_readme_train_lines_run_as_written_and_learn(lines, tmp_path):
    shutil.copytree(os.path.join(REPO, "examples"), tmp_path / "examples")
    script = ["set -e"]
    for line in lines:
        script.append(line)
        if line.endswith("&"):
            script.append("wait $!")
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    # The console script imports tfnorm: this checkout's, not an installed one.
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{lines}: exit {result.returncode}\n"
        f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    readme = pages_text()
    words = shlex.split(lines[0].rstrip("&").split(">")[0])
    if "--help" in words:
        assert "usage: tfnorm train" in result.stdout
        return
    logdir = words[words.index("--logdir") + 1]
    with open(tmp_path / logdir / "summary.json") as handle:
        summary = json.load(handle)
    assert summary["status"] == "completed", summary
    accuracy = summary["metrics"]["val_accuracy"]
    stated = stated_accuracy(readme, words)
    assert stated is not None, f"the README states no accuracy for {lines[0]!r}"
    assert accuracy >= stated - TOLERANCE, (logdir, accuracy, stated)
    printed = [p for p in result.stdout.splitlines() if p.count("\t") == 3]
    texts = [w for line in lines[1:] for w in shlex.split(line)[3:]]
    assert [p.split("\t")[-1] for p in printed] == texts
    assert all(p.split("\t")[0] in summary["data"]["label_names"] for p in printed)


# What the README states for its language model: bits per byte on the
# held-out text, and a unigram model's.
STATED_BITS = (
    r"reaches (\d\.\d+) bits per byte on the held-out text, against (\d\.\d+) "
    r"for a unigram model"
)


def language_model_lines():
    """The lines of the README's language-model block, continuations joined
    (the training page shows the same block)."""
    blocks = [
        b
        for b in readme_blocks()
        if LANGUAGE_MODEL in b["code"] and INIT_FROM not in b["code"]
    ]
    assert len({b["code"] for b in blocks}) == 1, [b["page"] for b in blocks]
    block = blocks[0]
    lines = [
        " ".join(line.split())
        for line in block["code"].replace("\\\n", " ").split("\n")
    ]
    return [line for line in lines if line.split()[:1] in (["python"], ["tfnorm"])]


@pytest.mark.slow  # 300 steps: ~90 s on 2 idle cores
@pytest.mark.skipif(
    shutil.which("tfnorm", path=BIN) is None,
    reason="this runtime has no tfnorm console script beside its python",
)
def test_readme_language_model_lines_run_as_written_and_beat_the_unigram_baseline(
    tmp_path,
):
    lines = language_model_lines()
    assert [line.split()[:2] for line in lines] == [
        ["python", "examples/data/make_corpus.py"],
        ["tfnorm", "train"],
        ["tfnorm", "generate"],
    ]
    shutil.copytree(os.path.join(REPO, "examples"), tmp_path / "examples")
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        ["bash", "-c", "\n".join(["set -e", *lines])],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    words = shlex.split(lines[1])
    logdir = tmp_path / words[words.index("--logdir") + 1]
    with open(logdir / "summary.json") as handle:
        summary = json.load(handle)
    assert summary["status"] == "completed", summary
    stated = re.search(STATED_BITS, " ".join(pages_text().split()))
    bits, unigram = float(stated.group(1)), float(stated.group(2))
    # The baseline is counted, not trained: the same on every machine.
    assert summary["data"]["val_unigram_bits_per_byte"] == pytest.approx(
        unigram, abs=0.01
    )
    assert summary["metrics"]["val_bits_per_byte"] <= bits + 0.15
    prompt = shlex.split(lines[2])[3]
    # The generated text follows the run's closing line (it may hold newlines).
    generated = result.stdout.split("summary.json\n", 1)[1]
    assert generated.startswith(prompt) and len(generated) > len(prompt) + 1


def checkpoint_blocks():
    """{code: page} of the shell blocks that fine-tune a checkpoint
    (`--init-from`), each once (the README repeats docs/checkpoints.md's)."""
    found = {}
    for page in (README, os.path.join(REPO, "docs", "checkpoints.md")):
        with open(page, encoding="utf-8") as handle:
            for block in code_blocks(handle.read()):
                if block["language"] in SHELL_LANGUAGES and INIT_FROM in block["code"]:
                    found.setdefault(block["code"], os.path.relpath(page, REPO))
    return found


@pytest.mark.slow  # two fine-tunes of 20 steps and an export: ~50 s on 2 cores
@pytest.mark.skipif(
    shutil.which("tfnorm", path=BIN) is None,
    reason="this runtime has no tfnorm console script beside its python",
)
def test_checkpoint_blocks_run_as_written(tmp_path):
    blocks = checkpoint_blocks()
    assert blocks
    env = dict(os.environ)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    for index, (code, page) in enumerate(blocks.items()):
        # Run from a copy of what the block reads of the repository's root.
        root = tmp_path / f"block{index}"
        shutil.copytree(os.path.join(REPO, "examples"), root / "examples")
        hf = os.path.join("tests", "data", "hf")
        shutil.copytree(os.path.join(REPO, hf), root / hf)
        result = subprocess.run(
            ["bash", "-c", "set -e\n" + code],
            cwd=str(root),
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, (
            page,
            result.stdout[-3000:],
            result.stderr[-3000:],
        )
        lines = [" ".join(c.split()) for c in code.replace("\\\n", " ").split("\n")]
        for line in lines:
            words = shlex.split(line.split("#")[0])
            if words[:2] == ["tfnorm", "train"]:
                logdir = root / words[words.index("--logdir") + 1]
                summary = json.loads((logdir / "summary.json").read_text())
                assert summary["status"] == "completed", (page, summary)
            if words[:2] == ["tfnorm", "export"]:
                assert (root / words[3] / "config.json").is_file(), page
        if "--norm rms" in code:
            assert "norms are RMSNorms now" in result.stdout, page
