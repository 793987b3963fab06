"""docker/tfnorm_entrypoint/ssh.py: keys, host keys, the session env, and a real
OpenSSH client logging in to the entrypoint's sshd."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import pytest
from tfnorm_entrypoint.settings import Settings
from tfnorm_entrypoint.ssh import (
    ensure_host_keys,
    read_authorized_keys,
    session_environment,
    start_sshd,
)

from tests.docker.conftest import MALFORMED_KEY_LINE
from tests.docker.harness import FAKE_LD_LIBRARY_PATH, SSHD, require_tool, ssh

# --- keys and configuration (no services) -------------------------------------


@pytest.fixture(scope="module")
def ssh_keygen():
    return require_tool("ssh-keygen", "install openssh-client (tools/apt-packages.txt)")


@pytest.fixture(scope="module")
def public_keys(ssh_keygen, tmp_path_factory):
    """Two real public keys as `key-type base64-key`, without a comment."""
    folder = tmp_path_factory.mktemp("client-keys")
    keys = []
    for name in ("one", "two"):
        path = str(folder / name)
        subprocess.run(
            [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", path],
            check=True,
        )
        with open(path + ".pub") as handle:
            keys.append(" ".join(handle.read().split()[:2]))
    return keys


def test_session_environment_keeps_tf_and_cuda_settings_and_drops_secrets():
    environ = {
        "PATH": "/usr/local/bin:/usr/bin",
        "LD_LIBRARY_PATH": FAKE_LD_LIBRARY_PATH,
        "CUDA_CACHE_PATH": "/var/cache/cuda",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "TF_CONFIG": '{"cluster": {}}',  # quotes cannot pass through SetEnv
        "TF_NEWLINE": "a\nPasswordAuthentication yes",  # nor a new line
        "TF_X\nPasswordAuthentication yes": "1",  # nor a name that is not one
        "JUPYTER_TOKEN": "secret-token",
        "TF_API_TOKEN": "another-secret",
        "SSH_AUTHORIZED_KEYS": "ssh-ed25519 AAAA",
        "HOSTNAME": "box",
        "MY_VAR": "x",
    }
    selected = session_environment(environ, extra_names=["MY_VAR"])
    assert selected == {
        "CUDA_CACHE_PATH": "/var/cache/cuda",
        "LD_LIBRARY_PATH": FAKE_LD_LIBRARY_PATH,
        "MY_VAR": "x",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "PATH": "/usr/local/bin:/usr/bin",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
    }


def test_a_passed_through_value_that_is_not_utf8_is_skipped_in_one_line(capsys):
    # Bytes 0xe9 and 0xff from a Latin-1 shell, as Python reads the environment.
    environ = {"TF_LATIN1": "caf\udce9", "CUDA_X": "\udcff", "TF_OK": "1"}
    assert session_environment(environ) == {"TF_OK": "1"}
    log = capsys.readouterr().err.splitlines()
    assert log == [
        "[tfnorm-entrypoint] not passing CUDA_X to SSH sessions: its value is not "
        "UTF-8 text",
        "[tfnorm-entrypoint] not passing TF_LATIN1 to SSH sessions: its value is "
        "not UTF-8 text",
    ]


def test_authorized_keys_come_from_the_file_and_the_variable(public_keys, tmp_path):
    one, two = public_keys
    mounted = tmp_path / "authorized_keys"
    mounted.write_text(f"# laptop\n{one} me@laptop\n\n")
    settings = Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(mounted),
            "SSH_AUTHORIZED_KEYS": f"{two} ci\\n{one} me@laptop",
        }
    )
    assert read_authorized_keys(settings) == ([f"{one} me@laptop", f"{two} ci"], 0)
    mounted.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    with pytest.raises(SystemExit, match="public key"):
        read_authorized_keys(settings)


def test_malformed_key_lines_are_named_by_line_number_and_skipped(
    public_keys, tmp_path, capsys
):
    one, two = public_keys
    mounted = tmp_path / "authorized_keys"
    lines = [
        "# laptop",
        f"{one} me@laptop",
        "ssh-ed25519 AAAAnot-a-key me@laptop",
        "",
        f'from="10.0.0.0/8",no-pty {two} ci',
        "half a paste",
    ]
    mounted.write_text("\n".join(lines) + "\n")
    settings = Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(mounted),
            "SSH_AUTHORIZED_KEYS": f"garbage\\n{one} me@laptop",
        }
    )
    keys, rejected = read_authorized_keys(settings)
    assert keys == [lines[1], lines[4]] and rejected == 3
    log = capsys.readouterr().err
    skipped = [line for line in log.splitlines() if "skipped" in line]
    assert len(skipped) == 3, log
    assert f"{mounted} line 3 is not a valid public key" in skipped[0]
    assert f"{mounted} line 6 is not a valid public key" in skipped[1]
    assert "SSH_AUTHORIZED_KEYS line 1 is not a valid public key" in skipped[2]
    # What was pasted is not repeated in the log (it may be anything).
    assert "AAAAnot-a-key" not in log and "half a paste" not in log


def test_a_key_line_that_is_not_utf8_is_named_and_skipped(public_keys, capsys):
    one, _ = public_keys
    settings = Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": "/nonexistent",
            "SSH_AUTHORIZED_KEYS": f"{one} caf\udce9\\n{one} me",
        }
    )
    assert read_authorized_keys(settings) == ([f"{one} me"], 1)
    log = capsys.readouterr().err
    assert (
        log
        == "[tfnorm-entrypoint] SSH_AUTHORIZED_KEYS line 1 is not UTF-8 text; skipped\n"
    )


def test_a_mounted_file_that_is_not_text_is_ignored_with_a_reason(tmp_path, capsys):
    mounted = tmp_path / "authorized_keys"
    mounted.write_bytes(b"\xff\xfe\x00k\x00e\x00y")  # e.g. saved as UTF-16
    settings = Settings({"TFNORM_AUTHORIZED_KEYS_FILE": str(mounted)})
    assert read_authorized_keys(settings) == ([], 0)
    assert f"{mounted} is not a text file of public keys" in capsys.readouterr().err


def test_without_a_public_key_sshd_is_not_started_and_the_log_says_why(
    tmp_path, capsys
):
    settings = Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(tmp_path / "missing"),
            "TFNORM_RUNTIME_DIR": str(tmp_path / "run"),
            "TFNORM_SSHD": "/bin/false",  # would fail loudly if it were run
        }
    )
    assert start_sshd(settings, {"HOME": str(tmp_path)}) is None
    message = capsys.readouterr().err
    assert "SSH is disabled" in message and "SSH_AUTHORIZED_KEYS" in message
    assert not (tmp_path / ".ssh").exists()


def test_with_only_malformed_keys_ssh_is_disabled_and_nothing_is_installed(
    ssh_keygen, tmp_path, capsys
):
    mounted = tmp_path / "authorized_keys"
    mounted.write_text(f"{MALFORMED_KEY_LINE}\nssh-rsa\n")
    settings = Settings(
        {
            "TFNORM_AUTHORIZED_KEYS_FILE": str(mounted),
            "TFNORM_RUNTIME_DIR": str(tmp_path / "run"),
            "TFNORM_SSHD": "/bin/false",
            "TFNORM_SSH_KEYGEN": ssh_keygen,
        }
    )
    assert start_sshd(settings, {"HOME": str(tmp_path)}) is None
    log = capsys.readouterr().err
    assert "SSH is disabled: none of the 2 key line(s) given is a valid" in log
    assert "installed" not in log
    assert not (tmp_path / ".ssh").exists()


def host_key_settings(tmp_path, ssh_keygen):
    return Settings(
        {
            "TFNORM_SSH_HOST_KEY_DIR": str(tmp_path / "k"),
            "TFNORM_SSH_KEYGEN": ssh_keygen,
        }
    )


def read(path):
    with open(path) as handle:
        return handle.read()


def test_host_keys_are_generated_once_and_kept(ssh_keygen, tmp_path):
    settings = host_key_settings(tmp_path, ssh_keygen)
    first = ensure_host_keys(settings)
    contents = [read(path) for path in first]
    assert ensure_host_keys(settings) == first
    assert [read(path) for path in first] == contents
    assert {stat.S_IMODE(os.stat(path).st_mode) for path in first} == {0o600}


def test_a_missing_public_host_key_is_derived_from_the_private_one(
    ssh_keygen, tmp_path, capsys
):
    settings = host_key_settings(tmp_path, ssh_keygen)
    paths = ensure_host_keys(settings)
    private, public = read(paths[0]), read(paths[0] + ".pub").split()[:2]
    os.remove(paths[0] + ".pub")
    capsys.readouterr()
    assert ensure_host_keys(settings) == paths
    assert read(paths[0]) == private
    assert read(paths[0] + ".pub").split()[:2] == public
    log = capsys.readouterr().err
    assert f"{paths[0]}.pub is missing or stale; writing it" in log
    assert "generating" not in log and "WARNING" not in log


def test_a_damaged_host_key_is_replaced_with_a_warning_naming_it(
    ssh_keygen, tmp_path, capsys
):
    settings = host_key_settings(tmp_path, ssh_keygen)
    paths = ensure_host_keys(settings)
    with open(paths[1], "w") as handle:
        handle.write("-----BEGIN OPENSSH PRIVATE KEY-----\ntruncated\n")
    capsys.readouterr()
    assert ensure_host_keys(settings) == paths
    warning = [
        line for line in capsys.readouterr().err.splitlines() if "WARNING" in line
    ]
    assert len(warning) == 1 and f"SSH host key {paths[1]} cannot be read" in warning[0]
    derived = subprocess.run(
        [ssh_keygen, "-y", "-f", paths[1]], capture_output=True, text=True, check=True
    )
    assert derived.stdout.split()[:2] == read(paths[1] + ".pub").split()[:2]
    assert stat.S_IMODE(os.stat(paths[1]).st_mode) == 0o600


def test_a_link_in_place_of_a_host_key_is_refused_and_left_alone(ssh_keygen, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("not a key\n")
    victim.chmod(0o644)
    settings = host_key_settings(tmp_path, ssh_keygen)
    os.makedirs(settings.host_key_dir)
    link = os.path.join(settings.host_key_dir, "ssh_host_ed25519_key")
    os.symlink(victim, link)
    with pytest.raises(SystemExit, match=f"{link} is not a regular file"):
        ensure_host_keys(settings)
    assert victim.read_text() == "not a key\n"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


# --- sshd of the running entrypoint --------------------------------------------


def test_key_login_works_and_passwords_are_refused(lab, client_key):
    result = ssh(lab, client_key, "id -un")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == lab.user.name
    for method in ("password", "keyboard-interactive"):
        refused = ssh(
            lab,
            None,
            "true",
            "-o",
            f"PreferredAuthentications={method}",
            "-o",
            "PubkeyAuthentication=no",
        )
        assert refused.returncode == 255, refused
        assert "Permission denied (publickey)" in refused.stderr


def test_effective_sshd_config_is_key_only(lab):
    config = os.path.join(lab.runtime_dir, "sshd_config")
    run_as_user = dict(user=lab.user.uid, group=lab.user.gid, extra_groups=[])
    checked = subprocess.run(
        [SSHD, "-t", "-f", config], capture_output=True, text=True, **run_as_user
    )
    assert checked.returncode == 0, checked.stderr
    effective = subprocess.run(
        [SSHD, "-T", "-f", config],
        capture_output=True,
        text=True,
        check=True,
        **run_as_user,
    ).stdout.splitlines()
    settings = dict(line.split(" ", 1) for line in effective if " " in line)
    assert settings["passwordauthentication"] == "no"
    assert settings["kbdinteractiveauthentication"] == "no"
    assert settings["permitrootlogin"] == "no"
    assert settings["permituserenvironment"] == "no"
    assert settings["pubkeyauthentication"] == "yes"
    assert settings["port"] == str(lab.ssh_port)
    assert settings["listenaddress"] == f"127.0.0.1:{lab.ssh_port}"
    assert settings["allowusers"] == lab.user.name


def test_authorized_keys_are_installed_private_to_the_user(lab, client_key):
    ssh_dir = os.path.join(lab.user.home, ".ssh")
    installed = os.path.join(ssh_dir, "authorized_keys")
    for path, mode in ((ssh_dir, 0o700), (installed, 0o600)):
        info = os.stat(path)
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (lab.user.uid, mode)
    with open(client_key + ".pub") as handle:
        assert open(installed).read().strip() == handle.read().strip()
    # The mounted file's malformed line 2 is named and skipped, not counted.
    log = lab.read_log()
    assert "authorized_keys line 2 is not a valid public key" in log
    assert "installed 1 authorized key(s)" in log


def test_ssh_sessions_get_the_tf_environment_but_not_the_token(lab, client_key):
    result = ssh(lab, client_key, "env")
    assert result.returncode == 0, result.stderr
    session = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert session["PATH"] == lab.env["PATH"]
    assert session["LD_LIBRARY_PATH"] == FAKE_LD_LIBRARY_PATH
    assert session["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert session["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert "JUPYTER_TOKEN" not in session and lab.token not in result.stdout
    # Login shells source the same values from the profile.d hook's file.
    script = os.path.join(lab.runtime_dir, "session-env.sh")
    sourced = ssh(lab, client_key, f"env -i sh -c '. {script} && env'")
    assert sourced.returncode == 0, sourced.stderr
    assert f"LD_LIBRARY_PATH={FAKE_LD_LIBRARY_PATH}" in sourced.stdout
    assert f"PATH={lab.env['PATH']}" in sourced.stdout
    assert lab.token not in open(script).read()


def test_training_started_over_ssh_outlives_the_session(lab, client_key):
    run = os.path.join(lab.user.workspace, "runs", "ssh-train")
    train = (
        "tfnorm train --task sorted --num-layers 1 --d-model 16 --num-heads 2 "
        "--dff 32 --max-len 8 --num-examples 64 --epochs 1 --steps-per-epoch 3 "
        "--batch-size 8 "
        f"--seed 0 --logdir {run}/logs --checkpoint-dir {run}/checkpoints "
        f"--log-file {run}/train.log"
    )
    command = (
        f"mkdir -p {run} && cd {lab.user.workspace} && "
        f"{{ nohup {train} > {run}/nohup.out 2>&1 < /dev/null & }}"
    )
    started = time.monotonic()
    result = ssh(lab, client_key, command)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 20, "ssh waited for the run to finish"
    summary = os.path.join(run, "logs", "summary.json")
    # The session is over; the run goes on and finishes on its own.
    deadline = time.monotonic() + 240
    while not os.path.exists(summary) and time.monotonic() < deadline:
        time.sleep(1)
    output = open(os.path.join(run, "nohup.out")).read()
    assert os.path.exists(summary), f"no summary.json; the run printed:\n{output}"
    with open(summary) as handle:
        outcome = json.load(handle)
    assert (outcome["status"], outcome["final_step"]) == ("completed", 3), outcome
    checkpoints = os.listdir(os.path.join(run, "checkpoints"))
    assert [name for name in checkpoints if name.endswith(".index")], checkpoints
    events = [
        os.path.join(root, name)
        for root, _dirs, names in os.walk(os.path.join(run, "logs"))
        for name in names
        if name.startswith("events.out.tfevents")
    ]
    assert events, "no TensorBoard event file written"
    assert os.stat(summary).st_uid == lab.user.uid
