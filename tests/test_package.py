"""Installation and import behaviour of the package itself."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap

from tests.conftest import REPO

#: Distributions that each install the `tensorflow` package (module folder).
#: Two of them in one environment overwrite each other's files.
TENSORFLOW_DISTRIBUTIONS = {
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tensorflow-intel",
    "tensorflow-macos",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "intel-tensorflow",
    "tf-nightly",
    "tf-nightly-cpu",
    "tf-nightly-gpu",
    "tf-nightly-intel",
    "tf-nightly-macos",
}


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)


def test_import_without_tensorflow_says_what_to_install(tmp_path):
    # A virtual environment with no TensorFlow (and nothing else) in it.
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True
    )
    python = venv / "bin" / "python"
    result = _run(
        [str(python), "-c", "import tfnorm"],
        env={"PYTHONPATH": REPO, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0
    assert "ImportError: tfnorm needs TensorFlow >= 2.9" in result.stderr
    assert "pip install tensorflow-cpu" in result.stderr
    # One clear error, not a chain of tracebacks.
    assert "During handling" not in result.stderr


def test_tensorflow_older_than_2_9_is_rejected(tmp_path):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text('__version__ = "2.8.4"\n')
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    result = _run([sys.executable, "-c", "import tfnorm"], env=env)
    assert result.returncode != 0
    assert "found TensorFlow 2.8.4" in result.stderr


def test_install_next_to_an_existing_tensorflow_adds_no_tensorflow(tmp_path):
    # This environment already has a TensorFlow build (tensorflow-cpu here);
    # resolving `pip install .` must not bring another one.
    report = tmp_path / "report.json"
    result = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--no-build-isolation",
            "--quiet",
            "--report",
            str(report),
            REPO,
        ]
    )
    assert result.returncode == 0, result.stderr
    names = {
        item["metadata"]["name"].lower()
        for item in json.loads(report.read_text())["install"]
    }
    assert "tfnorm" in names
    # tf.summary needs TensorBoard and current TensorFlow (2.21) does not bring it.
    assert "tensorboard" in names
    assert not {
        n
        for n in names
        if n.startswith(("tensorflow", "tf-nightly", "tf_nightly", "keras"))
    }, names


def test_cpu_extra_brings_tensorflow_cpu_only():
    # The extras are what a user picks to get one TensorFlow: read the
    # metadata pip would see.
    code = textwrap.dedent(
        """
        import configparser, json
        c = configparser.ConfigParser(); c.read("setup.cfg")
        extras = {k: v.split() for k, v in c["options.extras_require"].items()}
        print(json.dumps({"requires": c["options"]["install_requires"].split(), "extras": extras}))
        """
    )
    meta = json.loads(_run([sys.executable, "-c", code], cwd=REPO).stdout)
    assert not [
        r for r in meta["requires"] if r.lower().startswith(("tensorflow", "tf-"))
    ]
    assert meta["extras"]["cpu"] == ["tensorflow-cpu>=2.9"]
    assert meta["extras"]["gpu"] == ["tensorflow>=2.9"]


def _normalized(name):
    # PEP 503: tensorflow_cpu, TensorFlow-CPU and tensorflow.cpu are one name.
    return re.sub(r"[-_.]+", "-", name).lower()


def test_one_tensorflow_distribution_is_installed():
    # `pip install keras-hub` (via tensorflow-text) or `tf-keras` next to
    # tensorflow-cpu installs the full `tensorflow` wheel too; both write
    # the same `tensorflow/` folder, so which files win is an accident.
    # `make venv` installs those two with --no-deps (see the Makefile).
    found = sorted(
        {
            f"{_normalized(dist.metadata['Name'])} {dist.version}"
            for dist in importlib.metadata.distributions()
            if dist.metadata["Name"]
            and _normalized(dist.metadata["Name"]) in TENSORFLOW_DISTRIBUTIONS
        }
    )
    assert len(found) == 1, (
        f"expected one TensorFlow distribution in {sys.prefix}, found {found}; "
        "rebuild the venv with `make venv` (tf-keras and keras-hub with --no-deps)"
    )


def test_pip_check_tool_drops_only_the_two_known_lines():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import pip_check
    finally:
        sys.path.pop(0)
    output = (
        "tf-keras 2.21.0 requires tensorflow, which is not installed.\n"
        "keras-hub 0.32.0 requires tensorflow-text, which is not installed.\n"
        "keras-hub 0.32.0 requires regex, which is not installed.\n"
        "tensorflow-text 2.21.1 has requirement tensorflow<2.22, but you have "
        "tensorflow 2.22.0.\n"
    )
    assert pip_check.remaining_problems(output) == [
        "keras-hub 0.32.0 requires regex, which is not installed.",
        "tensorflow-text 2.21.1 has requirement tensorflow<2.22, but you have "
        "tensorflow 2.22.0.",
    ]
    assert pip_check.remaining_problems("No broken requirements found.\n") == []
