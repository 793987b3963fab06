# shellcheck shell=sh
# /etc/profile.d hook: login shells over SSH get the container's TF/CUDA
# environment, which the entrypoint writes at start (the token is never in it).
# Non-login commands (`ssh host cmd`) get the same values from sshd's SetEnv,
# and run this from /etc/bash.bashrc (docker/bashrc-ssh-command.sh).
if [ -r /run/tfnorm/session-env.sh ]; then
    # shellcheck source=/dev/null
    . /run/tfnorm/session-env.sh
fi
# An SSH login starts where JupyterLab and TensorBoard see the files: relative
# paths (`--logdir runs/...`) then land in the mounted runs/ on the host, not
# in a home directory that `docker compose down` throws away.
if [ -n "${SSH_CONNECTION:-}" ] && [ "$PWD" = "$HOME" ] &&
    [ -d "${TFNORM_WORKSPACE:-/workspace}" ]; then
    cd "${TFNORM_WORKSPACE:-/workspace}" || true
fi
