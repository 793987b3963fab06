"""Reruns the commands behind docs/claims.md: every row's first and second run (`make claims`).

Each command of the page is listed here once, by row: a `tfnorm compare`
line (its seeds for the first run and for the second) or a script of
`bench/`. The runner starts them `--jobs` at a time, each in its own
output directory, `OUTPUT/ROW/NAME/first` or `.../second`, and skips one
whose directory already says it finished (`done.json`, with the command,
its exit status and its wall and CPU time), so a stopped rerun goes on
where it stopped. At the end `OUTPUT/times.json` lists every command's
times and the totals; a command that failed is reported, and the others
still run.

With `--jobs 1` (the default) each command has every core, as the page's
figures were made except where its row says otherwise; with more, each
runs on a core of its own with one thread (`taskset`), as row 3's second
round was. The two can differ (the order of a sum depends on the
threads): mostly in the last digits, but a seed at the edge of failing
can end with another held-out loss; the verdicts rest on which seeds
learn and by when, which one thread left as they were (docs/claims.md,
"Rerunning the page"). Row 2's timed benchmarks always run alone, with
every core, whatever `--jobs`.

    python bench/claims.py [--rows 1,3] [--run first|second|both]
        [--jobs N] [--output-dir runs/claims] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
_TF29 = os.path.join(REPO, "tools", "tf29-root.sh")

from bench.lm_pair import ONE_THREAD  # noqa: E402


def _compare(row, name, flags, first, second, runtime="keras3"):
    return {"row": row, "name": name, "kind": "compare", "flags": flags,
            "seeds": {"first": first, "second": second}, "runtime": runtime}  # fmt: skip


def _script(row, name, script, flags="", runtime="keras3", second=None, timed=False):
    """A script of `bench/`; `second`: the flags its second run adds (None:
    run once). A `timed` script measures wall clock: it runs twice, the
    second run the same command, and each run alone on the machine with
    every core (its figures need an idle machine, as in `make bench`)."""
    return {"row": row, "name": name, "kind": "script", "script": script,
            "flags": flags, "runtime": runtime, "second": second,
            "timed": timed}  # fmt: skip


S012, S345 = (0, 1, 2), (3, 4, 5)
S0_4, S5_9 = tuple(range(5)), tuple(range(5, 10))
S0_7, S8_15 = tuple(range(8)), tuple(range(8, 16))
NO_HISTOGRAMS = "--histogram-every 0"


def _row1():
    return [
        _compare(1, "encoder12", "--num-layers 12 --learning-rate 3e-3 --steps 300 "
                 f"--warmup-steps 60 --variants post:60 post pre {NO_HISTOGRAMS}", S012, S345),
        _compare(1, "decoder12", "--task lm --num-layers 12 --steps 150 --warmup-steps 30 "
                 f"--variants post:30 pre:30 --norms layer {NO_HISTOGRAMS}", S012, S345),
        _compare(1, "encoder6-gradient-variance", "--num-layers 6 --steps 300 "
                 "--variants post:60 pre:60 --gradient-variance-batches 16 "
                 f"--gradient-variance-loss 1.0 {NO_HISTOGRAMS}", S0_4, S5_9),
        _compare(1, "decoder6-gradient-variance", "--task lm --num-layers 6 --steps 150 "
                 "--warmup-steps 30 --variants post:30 pre:30 --norms layer "
                 "--gradient-variance-batches 16 --gradient-variance-loss 3.0 "
                 f"{NO_HISTOGRAMS}", S0_4, S5_9),
    ]  # fmt: skip


def _row2():
    timed = [
        _script(2, f"{name}-{runtime}", f"bench/{script}", flags, runtime, timed=True)
        for name, script, flags in (
            ("norms", "norms.py", ""),
            ("decoder", "decoder.py", "--xla"),
            ("norm-share", "norm_share.py", "--xla"),
        )
        for runtime in ("keras3", "tf29")
    ]
    return [
        *timed,
        _script(2, "norm-flops", "bench/norm_flops.py"),
        _compare(
            2, "quality", "--task lm --variants pre:60 --norms layer rms", S012, S345
        ),
    ]


#: Row 3, second round: the epsilons, and the seeds of its second run.
ROW3_EPSILONS = ("1e-8", "1e-7", "1e-6", "1e-5", "1e-4", "1e-3", "1e-2")
ROW3_ENCODER = (
    "--mixed-precision float16 --embedding-std 1e-3 --variants pre --num-layers 12 "
    "--d-model 32 --num-heads 4 --dff 64 --steps 200 --eval-size 128 "
    f"--eval-every 20 {NO_HISTOGRAMS}"
)
ROW3_DECODER = (
    "--task lm --mixed-precision float16 --embedding-std 1e-3 --variants pre --norms layer "
    f"--num-layers 12 --steps 200 --eval-every 20 {NO_HISTOGRAMS}"
)
#: The settings of row 3's second round that its second run (seed 1) repeats.
ROW3_SECOND_DECODER = ("1e-8", "1e-3")
ROW3_SECOND_ENCODER = ("1e-8", "layered")


def _row3():
    commands = []
    first_round = (
        "--mixed-precision float16 --variants pre --num-layers 12 --steps 40 "
        f"--warmup-steps 8 --eval-every 10 {NO_HISTOGRAMS}"
    )
    for statistics in ("compute", "float32"):
        for epsilon in ("1e-8", "1e-6", "1e-5"):
            setting = f"--statistics {statistics} --epsilon {epsilon}"
            commands.append(
                _compare(
                    3,
                    f"encoder40-{statistics}-eps{epsilon}",
                    f"{first_round} {setting} "
                    "--d-model 32 --num-heads 4 --dff 64 --eval-size 128",
                    (0,),
                    (1,),
                )
            )
            commands.append(
                _compare(
                    3,
                    f"decoder40-{statistics}-eps{epsilon}",
                    f"--task lm {first_round} {setting}",
                    (0,),
                    (1,),
                )
            )
    for statistics in ("compute", "float32"):
        for xla, jit_flag in (("xla", ""), ("nojit", " --no-jit")):
            for epsilon in ROW3_EPSILONS + ("layered",):
                if epsilon == "layered":
                    setting = "--epsilon 1e-7 --deep-epsilon 1e-5"
                else:
                    setting = f"--epsilon {epsilon}"
                second = (
                    (1,) if epsilon in ROW3_SECOND_ENCODER and xla == "nojit" else None
                )
                commands.append(
                    _compare(
                        3,
                        f"encoder-{statistics}-eps{epsilon}-{xla}",
                        f"{ROW3_ENCODER} --statistics {statistics} {setting}{jit_flag}",
                        (0,),
                        second,
                    )
                )
            for epsilon in ROW3_EPSILONS:
                second = (1,) if epsilon in ROW3_SECOND_DECODER else None
                commands.append(
                    _compare(
                        3,
                        f"decoder-{statistics}-eps{epsilon}-{xla}",
                        f"{ROW3_DECODER} --statistics {statistics} --epsilon {epsilon}"
                        f"{jit_flag}",
                        (0,),
                        second,
                    )
                )
    return commands  # fmt: skip


def _row4():
    return [
        _compare(4, "encoder12-gamma1.25", "--num-layers 12 --learning-rate 3e-3 "
                 "--steps 300 --warmup-steps 60 --variants post:60 post --gamma-init 1.25 "
                 f"{NO_HISTOGRAMS}", S012, S345),
        _compare(4, "post6-gamma1.0", f"--variants post:30 {NO_HISTOGRAMS}", S0_7, S8_15),
        _compare(4, "post6-gamma1.25", f"--variants post:30 --gamma-init 1.25 {NO_HISTOGRAMS}",
                 S0_7, S8_15),
        _compare(4, "pre24-gamma1.0", f"--num-layers 24 --variants pre {NO_HISTOGRAMS}",
                 S0_7, S8_15),
        _compare(4, "pre24-gamma1.25", "--num-layers 24 --variants pre --gamma-init 1.25 "
                 f"{NO_HISTOGRAMS}", S0_7, S8_15),
    ]  # fmt: skip


def _row5():
    base = (
        "--variable-length --variants pre --num-layers 4 --steps 150 --warmup-steps 30 "
        f"--eval-size 128 --eval-every 25 {NO_HISTOGRAMS}"
    )
    commands = [
        _compare(
            5,
            f"{norm}-batch{size}",
            f"--norm {norm} --batch-size {size} {base}",
            S012,
            S345,
        )
        for norm in ("batch", "layer")
        for size in (1, 2, 4, 32)
    ]
    commands += [
        _compare(
            5,
            f"batch-{padding}-m0.9",
            f"--norm batch --batchnorm-padding {padding} "
            f"--batchnorm-momentum 0.9 --batch-size 32 {base}",
            S0_4,
            S5_9,
        )
        for padding in ("masked", "counted")
    ]
    commands += [
        _compare(
            5,
            "batch-counted-m0.99",
            f"--norm batch --batchnorm-padding counted --batch-size 32 {base}",
            S0_4,
            S5_9,
        ),
        # Keras 2.9's own behaviour: its BatchNormalization takes no mask.
        _compare(
            5,
            "batch-counted-m0.9-tf29",
            "--norm batch --batchnorm-padding counted --batchnorm-momentum 0.9 "
            f"--batch-size 32 {base}",
            S0_4,
            None,
            runtime="tf29",
        ),
        _compare(
            5,
            "layer-batch32-5seeds",
            f"--norm layer --batch-size 32 {base}",
            S0_4,
            S5_9,
        ),
    ]
    return commands  # fmt: skip


def _row6():
    base = f"--num-layers 4 --steps 200 --variants pre {NO_HISTOGRAMS}"
    commands = [
        _compare(
            6,
            f"{norm}-offset{offset}",
            f"{base} --norm {norm} --input-offset {offset}",
            S012,
            S345,
        )
        for norm in ("layer", "rms")
        for offset in (0, 10)
    ]
    commands += [
        _compare(
            6,
            f"{norm}-position{offset}",
            f"{base} --norm {norm} --position-offset {offset}",
            S012,
            S345,
        )
        for norm in ("layer", "rms")
        for offset in (0, 1, 3, 10)
    ]
    return commands  # fmt: skip


def _row7():
    # The 24-block Pre-LN runs are row 4's `pre24-gamma1.0`.
    return [
        _compare(
            7, "warmup", f"--variants post pre post:60 {NO_HISTOGRAMS}", S012, S345
        )
    ]


def _rows8_9():
    return [
        _script(8, "norm-mixing-keras3", "bench/norm_mixing.py", second="--seed 1"),
        _script(
            8,
            "norm-mixing-tf29",
            "bench/norm_mixing.py",
            runtime="tf29",
            second="--seed 1",
        ),
    ]


def _row12():
    base = f"--variants post:30 {NO_HISTOGRAMS}"
    return [
        _compare(12, "none", base, S0_7, S8_15),
        _compare(
            12, "global", f"{base} --clipnorm 1.0 --clip-groups global", S0_7, S8_15
        ),
        _compare(
            12, "separate", f"{base} --clipnorm 1.0 --clip-groups separate", S0_7, S8_15
        ),
    ]


#: Rows whose figures come from another row's commands.
SHARED_ROWS = {9: 8, 10: 3, 11: 3}
#: Rows with no command: not testable here (the page says why).
UNTESTABLE_ROWS = (13,)


def commands():
    """Every command of the page, in row order."""
    return (
        _row1() + _row2() + _row3() + _row4() + _row5() + _row6() + _row7()
        + _rows8_9() + _row12()
    )  # fmt: skip


def jobs(selected_rows, runs):
    """(command, run) pairs to run: a compare command once per run it has
    seeds for; a script as the first run, and as the second when it has one."""
    selected_rows = {SHARED_ROWS.get(row, row) for row in selected_rows}
    chosen = []
    for command in commands():
        if selected_rows and command["row"] not in selected_rows:
            continue
        for run in runs:
            if (
                command["kind"] == "script"
                and run == "second"
                and not (command["second"] or command["timed"])
            ):
                continue
            if command["kind"] == "compare" and command["seeds"][run] is None:
                continue
            chosen.append((command, run))
    return chosen


def argv(command, run, directory, python=sys.executable):
    """The command line of one job, writing into `directory`."""
    # The TF 2.9 root sees the repository only (as its /src, the cwd).
    inside = os.path.relpath(directory, REPO)
    if command["kind"] == "compare":
        seeds = [str(seed) for seed in command["seeds"][run]]
        tail = [*shlex.split(command["flags"]), "--seeds", *seeds, "--output-dir"]
        if command["runtime"] == "tf29":
            return [_TF29, "run", "python", "-m", "tfnorm", "compare", *tail, inside]
        return [python, "-m", "tfnorm", "compare", *tail, directory]
    files = [("--markdown", "table.md"), ("--json", "figures.json")]
    if command["runtime"] == "tf29":
        # Files outside the repository stay in the log.
        outputs = (
            []
            if inside.startswith("..")
            else [
                part
                for flag, name in files
                for part in (flag, os.path.join(inside, name))
            ]
        )
        script = [command["script"], *_script_flags(command, run), *outputs]
        return [_TF29, "run", "python", *script]
    outputs = [
        part for flag, name in files for part in (flag, os.path.join(directory, name))
    ]
    return [python, command["script"], *_script_flags(command, run), *outputs]


def _script_flags(command, run):
    second = command["second"] if run == "second" else None
    flags = command["flags"] + (f" {second}" if second else "")
    return shlex.split(flags)


def exit_code(status):
    """A `wait` status as `subprocess` reports it (negative: the signal)."""
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


def job_directory(output_dir, command, run):
    return os.path.join(output_dir, str(command["row"]), command["name"], run)


def _start(line, directory, core):
    os.makedirs(directory, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    if core is not None:
        env.update(ONE_THREAD)
        line = ["taskset", "-c", str(core), *line]
    log = open(os.path.join(directory, "log.txt"), "w", encoding="utf-8")
    process = subprocess.Popen(
        line, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    log.close()
    return process


def _alone(command):
    return command["kind"] == "script" and command.get("timed", False)


def run_jobs(pending, output_dir, jobs_at_once, python=sys.executable):
    """Runs `pending` (command, run) pairs, `jobs_at_once` at a time (a timed
    script alone, unpinned); returns one record per job (skipped ones
    included, from their `done.json`)."""
    records, running = [], {}
    cores = (
        sorted(os.sched_getaffinity(0))[:jobs_at_once] if jobs_at_once > 1 else [None]
    )
    queue = list(pending)
    while queue or running:
        while queue and len(running) < len(cores):
            if any(_alone(job["command"]) for job in running.values()):
                break
            command, run = queue[0]
            directory = job_directory(output_dir, command, run)
            done = os.path.join(directory, "done.json")
            if os.path.exists(done):
                queue.pop(0)
                with open(done, encoding="utf-8") as handle:
                    records.append({**json.load(handle), "skipped": True})
                continue
            if _alone(command) and running:
                break  # it waits for the machine to empty
            queue.pop(0)
            core = (
                None
                if _alone(command)
                else next(
                    c for c in cores if c not in {r["core"] for r in running.values()}
                )
            )
            line = argv(command, run, directory, python)
            process = _start(line, directory, core)
            running[process.pid] = {"process": process, "core": core, "line": line,
                                    "command": command, "run": run,
                                    "directory": directory, "start": time.time()}  # fmt: skip
        if not running:
            break
        pid, status, usage = os.wait4(-1, 0)
        job = running.pop(pid, None)
        if job is None:
            continue
        record = {
            "row": job["command"]["row"],
            "name": job["command"]["name"],
            "run": job["run"],
            "command": shlex.join(job["line"]),
            "returncode": exit_code(status),
            "wall_s": round(time.time() - job["start"], 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        }
        job["process"].returncode = record["returncode"]
        if record["returncode"] == 0:
            with open(
                os.path.join(job["directory"], "done.json"), "w", encoding="utf-8"
            ) as h:
                json.dump(record, h, indent=2)
        records.append(record)
        state = (
            "ok" if record["returncode"] == 0 else f"FAILED ({record['returncode']})"
        )
        print(f"row {record['row']} {record['name']} ({record['run']}): {state}, "
              f"{record['wall_s']:.0f} s wall, {record['cpu_s']:.0f} CPU-s", flush=True)  # fmt: skip
    return records


def problem(args):
    """Why the run cannot start (one line naming the flag), or None."""
    known = {command["row"] for command in commands()} | set(SHARED_ROWS)
    untestable = sorted(set(args.rows) & set(UNTESTABLE_ROWS))
    if untestable:
        return (
            f"--rows: row {untestable[0]} has no command (not testable here: the "
            f"page says why). Received: rows={args.rows}"
        )
    unknown = sorted(set(args.rows) - known)
    if unknown:
        return f"--rows: no row {unknown[0]} on the page (rows {sorted(known)}). Received: rows={args.rows}"
    if args.jobs < 1 or args.jobs > len(os.sched_getaffinity(0)):
        return (f"--jobs must be 1 to the {len(os.sched_getaffinity(0))} cores this "
                f"process may use. Received: jobs={args.jobs}")  # fmt: skip
    if args.jobs > 1 and shutil.which("taskset") is None:
        return "--jobs above 1 pins each job to a core with taskset (util-linux), not found"
    return None


def _rows(text):
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--rows takes row numbers separated by commas. Received: rows={text!r}"
        ) from None


def main(argv_=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=_rows, default=[], help="e.g. 1,3 (default: every row)"
    )
    parser.add_argument("--run", choices=("first", "second", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--output-dir", default=os.path.join("runs", "claims"))
    parser.add_argument("--dry-run", action="store_true", help="list the commands only")
    args = parser.parse_args(argv_)
    args.output_dir = os.path.abspath(args.output_dir)
    error = problem(args)
    if error:
        print(f"claims: {error}", file=sys.stderr)
        return 2
    runs = ("first", "second") if args.run == "both" else (args.run,)
    pending = jobs(set(args.rows), runs)
    outside = os.path.relpath(args.output_dir, REPO).startswith("..")
    if outside and any(
        c["kind"] == "compare" and c["runtime"] == "tf29" for c, _ in pending
    ):
        print(
            "claims: --output-dir must be inside the repository for the TF 2.9 "
            "runs (the TF 2.9 root sees only the repository), or choose --rows "
            f"without them. Received: output_dir={args.output_dir}",
            file=sys.stderr,
        )
        return 2
    if args.dry_run:
        for command, run in pending:
            directory = job_directory(args.output_dir, command, run)
            print(f"# row {command['row']}, {command['name']}, {run} run")
            print(shlex.join(argv(command, run, directory, "python")))
        print(f"# {len(pending)} commands")
        return 0
    records = run_jobs(pending, args.output_dir, args.jobs)
    failed = [r for r in records if r["returncode"] != 0]
    summary = {
        "jobs": records,
        "wall_s": round(sum(r["wall_s"] for r in records), 1),
        "cpu_s": round(sum(r["cpu_s"] for r in records), 1),
        "failed": len(failed),
    }
    os.makedirs(args.output_dir, exist_ok=True)
    with open(
        os.path.join(args.output_dir, "times.json"), "w", encoding="utf-8"
    ) as handle:
        json.dump(summary, handle, indent=2)
    print(f"{len(records)} commands, {summary['cpu_s'] / 3600:.2f} CPU-hours, "
          f"{len(failed)} failed; times in {args.output_dir}/times.json")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
