"""The modules of the container's entrypoint (`docker/entrypoint.py` runs them).

- `settings`: every environment setting, read and checked before anything starts;
- `preflight`: the workspace and programs the services need, checked before they start;
- `accounts`: the workload user, what a root start prepares, the children's environment;
- `files`: writes and mode changes that never follow a symbolic link;
- `ssh`: authorized keys, host keys, the session environment and sshd;
- `sshd_config`: the sshd_config template, rendered and checked line by line;
- `jupyter`: the token, JupyterLab's config and server;
- `supervisor`: watching the services, forwarding signals, stopping everything;
- `log`: the entrypoint's log lines.

Python 3.8 compatible (the 2.9 image's Python); standard library only.
"""
