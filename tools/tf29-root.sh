#!/usr/bin/env bash
# The `tf29` test runtime: real TensorFlow 2.9.3 + Keras 2.9 under Python 3.9
# in a Debian bullseye root made with debootstrap.
#
#   tools/tf29-root.sh ensure        build the root (or update its packages)
#   tools/tf29-root.sh run CMD...    run CMD in the repo (mounted at /src)
#
# The root is cached outside the clone ($TFNORM_CACHE, default
# ~/.cache/tfnorm) so later runs reuse it; it is rebuilt when missing.
# Everything mounted is unmounted on exit, even when CMD fails; each run has
# its own mount namespace, so several runs may share the root at once.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${TFNORM_CACHE:-$HOME/.cache/tfnorm}
root=$cache/tf29-root
requirements=$repo/tools/tf29-requirements.txt
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
mounted=()

log() { printf 'tf29-root: %s\n' "$*" >&2; }

unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[i]}" 2>/dev/null || true
    done
    mounted=()
}
trap unmount_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bind() {  # bind SOURCE TARGET
    mkdir -p "$2"
    mount --bind "$1" "$2"
    mounted+=("$2")
}

mount_system() {
    mkdir -p "$root/proc" "$root/sys" "$root/dev"
    mount -t proc proc "$root/proc"
    mounted+=("$root/proc")
    bind /sys "$root/sys"
    bind /dev "$root/dev"
    # pip inside the root must trust the same CA bundle as this machine.
    cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

in_root() {  # run a command in the root with a clean environment
    chroot "$root" /usr/bin/env -i \
        PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
        HOME=/root LANG=C.UTF-8 \
        PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180 \
        TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1 \
        "$@"
}

build_root() {
    command -v debootstrap >/dev/null || {
        log "debootstrap is missing: apt-get install debootstrap"
        exit 1
    }
    log "building a bullseye root in $root (about a minute)"
    rm -rf "$root.partial"
    mkdir -p "$cache"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        bullseye "$root.partial" "$mirror" >&2
    rm -rf "$root"
    mv "$root.partial" "$root"
}

ensure() {
    [ -x "$root/usr/bin/python3" ] || build_root
    local want have=""
    want=$(sha256sum "$requirements" | cut -d' ' -f1)
    [ -f "$root/.tfnorm-requirements" ] && have=$(cat "$root/.tfnorm-requirements")
    if [ "$want" != "$have" ] || [ ! -x "$root/opt/venv/bin/python" ]; then
        log "installing TensorFlow 2.9.3 and test requirements into the root"
        mount_system
        cp "$requirements" "$root/tmp/requirements.txt"
        in_root /usr/bin/python3 -m venv /opt/venv
        in_root /opt/venv/bin/pip install -q --upgrade "pip<25"
        in_root /opt/venv/bin/pip install -q -r /tmp/requirements.txt
        echo "$want" >"$root/.tfnorm-requirements"
        unmount_all
    fi
}

run() {
    # Building or updating the root happens under a lock; the run itself
    # does not need one: it gets a private mount namespace, so concurrent
    # runs do not see each other's mounts, and the kernel drops every mount
    # made in it when the run ends, however it ends (even on SIGKILL).
    (
        exec 9>"$cache/tf29-root.lock"
        flock 9
        ensure
    )
    exec unshare --mount --propagation private "$0" _run_in_namespace "$@"
}

run_in_namespace() {
    mount_system
    bind "$repo" "$root/src"
    # A non-editable copy would shadow /src; an editable install puts the
    # `tfnorm` console script on PATH and imports from /src. It writes into
    # the root's venv, hence the lock.
    (
        exec 9>"$cache/tf29-root.lock"
        flock 9
        in_root /bin/sh -c 'cd /src && pip install -q --no-deps --no-build-isolation -e . >/dev/null'
    )
    in_root /bin/sh -c 'cd /src && exec "$@"' run "$@"
}

case "${1:-}" in
    ensure)
        mkdir -p "$cache"
        exec 9>"$cache/tf29-root.lock"
        flock 9
        ensure
        ;;
    run)
        shift
        mkdir -p "$cache"
        run "$@"
        ;;
    _run_in_namespace)
        shift
        run_in_namespace "$@"
        ;;
    *)
        echo "usage: $0 ensure | run CMD..." >&2
        exit 2
        ;;
esac
