#!/bin/sh
# Container health: the web service answers, and sshd (when the entrypoint
# started it) is alive. Exit 0 healthy, 1 unhealthy.
#
#   healthcheck.sh              JupyterLab's /api on $JUPYTER_PORT (no token needed)
#   healthcheck.sh URL          another service, e.g. TensorBoard
set -eu

url=${1:-http://127.0.0.1:${JUPYTER_PORT:-8888}/api}
runtime_dir=${TFNORM_RUNTIME_DIR:-/run/tfnorm}

if ! curl --fail --silent --show-error --max-time 5 --output /dev/null "$url"; then
    echo "unhealthy: no answer from $url" >&2
    exit 1
fi

pid_file=$runtime_dir/sshd.pid
if [ -f "$pid_file" ]; then
    pid=$(cat "$pid_file")
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "unhealthy: sshd (pid $pid from $pid_file) is not running" >&2
        exit 1
    fi
fi
exit 0
