"""The image on its default base (TensorFlow 2.9.0 GPU Jupyter), used as the
README says: quick start, JupyterLab, SSH, background training, TensorBoard,
`docker compose stop`, `down` + `up`, and the multi-worker profile.

The base is a stand-in built by tools/container/build-standins.sh from the
real image's steps (Debian/Python 3.9 and CPU TensorFlow where the real one
has Ubuntu/Python 3.8 and CUDA).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import shutil
import time

import pytest

from tests.browser import CHROMIUM, jupyterlab_screenshot
from tests.container.harness import (
    REPO,
    Kernel,
    busy_part_done,
    readme_block,
    started_project,
    wait_for,
)
from tests.notebooks.parameters import SMALL_PARAMETERS

NOTEBOOKS = sorted(pathlib.Path(REPO, "notebooks").glob("*.ipynb"))

# The TensorBoard runs each notebook writes to ../runs from its folder, i.e.
# /workspace/runs, which the TensorBoard service watches.
TENSORBOARD_RUNS = {
    "02_pre_vs_post_ln": "pre_vs_post_ln/",
    "03_tensorboard_norm_monitoring": "norm_monitoring/",
    "05_decoder": "decoder/",
}
UID = 1000  # the image's TFNORM_UID default
STANDIN = "tf29"  # tools/container/build-standins.sh


@pytest.fixture(scope="module")
def project(engine, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("tf29"))
    with started_project(
        root,
        STANDIN,
        "2.9.0-gpu-jupyter",
        "tfnormct29",
        down="--profile multiworker down --volumes --timeout 20",
    ) as running:
        yield running


def _readme_output(project, prefix):
    for command, result in project.readme_outputs:
        if command.startswith(prefix):
            return result
    raise AssertionError(f"the README ran no command starting with {prefix!r}")


def test_readme_quick_start_builds_the_image_once(project):
    config = json.loads(project.compose("config --format json").stdout)
    built = sorted(
        name for name, service in config["services"].items() if "build" in service
    )
    # Services without `build:` reuse lab's image: one build per `build`.
    assert built == ["lab"], built
    images = {service["image"] for service in config["services"].values()}
    assert images == {project.image}
    up = _readme_output(project, "docker compose up")
    assert up.returncode == 0
    logs = _readme_output(project, "docker compose logs lab")
    assert f"token={project.token}" in logs.stdout


def test_jupyterlab_answers_only_with_the_token(project):
    assert project.http(f"/api/status?token={project.token}")[0] == 200
    assert project.http("/api/status")[0] == 403
    assert project.http("/api/status?token=not-the-token")[0] == 403


def test_the_base_tensorflow_stack_is_untouched_and_pip_check_passes(project):
    check = project.exec("python3 -m pip check")
    assert "No broken requirements" in check.stdout
    versions = project.exec(
        "python3 -c 'import tensorflow as tf, bleach, pip; "
        "print(tf.__version__, bleach.__version__, pip.__version__)'"
    ).stdout.split()
    tf_version, bleach_version, pip_version = versions[-3:]
    assert tf_version == "2.9.0"
    assert bleach_version == "5.0.0"  # the base's, with its invalid metadata
    assert tuple(int(part) for part in pip_version.split(".")[:2]) < (24, 1)


def test_apt_works_whatever_nvidia_lists_the_base_had(project):
    lists = project.exec("ls /etc/apt/sources.list.d/", user="root").stdout
    assert "cuda" not in lists and "tensorRT" not in lists
    project.exec("apt-get update -q", user="root", timeout=300)


def test_jupyter_notebook_command_serves(project):
    served = project.exec(
        "jupyter notebook --no-browser --port 8899 --ServerApp.token=t "
        "> /tmp/nb.log 2>&1 & pid=$!; "
        "for i in $(seq 120); do "
        "curl -sf http://127.0.0.1:8899/api/status?token=t && break; sleep 0.5; done; "
        "status=$?; kill $pid; cat /tmp/nb.log >&2; exit $status",
        check=False,
        timeout=120,
    )
    assert served.returncode == 0, served.stderr[-3000:]


def test_runs_and_data_are_writable_by_the_container_user(project):
    for name in ("runs", "data"):
        host = os.path.join(project.dir, name)
        assert os.path.isdir(host), f"{name}/ was not created on the host"
        assert os.stat(host).st_uid == UID, f"{name}/ is not the container user's"
        project.exec(f"touch /workspace/{name}/written-by-lab && id -u")
        assert os.stat(os.path.join(host, "written-by-lab")).st_uid == UID
    logs = project.compose("logs lab").stdout
    assert "WARNING" not in logs, logs


def _execute_in_kernel(project, path):
    """Runs every code cell of `path` in a kernel of the container's
    JupyterLab, at the small sizes of tests/notebooks/parameters.py (what
    this shows is that each cell runs in the container's kernel); returns the
    notebook with its outputs."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    kernel = Kernel(project, f"notebooks/{path.name}")
    try:
        for cell in notebook["cells"]:
            if cell["cell_type"] != "code":
                continue
            count, outputs = kernel.execute("".join(cell["source"]), timeout=900)
            cell["execution_count"], cell["outputs"] = count, outputs
            if "parameters" in cell["metadata"].get("tags", ()):
                smaller = SMALL_PARAMETERS.get(path.stem)
                if smaller:
                    kernel.execute(smaller)
    finally:
        kernel.close()
    return notebook


@pytest.fixture(scope="module")
def notebook_runs(project):
    """The notebooks run three at a time, each in its own kernel, as a user
    with several notebooks open would: much of each run is single-threaded
    tracing and compiling, so three kernels keep the two cores busier than
    one (measured: 144 s one after the other, 93 s two at a time, 85 s three
    at a time). They start after the token checks: JupyterLab's /api/status
    can answer 500 while kernels are starting."""
    # 03 is the shortest: it waits for the first free kernel.
    order = sorted(NOTEBOOKS, key=lambda path: path.stem.startswith("03"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        runs = {
            path.stem: pool.submit(_execute_in_kernel, project, path) for path in order
        }
        # Side by side, the Keras 3 module starts once both cores are free.
        pool.submit(concurrent.futures.wait, list(runs.values())).add_done_callback(
            lambda _: busy_part_done(STANDIN)
        )
        yield runs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_runs_in_the_container_kernel(project, notebook_runs, path):
    notebook = notebook_runs[path.stem].result(timeout=1800)
    prefix = TENSORBOARD_RUNS.get(path.stem)
    if prefix:

        def listed():
            status, body = project.http("/data/runs", port=project.tensorboard_port)
            return status == 200 and [
                name for name in json.loads(body) if name.startswith(prefix)
            ]

        assert wait_for(
            listed, 120, f"{prefix} in TensorBoard's /data/runs", interval=2
        )
    if path.name.startswith("01"):
        # Saved through the contents API, so the screenshot shows it executed.
        project.api(
            "/api/contents/notebooks/executed_01_quickstart.ipynb",
            method="PUT",
            body={"type": "notebook", "format": "json", "content": notebook},
        )


def test_chromium_shows_notebook_01_executed_in_jupyterlab(project, tmp_path):
    """Set TFNORM_SCREENSHOT_OUT=docs/jupyterlab.png to keep the picture."""
    assert os.access(CHROMIUM, os.X_OK), "chromium is missing (tools/apt-packages.txt)"
    status, _ = project.http(
        "/api/contents/notebooks/executed_01_quickstart.ipynb?content=0",
        headers={"Authorization": f"token {project.token}"},
    )
    assert status == 200, "notebook 01 was not executed and saved first"
    url = (
        f"http://127.0.0.1:{project.lab_port}/lab/tree/notebooks/"
        f"executed_01_quickstart.ipynb?token={project.token}"
    )
    dom, png = jupyterlab_screenshot(url, tmp_path, 1400, 900, 30000, timeout=180)
    assert "jp-Notebook" in dom and "jp-OutputArea-output" in dom
    assert len(png) > 40_000, f"the screenshot looks blank ({len(png)} bytes)"
    target = os.environ.get("TFNORM_SCREENSHOT_OUT")
    if target:
        shutil.copyfile(tmp_path / "jupyterlab.png", os.path.join(REPO, target))


def test_ssh_takes_the_key_and_refuses_passwords_and_root(project):
    login = project.ssh("id -un; pwd; env")
    assert login.returncode == 0, login.stderr
    lines = login.stdout.splitlines()
    assert lines[0] == "tfnorm"
    assert "JUPYTER_TOKEN" not in login.stdout and project.token not in login.stdout
    password = project.ssh(
        "true",
        extra=(
            "-o",
            "PreferredAuthentications=password,keyboard-interactive",
            "-o",
            "PubkeyAuthentication=no",
        ),
    )
    assert password.returncode == 255 and "Permission denied" in password.stderr
    root = project.ssh("true", user="root")
    assert root.returncode == 255 and "Permission denied" in root.stderr


def wait_for_summary(run, note=""):
    """The run's summary.json once a background run on the host has written it."""
    return wait_for(
        lambda: (
            (run / "summary.json").exists()
            and json.loads((run / "summary.json").read_text())
        ),
        600,
        f"runs/{run.name}/summary.json on the host {note}".rstrip(),
        interval=2,
    )


def _readme_ssh_session(project):
    """The README's background-training lines, typed into an SSH login."""
    lines = readme_block("nohup tfnorm train")
    assert lines[0].startswith("ssh "), lines[0]
    typed = "\n".join(line.split(" #", 1)[0] for line in lines[1:]) + "\n"
    return project.ssh(extra=("-T",), input=typed, timeout=120)


def test_readme_background_training_outlives_ssh_and_reaches_tensorboard(project):
    session = _readme_ssh_session(project)
    assert session.returncode == 0, session.stderr
    run = pathlib.Path(project.dir, "runs", "sorted")
    summary = wait_for_summary(run, "(written after the SSH session ended)")
    assert summary["status"] == "completed", summary
    assert (run / "train.log").stat().st_size > 0

    def listed():
        status, body = project.http("/data/runs", port=project.tensorboard_port)
        return status == 200 and [name for name in json.loads(body) if "sorted" in name]

    assert wait_for(listed, 120, "the run in TensorBoard's /data/runs", interval=2)


def test_a_command_on_the_ssh_line_starts_in_the_workspace(project):
    """`ssh host 'cmd'` runs no login shell: bash reads /etc/bash.bashrc,
    whose first lines (the Dockerfile's) move the command to /workspace."""
    probe = project.ssh("pwd; bash -c pwd; stat -c %a /etc/bash.bashrc")
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["/workspace", "/workspace", "644"], (
        probe.stdout + probe.stderr
    )


# The examples that run on TF 2.9 (the keras-hub one needs Keras 3), with the
# flags their docstrings give: the tfnorm one is left uncompiled.
SSH_EXAMPLES = {
    "keras_transformer_classifier": "",
    "tfnorm_transformer_classifier": "--loss sparse_categorical_crossentropy "
    "--from-logits ",
}


@pytest.mark.parametrize("example", sorted(SSH_EXAMPLES))
def test_an_example_trains_from_a_command_on_the_ssh_line(project, example):
    """The README's own-model run, given on the `ssh` line without `cd`:
    the run lands in the host's runs/, where TensorBoard sees it."""
    module = f"examples/{example}.py"
    started = project.ssh(
        f"nohup tfnorm train --model-fn {module}:build_model "
        f"--data-fn {module}:load_data {SSH_EXAMPLES[example]}--epochs 1 "
        f"--steps-per-epoch 10 --histogram-every 5 --logdir runs/{example} "
        f"> runs/{example}.out 2>&1 < /dev/null &"
    )
    assert started.returncode == 0, started.stderr
    run = pathlib.Path(project.dir, "runs", example)
    output = pathlib.Path(project.dir, "runs", f"{example}.out")

    def finished():
        if (run / "summary.json").exists():
            return json.loads((run / "summary.json").read_text())
        # A run refused at start writes no summary: fail at once, with why.
        text = output.read_text() if output.exists() else ""
        assert "error:" not in text, text
        return None

    summary = wait_for(finished, 600, f"runs/{example}/summary.json", interval=2)
    assert summary["status"] == "completed" and summary["final_step"] == 10, summary
    assert list((run / "norms").glob("events.out.*"))


def test_compose_stop_during_a_run_checkpoints_and_exits_zero(project):
    started = project.ssh(
        "cd /workspace && { nohup tfnorm train --task sorted --epochs 200 "
        "--checkpoint-every 20 --logdir runs/stopped --log-file runs/stopped/train.log "
        "> /dev/null 2>&1 < /dev/null & }"
    )
    assert started.returncode == 0, started.stderr
    log = pathlib.Path(project.dir, "runs", "stopped", "train.log")
    wait_for(
        lambda: log.exists() and "step" in log.read_text(),
        300,
        "progress in runs/stopped/train.log",
        interval=1,
    )
    start = time.monotonic()
    project.compose("stop lab", timeout=180)
    took = time.monotonic() - start
    status, exit_code = project.container_state("lab")
    assert status == "exited" and exit_code == 0, (status, exit_code)
    assert took < 120, f"docker compose stop took {took:.0f}s (grace period 2m)"
    summary = json.loads(
        pathlib.Path(project.dir, "runs", "stopped", "summary.json").read_text()
    )
    assert summary["status"] == "terminated", summary
    project.stop_seconds = took


def test_down_and_up_keep_host_keys_caches_and_runs(project):
    project.compose("start lab")
    project.wait_for_token()
    before = wait_for(project.host_key_fingerprints, 60, "sshd's host keys")
    project.exec("echo kept > /var/cache/cuda/marker")
    project.compose("down", timeout=180)
    project.compose("up -d", timeout=600)
    project.wait_for_token()
    after = wait_for(project.host_key_fingerprints, 60, "sshd's host keys")
    assert after == before
    assert project.exec("cat /var/cache/cuda/marker").stdout.strip() == "kept"
    assert project.exec("ls /workspace/runs/sorted/summary.json").returncode == 0


def test_multiworker_profile_trains_and_both_workers_exit_zero(project):
    # One epoch instead of three, set the way .env.example offers.
    with open(os.path.join(project.dir, ".env"), "a", encoding="utf-8") as env:
        env.write("MULTIWORKER_EPOCHS=1\n")
    project.compose(
        "--profile multiworker up --no-log-prefix worker-0 worker-1", timeout=900
    )
    for worker in ("worker-0", "worker-1"):
        status, exit_code = project.container_state(worker)
        assert (status, exit_code) == ("exited", 0), (worker, status, exit_code)
    summary = pathlib.Path(project.dir, "runs", "multiworker", "logs", "summary.json")
    assert json.loads(summary.read_text())["status"] == "completed"
