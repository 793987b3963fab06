"""The notebooks in `notebooks/` execute, and are committed without outputs.

Each notebook runs top to bottom in a fresh IPython kernel of this
interpreter (`nbclient`) in the `notebooks/` folder of a temporary copy of
the workspace's layout, so nothing it writes (logs, saved models) lands in
the repository; run where it is (in JupyterLab, whose working directory is
the notebook's folder), each file it writes would be in `notebooks/` or, for
TensorBoard logs, in `runs/` beside it, so git must ignore it. A cell that
raises fails the test with the cell's traceback. Execution, at the
notebooks' defaults (01, 03, 04: about a minute together) or at the sizes of
`parameters.SUITE_PARAMETERS`, is part of the `slow` run (`make test-slow`,
run by CI); the container check runs them again, smaller, in the container's
kernel (tests/container).

The notebooks are generated from `tools/notebooks/*.py` by
`tools/make_notebooks.py`; a test checks they are in sync.

Execution in a kernel is tested in the keras3 runtime only (the TF 2.9 root
has no Jupyter). The notebooks of `SUITE_PARAMETERS` also run as plain
scripts, from their sources, in any runtime (`-m slow`: TensorFlow's tracing
and XLA compiling take 30-80 s even at those sizes). The outputs-stripped
check is plain JSON and runs everywhere.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import REPO, RUNTIME
from tests.notebooks.parameters import SUITE_PARAMETERS

NOTEBOOK_DIR = pathlib.Path(REPO) / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
# Their executed copies, for readers (tools/make_notebooks.py --execute).
EXECUTED_DIR = pathlib.Path(REPO) / "docs" / "notebooks"
EXPECTED = (
    "01_quickstart.ipynb",
    "02_pre_vs_post_ln.ipynb",
    "03_tensorboard_norm_monitoring.ipynb",
    "04_multi_gpu.ipynb",
    "05_decoder.ipynb",
)
# Generous: each notebook's defaults aim at under ~2 minutes on 2 CPU cores,
# but the machine is shared (one cell of 02 took 13 min under a load of 10).
CELL_TIMEOUT_S = 1200


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_all_notebooks_are_present():
    assert tuple(path.name for path in NOTEBOOKS) == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_committed_without_outputs(path):
    stale = [
        index
        for index, cell in enumerate(_load(path)["cells"])
        if cell["cell_type"] == "code"
        and (cell.get("outputs") or cell.get("execution_count") is not None)
    ]
    assert not stale, (
        f"{path.name}: code cells {stale} hold outputs or execution counts; "
        "strip them (regenerate with tools/make_notebooks.py, or "
        "`jupyter nbconvert --clear-output --inplace`)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_has_a_parameters_cell_first(path):
    code_cells = [c for c in _load(path)["cells"] if c["cell_type"] == "code"]
    assert code_cells, f"{path.name} has no code cell"
    assert "parameters" in code_cells[0].get("metadata", {}).get("tags", []), (
        f"{path.name}: the first code cell must be tagged `parameters` "
        "(papermill's convention)"
    )


def _make_notebooks():
    pytest.importorskip("nbformat", reason="nbformat (dev extra) is not installed")
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        import make_notebooks
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    return make_notebooks


def test_notebooks_match_their_sources():
    make_notebooks = _make_notebooks()
    for path in NOTEBOOKS:
        source = make_notebooks.SOURCES / (path.stem + ".py")
        assert source.exists(), f"{path.name} has no source {source}"
        assert make_notebooks.build_notebook(source) == path.read_text(
            encoding="utf-8"
        ), (
            f"{path.name} differs from {source.name}: edit the source in "
            "tools/notebooks/ and run `python tools/make_notebooks.py`"
        )


def _cells_without_their_figure(cells):
    """Indices of the code cells that call `plt.show()` but show no image."""
    return [
        index
        for index, cell in enumerate(cells)
        if cell["cell_type"] == "code"
        and "plt.show()" in "".join(cell["source"])
        and not any("image/png" in out.get("data", {}) for out in cell["outputs"])
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_executed_copy_in_docs_is_of_this_notebook_and_ran_cleanly(path):
    executed_path = EXECUTED_DIR / path.name
    regenerate = "regenerate with `python tools/make_notebooks.py --execute`"
    assert executed_path.exists(), (
        f"docs/notebooks/{path.name} is missing: {regenerate}"
    )
    executed, notebook = _load(executed_path), _load(path)
    try:
        import nbformat
    except ImportError:  # the TF 2.9 root: the JSON checks below still run
        pass
    else:
        nbformat.validate(nbformat.from_dict(executed))
    assert [(c["cell_type"], c["source"]) for c in executed["cells"]] == [
        (c["cell_type"], c["source"]) for c in notebook["cells"]
    ], f"docs/notebooks/{path.name} is of an older {path.name}: {regenerate}"
    code = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), (
        f"docs/notebooks/{path.name} was not run top to bottom once: {regenerate}"
    )
    errors = [
        index
        for index, cell in enumerate(code)
        if any(out["output_type"] == "error" for out in cell["outputs"])
    ]
    assert not errors, f"docs/notebooks/{path.name}: code cells {errors} failed"
    blank = _cells_without_their_figure(executed["cells"])
    assert not blank, f"docs/notebooks/{path.name}: cells {blank} show no figure"
    stamp = executed["metadata"].get("tfnorm", {})
    assert stamp.get("command") == "python tools/make_notebooks.py --execute"
    assert stamp.get("runtime", "").startswith("TensorFlow ")


def _execution_skip_reason():
    if RUNTIME != "keras3":
        return (
            "notebook execution is checked in the keras3 runtime only "
            f"(this run is {RUNTIME}; the TF 2.9 root has no Jupyter kernel)"
        )
    try:
        import ipykernel  # noqa: F401
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as error:  # pragma: no cover - dev extra missing
        return f"the dev extra is not installed ({error})"
    return None


@pytest.mark.skipif(
    _execution_skip_reason() is not None, reason=str(_execution_skip_reason())
)
@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes(path, tmp_path):
    import nbclient

    make_notebooks = _make_notebooks()
    notebook_dir_before = sorted(NOTEBOOK_DIR.iterdir())
    try:
        notebook = make_notebooks.execute_notebook(
            path, tmp_path, CELL_TIMEOUT_S, SUITE_PARAMETERS.get(path.stem)
        )
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name} failed:\n{error}", pytrace=False)
    # Every cell that shows a figure produced one, drawn from its results.
    blank = _cells_without_their_figure(notebook.cells)
    assert not blank, f"{path.name}: cells {blank} call plt.show() but show no image"
    # The notebook wrote its files (logs, saved models) into the temporary
    # directory, not next to the committed notebooks.
    assert sorted(NOTEBOOK_DIR.iterdir()) == notebook_dir_before
    # Run in JupyterLab, the notebook writes them in notebooks/ and runs/
    # (in the container, the host's clone): git must ignore every one.
    written = [
        file.relative_to(tmp_path).as_posix()
        for file in sorted(tmp_path.rglob("*"))
        if file.is_file()
    ]
    not_ignored = sorted(set(written) - git_ignored(written))
    assert not not_ignored, (
        f"{path.name} leaves files in notebooks/ that git does not ignore: "
        f"{not_ignored}"
    )


def git_ignored(paths):
    """Those of `paths` (relative to the repository) that .gitignore covers."""
    if not paths:
        return set()
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=REPO,
        input="\n".join(paths) + "\n",
        capture_output=True,
        text=True,
    )
    # Exit status 1: none is ignored; 128: not a git checkout.
    assert result.returncode in (0, 1), result.stderr
    return set(result.stdout.split())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SUITE_PARAMETERS))
def test_notebook_source_runs_as_a_script_in_this_runtime(name, tmp_path):
    """The notebook's cells, from its source in tools/notebooks/ (valid
    Python), run in order in a fresh interpreter of this runtime at the small
    sizes of `SUITE_PARAMETERS`, in `notebooks/` beside `runs/` as in the
    container."""
    source = pathlib.Path(REPO, "tools", "notebooks", name + ".py")
    script = with_parameters(source.read_text(encoding="utf-8"), SUITE_PARAMETERS[name])
    notebook_dir = tmp_path / "notebooks"
    notebook_dir.mkdir()
    environment = dict(
        os.environ,
        MPLBACKEND="Agg",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=notebook_dir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=CELL_TIMEOUT_S,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stderr[-4000:]}"
    written = sorted(
        file.relative_to(tmp_path).as_posix()
        for file in tmp_path.rglob("*")
        if file.is_file()
    )
    assert any(path.startswith("runs/") for path in written), written


def with_parameters(source, parameters):
    """`source` (a notebook's percent-format source) with `parameters` run
    right after its `parameters` cell, as papermill runs them."""
    header = '# %% tags=["parameters"]\n'
    start = source.index(header) + len(header)
    end = source.index("\n# %%", start)
    return source[:end] + "\n" + parameters + source[end:]
