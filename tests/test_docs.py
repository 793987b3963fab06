"""Every Python code block in README.md and docs/*.md runs.

Each fenced block whose info string starts with `python` (or `py`,
`python3`) runs in a fresh Python process of the current runtime, in an
empty temporary directory (holding a copy of `tests/data/` when the block
names it, as the repository's root would), and must exit 0. Blocks in other languages
(`sh`, `bash`, `yaml`, ...) are not executed.

A Python block that must not run here (it needs a GPU, a Docker engine, a
running cluster, a file the reader brings, ...) is marked in one of two ways:

* an HTML comment `<!-- not-runnable -->` as the last non-blank line before
  the opening fence (invisible on GitHub), optionally with a reason:
  `<!-- not-runnable: needs two machines -->`;
* or `no-run` in the fence's info string: ```` ```python no-run ````.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

import pytest

from tests.conftest import REPO, run_python

README = os.path.join(REPO, "README.md")
#: The pages moved out of the README (docker, troubleshooting, ...) and the
#: others under docs/: their Python blocks run too.
DOCS = [README, *sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))]
PYTHON_LANGUAGES = ("python", "py", "python3")
_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NOT_RUNNABLE = re.compile(r"^\s*<!--\s*not-runnable\b.*-->\s*$")


def code_blocks(text):
    """The fenced code blocks of a Markdown text.

    Returns:
        A list of dicts: `line` (1-based line of the opening fence),
        `language` (first word of the info string, lower case), `runnable`
        (False when marked as described in the module docstring) and `code`.
    """
    lines = text.split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        fence, info = match.group("fence"), match.group("info").strip()
        words = info.split()
        opening_line = index + 1
        previous = next((line for line in reversed(lines[:index]) if line.strip()), "")
        body = []
        index += 1
        while index < len(lines):
            closing = _FENCE.match(lines[index])
            if (
                closing
                and closing.group("fence")[0] == fence[0]
                and len(closing.group("fence")) >= len(fence)
                and not closing.group("info").strip()
            ):
                break
            body.append(lines[index])
            index += 1
        blocks.append(
            {
                "line": opening_line,
                "language": words[0].lower() if words else "",
                "runnable": "no-run" not in words[1:]
                and not _NOT_RUNNABLE.match(previous),
                "code": "\n".join(body) + "\n",
            }
        )
        index += 1
    return blocks


def _readme_python_blocks():
    with open(README, encoding="utf-8") as f:
        blocks = code_blocks(f.read())
    return [b for b in blocks if b["language"] in PYTHON_LANGUAGES]


PYTHON_BLOCKS = _readme_python_blocks()


def _all_python_blocks():
    found = []
    for path in DOCS:
        with open(path, encoding="utf-8") as f:
            for block in code_blocks(f.read()):
                if block["language"] in PYTHON_LANGUAGES and block["runnable"]:
                    found.append(dict(block, page=os.path.relpath(path, REPO)))
    return found


ALL_PYTHON_BLOCKS = _all_python_blocks()


def test_readme_has_a_runnable_python_example():
    assert any(block["runnable"] for block in PYTHON_BLOCKS), (
        "README.md should hold at least one runnable ```python block "
        "(the example of using the layers in a Keras model)"
    )


def test_code_blocks_parser_honours_both_markers():
    text = "\n".join(
        [
            "```python",
            "print(1)",
            "```",
            "<!-- not-runnable: needs a GPU -->",
            "",
            "```python",
            "import gpu_only",
            "```",
            "````python no-run",
            "```",
            "nested fence",
            "````",
            "~~~bash",
            "docker compose up",
            "~~~",
        ]
    )
    blocks = code_blocks(text)
    assert [(b["line"], b["language"], b["runnable"]) for b in blocks] == [
        (1, "python", True),
        (6, "python", False),
        (9, "python", False),
        (13, "bash", True),
    ]
    assert blocks[0]["code"] == "print(1)\n"
    assert blocks[2]["code"] == "```\nnested fence\n"


@pytest.mark.parametrize(
    "block",
    ALL_PYTHON_BLOCKS,
    ids=lambda block: f"{block['page']}:{block['line']}",
)
def test_readme_python_block_runs(block, tmp_path):
    if "tests/data/" in block["code"]:
        # A block reading the repository's test data (the tiny checkpoints)
        # runs as from the repository's root: its copy is beside it.
        shutil.copytree(
            os.path.join(REPO, "tests", "data"), tmp_path / "tests" / "data"
        )
    try:
        run_python(block["code"], cwd=str(tmp_path))
    except AssertionError as error:
        pytest.fail(
            f"{block['page']} line {block['line']}: the ```python block failed "
            f"(mark it <!-- not-runnable --> if it cannot run in tests):\n{error}",
            pytrace=False,
        )
