"""Shared test setup: runtime detection, two logical CPUs, helpers.

The same test files run in the three runtimes (keras3, legacy tf_keras, the
real TF 2.9 root); `RUNTIME` says which one this process is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Two logical CPU devices, so MirroredStrategy can be tested without GPUs.
# This must happen before anything initialises the TensorFlow runtime.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0],
    [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()],
)

# One line per test file in a quiet or distributed run (`make test`): where the
# suite is, and since when.
from tests.progress import (  # noqa: E402, F401
    pytest_collection_finish,
    pytest_configure,
    pytest_runtest_logstart,
    pytest_xdist_node_collection_finished,
)

# `--suite-part K/N`: one of N processes that share the suite's files
# (`make test-slow-compat`), each small enough to leave memory for subprocesses.
from tests.suite_parts import (  # noqa: E402, F401
    pytest_addoption,
    pytest_ignore_collect,
    pytest_sessionfinish,
)
from tfnorm import _keras  # noqa: E402

RUNTIME = {"keras3": "keras3", "tf_keras": "legacy", "keras2": "tf29"}[_keras.FLAVOUR]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_report_header(config):
    return (
        f"tfnorm runtime: {RUNTIME} (TensorFlow {tf.__version__}, "
        f"Keras {_keras.KERAS_VERSION}, {_keras.FLAVOUR})"
    )


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts with the float32 policy and a fresh Keras session."""
    _keras.set_global_policy("float32")
    if _keras.IS_KERAS_3:
        # Keras 3's default also runs gc.collect(), about 0.9 s per test with
        # TensorFlow loaded: more than most tests take. Python's own
        # collector still runs as usual.
        _keras.keras.backend.clear_session(free_memory=False)
    else:
        _keras.keras.backend.clear_session()
    yield
    _keras.set_global_policy("float32")


@pytest.fixture
def mixed_policy():
    """Sets a global mixed-precision policy for the test: `mixed_policy("mixed_float16")`."""

    def _set(name):
        _keras.set_global_policy(name)

    return _set


@pytest.fixture
def two_device_strategy():
    # Reduce on one device: the default collective all-reduce keys its
    # instances per process, and in tf_keras a second strategy after a model
    # of another size fails with "Shape mismatch in the collective".
    return tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice()
    )


@pytest.fixture
def config_checks(monkeypatch):
    """A list that gets one entry each time `TrainConfig.resolve()` runs its
    checks (the file system, the norm), for counting them."""
    from tfnorm.training.config import train_config as config_module

    calls = []
    check = config_module.check_combinations

    def counted(values):
        calls.append(values)
        return check(values)

    monkeypatch.setattr(config_module, "check_combinations", counted)
    return calls


def run_python(code, cwd=None, timeout=300, env=None):
    """Runs `code` in a fresh Python process of this runtime; returns stdout.

    Used to prove that reloading works in a process that never defined the
    objects (no `custom_objects`, only `import tfnorm`). A child still running
    after `timeout` seconds is stopped with SIGABRT, so `faulthandler` prints
    every thread's Python stack: the failure says where it hung.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = REPO + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env["PYTHONFAULTHANDLER"] = "1"
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        raise AssertionError(
            f"subprocess still running after {timeout} s; its stacks:\n"
            f"{stdout[-2000:]}\n{stderr[-6000:]}"
        ) from None
    if process.returncode != 0:
        raise AssertionError(
            f"subprocess failed ({process.returncode}):\n{stdout}\n{stderr[-4000:]}"
        )
    return stdout
