"""The entrypoint's log: one prefixed line per event, on stderr (the container log)."""

from __future__ import annotations

import sys


def log(message):
    sys.stderr.write(f"[tfnorm-entrypoint] {message}\n")
    sys.stderr.flush()
