"""The README's install lines, run as written: `pip install ".[cpu]"` from
the clone, and a wheel built with `python -m build` installed from `dist/`.

Both run in bash in a copy of the repository's files (as a fresh clone has
them), in the fresh venv the README's first line creates, activated as the
README says. One thing is added: before anything is installed, a `.pth` file
makes that venv see this test runtime's site-packages, so the TensorFlow the
`cpu` extra asks for is already there (pip says "already satisfied") instead
of a 250 MB download. Everything tfnorm's own install does (the build, the
package's files, the `tfnorm` console script) happens in the new venv, which
is checked: the wheel holds every module of `tfnorm/` and nothing else, the
installed `tfnorm` is the venv's, and `tfnorm info` and the README's first
Python example run there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import zipfile
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import tfnorm
from tests.conftest import REPO, RUNTIME
from tests.test_docs import PYTHON_BLOCKS, README, code_blocks

SHELL_LANGUAGES = ("sh", "bash", "shell")
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*cache"
)


def install_blocks():
    """The README's shell blocks that install tfnorm from the clone."""
    with open(README, encoding="utf-8") as handle:
        blocks = code_blocks(handle.read())
    return [
        block
        for block in blocks
        if block["language"] in SHELL_LANGUAGES
        and re.search(r"^pip install .*(\.\[cpu\]|dist/)", block["code"], re.M)
    ]


def with_stack_visible(code):
    """`code` with the `.pth` line after the line that creates `.venv`."""
    purelib = sysconfig.get_paths()["purelib"]
    lines = code.split("\n")
    index = next(i for i, line in enumerate(lines) if "-m venv .venv" in line)
    pth = (
        f'echo "{purelib}" > "$(.venv/bin/python -c '
        "'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')"
        '/test-runtime.pth"'
    )
    return "\n".join(
        ["set -euo pipefail", *lines[: index + 1], pth, *lines[index + 1 :]]
    )


def run_bash(code, cwd):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "TF_CPP_MIN_LOG_LEVEL")
    }
    # A user's shell: the system's Python first, not this runtime's venv.
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    result = subprocess.run(
        ["bash", "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, (
        f"README install lines failed:\n{code}\n--- stdout\n{result.stdout[-3000:]}"
        f"\n--- stderr\n{result.stderr[-3000:]}"
    )
    return result.stdout


def test_readme_has_both_install_blocks():
    codes = [block["code"] for block in install_blocks()]
    assert len(codes) == 2, codes
    assert 'pip install ".[cpu]"' in codes[0]
    assert "python -m build --wheel" in codes[1]


@pytest.mark.slow
def test_readme_install_lines_and_the_wheel_work_in_a_fresh_venv(tmp_path):
    clone = tmp_path / "tfnorm"
    shutil.copytree(REPO, clone, ignore=SKIP)
    install, wheel = (block["code"] for block in install_blocks())
    quickstart = next(block["code"] for block in PYTHON_BLOCKS if block["runnable"])
    (tmp_path / "quickstart.py").write_text(quickstart)
    # The README's first Python example and where `tfnorm` comes from, run
    # outside the clone with the venv's python.
    check = (
        "\ncd .. && python quickstart.py"
        " && python -c 'import tfnorm; print(\"from\", tfnorm.__file__)'"
        " && tfnorm info"
    )
    venv = clone / ".venv"

    out = run_bash(with_stack_visible(install) + check, cwd=clone)
    assert f"from {venv}/lib/" in out and "site-packages/tfnorm/__init__.py" in out
    assert f"tfnorm               {tfnorm.__version__}" in out
    assert "(2, 16, 64)" in out

    # The wheel (in the same venv: it replaces the first install).
    out = run_bash("source .venv/bin/activate\n" + wheel + check, cwd=clone)
    wheels = list((clone / "dist").glob("tfnorm-*.whl"))
    assert [w.name for w in wheels] == [f"tfnorm-{tfnorm.__version__}-py3-none-any.whl"]
    assert f"from {venv}/lib/" in out and "(2, 16, 64)" in out
    assert f"tfnorm               {tfnorm.__version__}" in out

    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
        entry_points = archive.read(
            f"tfnorm-{tfnorm.__version__}.dist-info/entry_points.txt"
        ).decode()
    modules = sorted(
        os.path.relpath(os.path.join(folder, name), REPO)
        for folder, _, files in os.walk(os.path.join(REPO, "tfnorm"))
        for name in files
        if name.endswith(".py")
    )
    assert sorted(n for n in names if not n.startswith("tfnorm-")) == modules
    assert not [n for n in names if n.startswith(("tests/", "bench/", "examples/"))]
    assert "tfnorm = tfnorm.cli.main:main" in entry_points
    # The console script is the wheel's, not an editable install's.
    script = (venv / "bin" / "tfnorm").read_text()
    assert script.startswith(f"#!{venv}/bin/python")


def keras_hub_install_block():
    """The README's shell block that installs keras-hub beside tfnorm."""
    with open(README, encoding="utf-8") as handle:
        blocks = code_blocks(handle.read())
    found = [
        block["code"]
        for block in blocks
        if block["language"] in SHELL_LANGUAGES
        and "--no-deps keras-hub" in block["code"]
    ]
    assert len(found) == 1, found
    return found[0]


def read_constraints():
    """tools/constraints.txt as {distribution name: specifier text}."""
    constraints = {}
    with open(os.path.join(REPO, "tools", "constraints.txt")) as handle:
        for line in handle:
            line = line.split("#")[0].strip()
            if line:
                requirement = Requirement(line)
                constraints[canonicalize_name(requirement.name)] = requirement
    return constraints


def test_the_keras_hub_install_lines_take_the_tested_versions():
    """`--no-deps keras-hub` skips keras-hub's own exact pins: only the
    constraints file `make venv` uses keeps them, so each pip line takes it,
    and the block ends with the check it must pass."""
    code = keras_hub_install_block()
    installs = [shlex.split(line.split("#")[0]) for line in code.splitlines()]
    installs = [words for words in installs if words[:2] == ["pip", "install"]]
    assert len(installs) == 2, code
    for words in installs:
        pairs = list(zip(words, words[1:]))
        assert ("-c", "tools/constraints.txt") in pairs, words
    assert code.strip().splitlines()[-1].startswith("python tools/pip_check.py")


def test_the_constraints_keep_every_exact_pin_of_the_keras_hub_they_install():
    """What `-c tools/constraints.txt` installs passes tools/pip_check.py:
    the keras-hub it allows is this venv's, and each `==` that keras-hub
    requires is in the file, as it is installed here."""
    try:
        hub_version = metadata.version("keras-hub")
    except metadata.PackageNotFoundError:
        pytest.skip(f"keras-hub is not installed in this runtime ({RUNTIME})")
    constraints = read_constraints()
    assert constraints["keras-hub"].specifier.contains(hub_version)
    pinned = [
        Requirement(text)
        for text in metadata.requires("keras-hub") or []
        if "==" in text and "extra ==" not in text
    ]
    assert pinned, "keras-hub pins nothing exactly any more: review this test"
    for requirement in pinned:
        name = canonicalize_name(requirement.name)
        assert name in constraints, f"tools/constraints.txt lacks {requirement}"
        assert str(constraints[name].specifier) == str(requirement.specifier)
        assert requirement.specifier.contains(metadata.version(requirement.name))
