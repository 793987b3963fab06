"""The commands' front: `tfnorm info` names tfnorm's version first,
TensorFlow's C++ start-up log stays out of the output unless asked for,
`python -m tfnorm --help` needs no TensorFlow, and the subpackages are
attributes of `tfnorm`.

Every command here is the real one in a fresh process, with this tree's
`tfnorm` first on the path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import tfnorm
from tests.conftest import REPO, run_python

# Markers of the start-up lines TensorFlow's C++ side logs (TF 2.21's oneDNN
# notice and absl's before it, CPU features, a CUDA build without a GPU);
# any other line in the log's format counts too.
START_UP_MARKERS = (
    "oneDNN custom operations",
    "cpu_feature_guard",
    "cudart_stub",
    "cuInit",
    "absl::InitializeLog",
)
LOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] ", re.M)

# The console script as pip writes it: a file named `tfnorm`.
CONSOLE_SCRIPT = "import sys\nfrom tfnorm.cli.main import main\nsys.exit(main())\n"


def environment(**changes):
    env = dict(os.environ)
    # The suite's conftest sets a log level for its own process; a user's
    # shell has none.
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.update(changes)
    return env


def run_tfnorm(tmp_path, *args, env=None):
    script = tmp_path / "tfnorm"
    script.write_text(CONSOLE_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env or environment(),
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


def start_up_lines(text):
    return [
        line
        for line in text.splitlines()
        if LOG_LINE.match(line) or any(m in line for m in START_UP_MARKERS)
    ]


def test_info_prints_tfnorm_version_first(tmp_path):
    result = run_tfnorm(tmp_path, "info")
    first = result.stdout.splitlines()[0].split()
    assert first == ["tfnorm", tfnorm.__version__]
    as_json = json.loads(run_tfnorm(tmp_path, "info", "--json").stdout)
    assert list(as_json)[0] == "tfnorm" and as_json["tfnorm"] == tfnorm.__version__


@pytest.mark.parametrize("module", [False, True], ids=["console-script", "python-m"])
def test_commands_print_no_tensorflow_start_up_log(tmp_path, module):
    if module:
        result = subprocess.run(
            [sys.executable, "-m", "tfnorm", "info"],
            capture_output=True,
            text=True,
            env=environment(),
            cwd=tmp_path,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
    else:
        result = run_tfnorm(tmp_path, "info")
    assert start_up_lines(result.stdout + result.stderr) == []
    assert result.stderr == ""


def test_start_up_log_shows_when_asked(tmp_path):
    # The other half of the test above: this TensorFlow does log at start-up
    # here, so its absence there is the command's doing.
    verbose = run_tfnorm(tmp_path, "--verbose", "info")
    explicit = run_tfnorm(tmp_path, "info", env=environment(TF_CPP_MIN_LOG_LEVEL="0"))
    after = run_tfnorm(tmp_path, "info", "-v")
    for result in (verbose, explicit, after):
        assert result.stdout.startswith("tfnorm")
    if not start_up_lines(explicit.stderr):
        pytest.skip("this TensorFlow logs nothing at start-up on this machine")
    assert start_up_lines(verbose.stderr) and start_up_lines(after.stderr)


def test_quiet_import_keeps_other_stderr_output(capfd):
    # Only log lines the level hides are dropped from what the import
    # printed: a Python warning or an error line still reaches the user.
    from tfnorm.cli import main

    def exec_module(module):
        for line in (
            b"WARNING: All log messages before absl::InitializeLog() is called"
            b" are written to STDERR\n",
            b"I0000 00:00:1796267153.109878    5136 port.cc:153] oneDNN custom"
            b" operations are on.\n",
            b"W0101 12:00:00.000001 7 cudart_stub.cc:31] Could not find cuda\n",
            b"E0101 12:00:00.000002 7 cuda_driver.cc:152] failed call to cuInit\n",
            b"/x.py:1: UserWarning: kept\n",
        ):
            os.write(2, line)
        sys.stderr.write("kept too\n")
        return module

    assert main._quietly(exec_module)("module") == "module"
    # (Under pytest, sys.stderr is not fd 2: compare the lines, not the order.)
    err = capfd.readouterr().err
    assert sorted(err.splitlines()) == ["/x.py:1: UserWarning: kept", "kept too"]


def test_quiet_level_is_set_unless_the_user_chose(monkeypatch):
    from tfnorm.cli import main

    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    main.quiet_tensorflow(verbose=True)
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    main.quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == main.QUIET_LOG_LEVEL
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    main.quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


BLOCKER = """
import sys


class NoTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ImportError("tensorflow is blocked for this test")
        return None


sys.meta_path.insert(0, NoTensorFlow())
"""


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["info", "-h"]])
def test_python_m_tfnorm_help_runs_without_tensorflow(tmp_path, argv):
    # sitecustomize runs at start-up: TensorFlow cannot be imported at all,
    # as on a machine that lacks it.
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = environment()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    result = subprocess.run(
        [sys.executable, "-m", "tfnorm", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "usage: tfnorm" in result.stdout
    assert "--verbose" in result.stdout
    # The blocker is in force: a command that needs TensorFlow fails.
    failed = subprocess.run(
        [sys.executable, "-m", "tfnorm", "info"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert failed.returncode != 0
    assert "tensorflow" in failed.stderr.lower()


def test_subpackages_are_lazy_attributes():
    out = run_python(
        """
        import sys
        import tfnorm

        lazy = ("tfnorm.distribute", "tfnorm.experiments")
        print([name in sys.modules for name in lazy])
        print(tfnorm.distribute.__name__, tfnorm.experiments.__name__)
        print(tfnorm.distribute.describe_choice is not None)
        """
    )
    assert out.split("\n")[:3] == [
        "[False, False]",
        "tfnorm.distribute tfnorm.experiments",
        "True",
    ]


def test_verbose_is_not_a_training_setting(capsys):
    # `--verbose` (before or after the subcommand) is the command's, not one
    # of the run settings `tfnorm train` reads from the other attributes.
    from tfnorm.cli.main import main

    for argv in (["--verbose", "train"], ["train", "-v"]):
        assert main([*argv, "--task", "sorted", "--print-config"]) == 0
        assert "verbose" not in json.loads(capsys.readouterr().out)
