"""Writes a directory of plain-text files to train a language model on.

The text is the prose of the Python language reference that every CPython
ships for `help()` (`pydoc_data.topics`): real English, about 470 kB,
nothing to download. One UTF-8 `.txt` file per topic, so the directory is
what the README's `tfnorm train --task lm --data DIR` example reads (its
files in sorted order; the held-out share is the end of the last ones).
Deterministic: rerunning writes the same files.

    python examples/data/make_corpus.py runs/corpus
"""

from __future__ import annotations

import os
import sys
from pydoc_data.topics import topics


def main(directory):
    os.makedirs(directory, exist_ok=True)
    for name in sorted(topics):
        path = os.path.join(directory, f"{name}.txt")
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(topics[name])
    print(f"{len(topics)} files in {directory}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "corpus")
