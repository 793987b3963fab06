"""The sshd_config the entrypoint writes: its template, rendered and checked.

`TFNORM_SSHD_TEMPLATE` (a test hook; the image's is `docker/sshd_config.template`)
is read and its placeholders checked before sshd is prepared. The rendered
text is checked line by line against the template, so no setting or template
can add, drop or change a line that keeps login key-only.
"""

from __future__ import annotations

import re
import string

from tfnorm_entrypoint.accounts import current_account
from tfnorm_entrypoint.settings import config_word

# Lines the rendered sshd_config must hold exactly once, whatever the template:
# key-only login for the one user.
REQUIRED_SSHD_LINES = (
    "PubkeyAuthentication yes",
    "PasswordAuthentication no",
    "PermitEmptyPasswords no",
    "KbdInteractiveAuthentication no",
    "ChallengeResponseAuthentication no",
    "PermitRootLogin no",
    "PermitUserEnvironment no",
)
# What the template may use; `host_key_lines` and `setenv_line` fill a whole
# line (or several, or none).
PLACEHOLDERS = (
    "port",
    "listen_address",
    "host_key_lines",
    "pid_file",
    "user",
    "setenv_line",
)


def render_sshd_config(settings, host_keys, session_env):
    """The sshd_config text, checked line by line (see `check_sshd_config`)."""
    template_text = read_sshd_template(settings.sshd_template)
    setenv_line = (
        "SetEnv " + " ".join(f'"{name}={value}"' for name, value in session_env.items())
        if session_env
        else ""
    )
    rendered = string.Template(template_text).substitute(
        port=settings.ssh_port,
        listen_address=settings.ssh_listen_address,
        host_key_lines="\n".join(f"HostKey {path}" for path in host_keys),
        pid_file=settings.sshd_pid_file,
        user=config_word(current_account().pw_name, "the user's name"),
        setenv_line=setenv_line,
    )
    check_sshd_config(rendered, template_text, settings, host_keys, setenv_line)
    return rendered


def read_sshd_template(path):
    """The template's text, if it is UTF-8 and uses only `PLACEHOLDERS`.

    Checked before sshd is prepared, so a bad `TFNORM_SSHD_TEMPLATE` stops
    the entrypoint in one line before anything starts.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        raise SystemExit(
            f"TFNORM_SSHD_TEMPLATE cannot be read ({reason}). Received: {path!r}"
        ) from None
    for match in string.Template.pattern.finditer(text):
        name = match.group("named") or match.group("braced")
        if match.group("invalid") is not None:
            line = text.count("\n", 0, match.start()) + 1
            raise SystemExit(
                f"TFNORM_SSHD_TEMPLATE has a '$' that starts no placeholder on "
                f"line {line} (write '$$' for a '$'). Received: {path!r}"
            )
        if name is not None and name not in PLACEHOLDERS:
            raise SystemExit(
                f"TFNORM_SSHD_TEMPLATE uses the unknown placeholder ${{{name}}} "
                f"(known: {', '.join(PLACEHOLDERS)}). Received: {path!r}"
            )
    return text


def check_sshd_config(rendered, template_text, settings, host_keys, setenv_line):
    """Stops the entrypoint unless `rendered` has exactly the expected lines.

    The settings are checked when read; this is the second line of defence
    against a value (or a template) that adds a line: the line count is the
    template's (its host-key line counted once per key), each line keeps the
    template line's keyword, there is one `ListenAddress` (the setting's) and
    every `REQUIRED_SSHD_LINES` line is there exactly once.
    """
    problem = _sshd_config_problem(
        rendered, template_text, settings, host_keys, setenv_line
    )
    if problem:
        raise SystemExit(
            f"refusing to start sshd: the rendered sshd_config {problem} (a "
            "setting or TFNORM_SSHD_TEMPLATE adds or changes a line)"
        )


def _sshd_config_problem(rendered, template_text, settings, host_keys, setenv_line):
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", rendered):
        return "holds a control character"
    lines = rendered.split("\n")
    expected = []  # the keyword each line must start with ("" for any comment)
    for line in template_text.split("\n"):
        if line.strip() == "${host_key_lines}":
            expected += ["HostKey"] * len(host_keys)
        elif line.strip() == "${setenv_line}":
            expected.append("SetEnv" if setenv_line else "")
        else:
            expected.append(_keyword(line))
    if len(lines) != len(expected):
        return f"has {len(lines)} lines where the template gives {len(expected)}"
    for number, (line, keyword) in enumerate(zip(lines, expected), start=1):
        if _keyword(line) != keyword:
            return f"line {number} starts with {_keyword(line)!r}, not {keyword!r}"
    listen = [line for line in lines if _keyword(line).lower() == "listenaddress"]
    if listen != [f"ListenAddress {settings.ssh_listen_address}"]:
        return f"has {len(listen)} ListenAddress line(s) other than the setting's"
    for required in REQUIRED_SSHD_LINES:
        word = required.split()[0].lower()
        same_keyword = [line for line in lines if _keyword(line).lower() == word]
        if same_keyword != [required]:
            return f"does not have exactly one {required!r} line"
    return None


def _keyword(line):
    """The directive a sshd_config line sets ("" for blank and comment lines)."""
    words = line.replace("=", " ").split()
    return "" if not words or words[0].startswith("#") else words[0]
