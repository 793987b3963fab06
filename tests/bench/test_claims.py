"""`bench/claims.py` (`make claims`): the page's commands are ones `tfnorm
compare` accepts, and the runner runs, times, resumes and reports them."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from bench import claims
from tfnorm._keras import IS_KERAS_3
from tfnorm.cli.flags import given_settings
from tfnorm.cli.main import build_parser
from tfnorm.experiments.compare_settings import CompareConfig


def _compare_config(command, run):
    line = claims.argv(command, run, "out")
    args = build_parser().parse_args(line[line.index("compare") :])
    return CompareConfig.from_dict(given_settings(args, CompareConfig)).resolve()


def test_every_compare_command_of_the_page_is_accepted_by_tfnorm_compare():
    # Each in the runtime it runs in (Keras 2.9 refuses masked padding, which
    # the keras3 commands of row 5 ask for); in the other, its flags parse.
    here = "keras3" if IS_KERAS_3 else "tf29"
    checked = 0
    for command, run in claims.jobs(set(), ("first", "second")):
        if command["kind"] != "compare":
            continue
        if command["runtime"] != here:
            line = claims.argv(command, run, "out")
            build_parser().parse_args(line[line.index("compare") :])
            continue
        config = _compare_config(command, run)
        assert list(config.seeds) == list(command["seeds"][run])
        checked += 1
    assert checked > (100 if IS_KERAS_3 else 0)


def test_every_row_of_the_page_has_a_command():
    rows = {command["row"] for command in claims.commands()}
    shared = set(claims.SHARED_ROWS)
    assert rows | shared | set(claims.UNTESTABLE_ROWS) == set(range(1, 14))
    assert not rows & shared and set(claims.SHARED_ROWS.values()) <= rows
    names = [(c["row"], c["name"]) for c in claims.commands()]
    assert len(names) == len(set(names))  # one output directory each


def test_row_3_sweeps_every_epsilon_in_both_statistics_and_compile_modes():
    row3 = [c for c in claims.commands() if c["row"] == 3]
    decoder = [c for c in row3 if c["name"].startswith("decoder-")]
    encoder = [c for c in row3 if c["name"].startswith("encoder-")]
    assert len(decoder) == 2 * 2 * len(claims.ROW3_EPSILONS)
    assert len(encoder) == 2 * 2 * (len(claims.ROW3_EPSILONS) + 1)  # + layered
    layered = _compare_config(
        next(c for c in encoder if "layered" in c["name"]), "first"
    )
    assert (layered.epsilon, layered.deep_epsilon) == (1e-7, 1e-5)
    assert all(_compare_config(c, "first").steps == 200 for c in decoder + encoder)


def _script(tmp_path, name, exit_code):
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import json, sys\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "json.dump({'ran': True}, open(path, 'w'))\n"
        f"sys.exit({exit_code})\n"
    )
    return {"row": 1, "name": name, "kind": "script", "script": str(script),
            "flags": "", "runtime": "keras3", "second": None}  # fmt: skip


def test_the_runner_times_each_job_reports_a_failure_and_resumes(tmp_path, capsys):
    good, bad = _script(tmp_path, "good", 0), _script(tmp_path, "bad", 3)
    output = tmp_path / "out"
    jobs = [(good, "first"), (bad, "first")]
    records = claims.run_jobs(
        jobs, str(output), 2 if len(os.sched_getaffinity(0)) > 1 else 1
    )
    by_name = {r["name"]: r for r in records}
    assert by_name["good"]["returncode"] == 0 and by_name["bad"]["returncode"] == 3
    assert by_name["good"]["wall_s"] >= 0 and by_name["good"]["cpu_s"] >= 0
    good_dir = output / "1" / "good" / "first"
    assert json.loads((good_dir / "figures.json").read_text()) == {"ran": True}
    assert (good_dir / "done.json").exists()
    assert not (output / "1" / "bad" / "first" / "done.json").exists()
    assert "FAILED (3)" in capsys.readouterr().out

    # A rerun skips what finished and runs again what failed.
    again = claims.run_jobs(jobs, str(output), 1)
    assert {r["name"]: r.get("skipped", False) for r in again} == {
        "good": True,
        "bad": False,
    }


def _timed_script(tmp_path, name, timed):
    """A script that records when it ran and which cores it could use."""
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import json, os, sys, time\n"
        "start = time.time()\n"
        "time.sleep(0.5)\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        "cores = len(os.sched_getaffinity(0))\n"
        "json.dump({'start': start, 'end': time.time(), 'cores': cores}, open(path, 'w'))\n"
    )
    return {"row": 2, "name": name, "kind": "script", "script": str(script),
            "flags": "", "runtime": "keras3", "second": None, "timed": timed}  # fmt: skip


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_timed_benchmark_runs_alone_with_every_core(tmp_path):
    before, timed, after = (
        _timed_script(tmp_path, "before", False),
        _timed_script(tmp_path, "timed", True),
        _timed_script(tmp_path, "after", False),
    )
    output = tmp_path / "out"
    claims.run_jobs([(c, "first") for c in (before, timed, after)], str(output), 2)
    ran = {
        name: json.loads((output / "2" / name / "first" / "figures.json").read_text())
        for name in ("before", "timed", "after")
    }
    assert ran["before"]["end"] <= ran["timed"]["start"]
    assert ran["timed"]["end"] <= ran["after"]["start"]
    assert ran["timed"]["cores"] == len(os.sched_getaffinity(0))
    assert ran["before"]["cores"] == ran["after"]["cores"] == 1


def test_row_2s_timed_benchmarks_run_twice_and_the_rest_once():
    row2 = claims.jobs({2}, ("first", "second"))
    runs = {}
    for command, run in row2:
        runs.setdefault(command["name"], []).append(run)
    timed = [c["name"] for c, _ in row2 if c.get("timed")]
    assert len(set(timed)) == 6
    assert all(runs[name] == ["first", "second"] for name in timed)
    assert runs["norm-flops"] == ["first"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--rows", "14"], r"--rows: no row 14 on the page"),
        (["--rows", "13"], r"--rows: row 13 has no command \(not testable here"),
        (["--jobs", "0"], r"--jobs must be 1 to the"),
    ],
)
def test_bad_values_are_one_line_naming_the_flag(flags, message, capsys):
    assert claims.main(flags + ["--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert re.search(message, err)


def test_tf29_runs_need_an_output_dir_the_tf29_root_sees(tmp_path, capsys):
    flags = ["--rows", "5", "--dry-run", "--output-dir", str(tmp_path)]
    assert claims.main(flags) == 2
    assert "--output-dir must be inside the repository" in capsys.readouterr().err
    assert claims.main(["--rows", "7", "--dry-run", "--output-dir", str(tmp_path)]) == 0


def test_a_shared_row_selects_the_commands_it_reads():
    row10 = claims.jobs({10}, ("first",))
    assert row10 == claims.jobs({3}, ("first",)) and row10


def test_the_dry_run_lists_every_command_once(capsys):
    assert claims.main(["--rows", "7", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "--variants post pre post:60 --histogram-every 0 --seeds 0 1 2" in out
    assert "--seeds 3 4 5" in out
    assert out.strip().endswith("# 2 commands")
    assert sys.executable not in out  # printed for a reader: `python`
