"""Writes the notebooks in `notebooks/` from the cell texts in `tools/notebooks/`.

The notebooks are kept as plain Python sources so that they can be reviewed,
linted and diffed; this script turns each source into an `.ipynb` with its
outputs stripped, the first code cell tagged `parameters` (papermill's
convention) and the Python 3 kernel.

Source format (one file per notebook, `tools/notebooks/NN_name.py`): cells are
separated by lines `# %% [markdown]` or `# %%` (the "percent" format Jupytext,
VS Code and Spyder understand); markdown cells have every line prefixed with
`# `. A cell header may carry tags: `# %% tags=["parameters"]`. IPython
magics are written commented out in code cells (`# %load_ext tensorboard`),
as Jupytext does, so the sources stay valid Python; they are uncommented in
the notebook.

Usage:

    .venv/bin/python tools/make_notebooks.py          # write notebooks/*.ipynb
    .venv/bin/python tools/make_notebooks.py --check  # fail if they are stale
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

import nbformat

REPO = pathlib.Path(__file__).resolve().parent.parent
SOURCES = REPO / "tools" / "notebooks"
NOTEBOOKS = REPO / "notebooks"
_HEADER = re.compile(r"^# %%(?P<markdown> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?$")
_COMMENTED_MAGIC = re.compile(r"^(\s*)# (%[a-z])")


def parse_cells(text):
    """Splits a percent-format source into `(kind, source, tags)` triples."""
    cells = []
    kind, tags, lines = None, [], []

    def flush():
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(
                line[2:] if line.startswith("# ") else line.lstrip("#")
                for line in body.split("\n")
            )
        else:
            body = "\n".join(
                _COMMENTED_MAGIC.sub(r"\1\2", line) for line in body.split("\n")
            )
        cells.append((kind, body, tags))

    for line in text.split("\n"):
        match = _HEADER.match(line)
        if match:
            flush()
            kind = "markdown" if match.group("markdown") else "code"
            tags = json.loads(match.group("tags")) if match.group("tags") else []
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def build_notebook(source_path):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {
            "display_name": "Python 3 (ipykernel)",
            "language": "python",
            "name": "python3",
        },
        "language_info": {"name": "python"},
    }
    for index, (kind, body, tags) in enumerate(
        parse_cells(source_path.read_text(encoding="utf-8"))
    ):
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(body)
        else:
            cell = nbformat.v4.new_code_cell(body)
        # Stable ids keep regenerated notebooks byte-identical.
        cell.id = f"{source_path.stem[:2]}-{index:02d}"
        if tags:
            cell.metadata["tags"] = tags
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a notebook differs from what its source generates",
    )
    args = parser.parse_args(argv)
    NOTEBOOKS.mkdir(exist_ok=True)
    stale = []
    for source_path in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        target = NOTEBOOKS / (source_path.stem + ".ipynb")
        text = build_notebook(source_path)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(target.name)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(REPO)}")
    if stale:
        print(f"stale notebooks (run tools/make_notebooks.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
