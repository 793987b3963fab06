#!/usr/bin/env bash
# Builds the stand-ins for TensorFlow's GPU Jupyter images that
# `make test-container` uses as BASE_IMAGE (the real ones cannot be pulled
# here). Run inside tools/container/engine.sh. Each starts from a Debian root
# made with debootstrap and imported as an image; Podman's layer cache makes a
# second run nearly free.
#
#   tools/container/build-standins.sh [tf29] [tf216]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log() { printf 'standins: %s\n' "$*" >&2; }

debian_root() {  # debian_root SUITE: prints the image name of a minbase root
    local suite=$1 image=localhost/tfnorm-test/debian:$1
    if ! podman image exists "$image"; then
        log "debootstrap $suite (about a minute)"
        debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
            "$suite" "$work/$suite" "$mirror" >"$work/$suite.log" 2>&1 ||
            { cat "$work/$suite.log" >&2; exit 1; }
        tar -C "$work/$suite" -c . | podman import --quiet - "$image" >/dev/null
        rm -rf "${work:?}/$suite"
    fi
    echo "$image"
}

standin() {  # standin DIR SUITE TAG
    local dir=$here/$1 context=$work/$1 image=localhost/tfnorm-test/tensorflow:$3
    local base
    base=$(debian_root "$2")
    mkdir -p "$context"
    cp "$dir/Dockerfile" "$dir/requirements.txt" "$context/"
    cp /etc/ssl/certs/ca-certificates.crt "$context/"
    log "building $image"
    podman build --quiet --format docker --build-arg "DEBIAN_ROOT=$base" \
        -t "$image" "$context" >/dev/null
    echo "$image"
}

for name in "${@:-tf29 tf216}"; do
    for one in $name; do
        case $one in
        tf29) standin tf29-standin bullseye 2.9.0-gpu-jupyter ;;
        tf216) standin tf216-standin bookworm 2.16.1-gpu-jupyter ;;
        *) log "unknown stand-in: $one (tf29, tf216)"; exit 2 ;;
        esac
    done
done
