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

Executed copies, with their outputs (tables, plots), are kept in
`docs/notebooks/` for readers who do not run them: `--execute` runs every
notebook (or those named) top to bottom at its defaults in a fresh kernel of
this interpreter, and writes the copy with the command and the runtime that
made it in its metadata (about 10 minutes on 2 CPU cores). Each runs in the
`notebooks/` folder of a temporary copy of the container's workspace layout,
so what it writes to `../runs` (TensorBoard logs, for the container's
TensorBoard service) stays in that temporary folder too.

Usage:

    .venv/bin/python tools/make_notebooks.py            # write notebooks/*.ipynb
    .venv/bin/python tools/make_notebooks.py --check    # fail if they are stale
    .venv/bin/python tools/make_notebooks.py --execute  # write docs/notebooks/
    .venv/bin/python tools/make_notebooks.py --execute 05_decoder  # one of them
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import sys
import tempfile

import nbformat

REPO = pathlib.Path(__file__).resolve().parent.parent
SOURCES = REPO / "tools" / "notebooks"
NOTEBOOKS = REPO / "notebooks"
EXECUTED = REPO / "docs" / "notebooks"
EXECUTE_COMMAND = "python tools/make_notebooks.py --execute"
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


def execute_notebook(path, workdir, timeout, parameters=None):
    """`path` run top to bottom in a fresh kernel of this interpreter, with
    `workdir/notebooks` as its working directory (as `/workspace/notebooks`
    is in the container, beside `/workspace/runs`); returns the executed
    notebook.

    `parameters`, code that sets some of the `parameters` cell's names, runs
    in a cell of its own right after that cell (as papermill does).

    Raises nbclient's `CellExecutionError` (with the cell's traceback) when a
    cell fails.
    """
    import nbclient

    notebook = nbformat.read(str(path), as_version=4)
    if parameters:
        first_code = next(
            index
            for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code"
        )
        injected = nbformat.v4.new_code_cell(parameters)
        injected.id = "injected-parameters"
        notebook.cells.insert(first_code + 1, injected)
    notebook_dir = pathlib.Path(workdir, "notebooks")
    notebook_dir.mkdir(exist_ok=True)
    environment = {
        # The kernelspec runs `python -m ipykernel_launcher`: this
        # interpreter's directory first on PATH keeps it in this environment.
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")])
        ),
    }
    saved = {name: os.environ.get(name) for name in [*environment, "MPLBACKEND"]}
    os.environ.update(environment)
    # Figures must render inline (ipykernel's default backend).
    os.environ.pop("MPLBACKEND", None)
    try:
        nbclient.NotebookClient(
            notebook,
            timeout=timeout,
            kernel_name="python3",
            resources={"metadata": {"path": str(notebook_dir)}},
        ).execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return notebook


def _runtime():
    import tensorflow as tf

    from tfnorm._keras import keras

    return (
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, "
        f"Python {platform.python_version()}"
    )


def _without_tensorflow_log(outputs):
    """`outputs` less TensorFlow's C++ start-up lines, which TF 2.21 prints
    while loading, before it reads TF_CPP_MIN_LOG_LEVEL: the lines `tfnorm`
    commands leave out too. Everything else a cell printed is kept."""
    from tfnorm.cli.main import is_hidden_log_line

    kept = []
    for output in outputs:
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            lines = output.text.splitlines(keepends=True)
            text = "".join(
                line for line in lines if not is_hidden_log_line(line.encode())
            )
            if not text:
                continue
            output.text = text
        kept.append(output)
    return kept


def write_executed(names=(), timeout=1200):
    """Runs every notebook (or those whose stem is in `names`) and writes
    its executed copy to `docs/notebooks/`."""
    EXECUTED.mkdir(parents=True, exist_ok=True)
    runtime = _runtime()
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    unknown = sorted(set(names) - {path.stem for path in paths})
    if unknown:
        raise SystemExit(f"no notebook named {', '.join(unknown)} in notebooks/")
    for path in paths:
        if names and path.stem not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="notebook-") as workdir:
            notebook = execute_notebook(path, workdir, timeout)
        for cell in notebook.cells:
            # Timestamps only: they would change every copy on every run.
            cell.metadata.pop("execution", None)
            if cell.cell_type == "code":
                cell.outputs = _without_tensorflow_log(cell.outputs)
        notebook.metadata["tfnorm"] = {"command": EXECUTE_COMMAND, "runtime": runtime}
        target = EXECUTED / path.name
        nbformat.write(notebook, str(target))
        print(f"wrote {target.relative_to(REPO)} ({runtime})", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if a notebook differs from what its source generates",
    )
    parser.add_argument(
        "--execute",
        nargs="*",
        metavar="NAME",
        help="run every notebook (or those named, e.g. 05_decoder) and write "
        "its executed copy to docs/notebooks/",
    )
    args = parser.parse_args(argv)
    if args.execute is not None:
        from tfnorm.cli.main import quiet_tensorflow

        quiet_tensorflow()  # this process's import of TensorFlow, and the kernels'
        write_executed(args.execute)
        return 0
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
