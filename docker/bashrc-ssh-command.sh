# shellcheck shell=bash
# Put first in /etc/bash.bashrc by the Dockerfile. A command given on the ssh
# line (`ssh host 'cmd'`) runs in `bash -c` and reads no profile; started by
# sshd (its input is a socket), bash reads this file and ~/.bashrc, and
# never BASH_ENV. Such a command then starts in the workspace, as a login does, so
# relative paths (`--logdir runs/...`) land in the mounted runs/ on the host.
# Interactive shells (PS1 set) are left to the profile hook and the rest of
# this file.
if [ -z "${PS1:-}" ] && [ -n "${SSH_CONNECTION:-}" ] &&
    [ -r /etc/profile.d/tfnorm-session-env.sh ]; then
    # shellcheck source=/dev/null
    . /etc/profile.d/tfnorm-session-env.sh
fi
