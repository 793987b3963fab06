"""`pip check` for tfnorm's venv, less the two complaints it is built to have.

`make venv` installs tf-keras and keras-hub with `--no-deps` (see the
Makefile and setup.cfg's extra `hub`): tf-keras 2.21 requires `tensorflow`,
and keras-hub requires tensorflow-text, which requires `tensorflow`; either
would install the full TensorFlow wheel beside `tensorflow-cpu` (the same
`tensorflow/` folder from two distributions). `tensorflow-cpu` provides the
module both need, but pip knows packages by distribution name, so `pip check`
reports exactly these two lines, which this script drops:

    tf-keras X requires tensorflow, which is not installed.
    keras-hub X requires tensorflow-text, which is not installed.

Any other line (a version conflict, another missing package, either of them
present at a wrong version) still fails.

Usage: python tools/pip_check.py (exit status 0 when nothing else is broken).
"""

from __future__ import annotations

import re
import subprocess
import sys

#: The lines `pip check` may print: the two requirements left out on purpose.
EXPECTED = re.compile(
    r"^(tf-keras \S+ requires tensorflow|keras-hub \S+ requires tensorflow-text), "
    r"which is not installed\.$"
)


def remaining_problems(output):
    """The lines of `pip check`'s `output` other than the expected ones."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return [
        line
        for line in lines
        if not EXPECTED.match(line) and line != "No broken requirements found."
    ]


def main():
    result = subprocess.run(
        [sys.executable, "-m", "pip", "check"], capture_output=True, text=True
    )
    problems = remaining_problems(result.stdout)
    if problems or (result.returncode != 0 and not result.stdout.strip()):
        print("\n".join(problems) or result.stderr, file=sys.stderr)
        return 1
    print(
        "pip check: no broken requirements (tf-keras's tensorflow and keras-hub's tensorflow-text left out)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
