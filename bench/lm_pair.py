"""One nanoGPT run and one `tfnorm train` run, started together, each pinned to a core.

Used by `bench/lm_reference.py`. Every line either trainer prints is
time-stamped here as it arrives (both flush a progress line after each
step they log), which gives both step times by one clock and one method.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import threading
import time

from bench import lm_recipe

#: `iter 41: loss 2.5123, time 51.20ms, mfu 0.01%`: the line after update 42.
NANOGPT_STEP = re.compile(r"^iter (\d+): loss \S+, time ([\d.]+)ms")
#: `step 2000: train loss 1.23, val loss 1.45`: nanoGPT's own estimate.
NANOGPT_EVAL = re.compile(r"^step (\d+): train loss (\S+), val loss ([\d.]+)")
#: `[12:00:00] step 40/2000 epoch 1/4 loss ... examples/s 99.8 ...`
TFNORM_STEP = re.compile(r"\] step (\d+)/\d+ epoch .* examples/s ([\d.]+) ")
#: Steps per timed window (tfnorm's --log-every).
WINDOW = 10
#: One thread in every pool either runtime has.
ONE_THREAD = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "PYTHONUNBUFFERED": "1",
}


class Child:
    """A trainer on one core, its output read and time-stamped by a thread."""

    def __init__(self, name, command, core, cwd, env, log_path):
        self.name, self.log_path, self.lines = name, log_path, []
        self.process = subprocess.Popen(
            ["taskset", "-c", str(core), *command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        with open(self.log_path, "w", encoding="utf-8") as log:
            for line in self.process.stdout:
                self.lines.append((time.perf_counter(), line.rstrip("\n")))
                log.write(line)

    def wait(self):
        status = self.process.wait()
        self.thread.join()
        if status != 0:
            tail = "\n".join(line for _, line in self.lines[-15:])
            raise SystemExit(
                f"bench/lm_reference.py: {self.name} exited with status {status} "
                f"(its log: {self.log_path}):\n{tail}"
            )


def window_ms(points, skip, max_steps):
    """Median ms/step over windows of `WINDOW` steps between the times
    progress lines arrived; `points` are (updates done, arrival seconds)."""
    kept = sorted(
        (steps, seconds)
        for steps, seconds in points
        if steps % WINDOW == 0 and skip <= steps <= max_steps
    )
    rates = [
        (later[1] - earlier[1]) / (later[0] - earlier[0])
        for earlier, later in zip(kept, kept[1:])
    ]
    if not rates:
        raise SystemExit(
            f"bench/lm_reference.py: fewer than two progress lines after step {skip}"
        )
    return 1000 * statistics.median(rates)


def nanogpt_figures(child, args):
    points, own, estimate = [], [], None
    for seconds, line in child.lines:
        step = NANOGPT_STEP.match(line)
        if step:
            updates = int(step.group(1)) + 1
            points.append((updates, seconds))
            if args.skip_steps < updates <= args.max_steps:
                own.append(float(step.group(2)))
        found = NANOGPT_EVAL.match(line)
        if found:
            estimate = float(found.group(3))
    return {
        "ms_per_step": window_ms(points, args.skip_steps, args.max_steps),
        "own_ms_per_step": statistics.median(own),
        "own_val_estimate": estimate,
    }


def tfnorm_figures(child, args):
    points, rate = [], None
    for seconds, line in child.lines:
        step = TFNORM_STEP.search(line)
        if step:
            points.append((int(step.group(1)), seconds))
            rate = float(step.group(2))
    return {
        "ms_per_step": window_ms(points, args.skip_steps, args.max_steps),
        # Its examples/s is the mean since the end of the first step.
        "own_ms_per_step": 1000 * lm_recipe.BATCH / rate,
    }


def nanogpt_loss(args, data, out_dir):
    evaluator = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "nanogpt_eval.py"
    )
    found = subprocess.run(
        [
            os.path.join(args.hf_venv, "bin", "python"),
            evaluator,
            args.nanogpt_dir,
            os.path.join(out_dir, "ckpt.pt"),
            os.path.join(data["nanogpt_data"], "val.bin"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(found.stdout.strip().splitlines()[-1])
    if result["iter_num"] != args.max_steps:
        raise SystemExit(
            f"bench/lm_reference.py: nanoGPT's checkpoint is of step "
            f"{result['iter_num']}, not {args.max_steps}"
        )
    return result


def tfnorm_loss(args, logdir):
    with open(os.path.join(logdir, "summary.json"), encoding="utf-8") as handle:
        summary = json.load(handle)
    if summary["final_step"] != args.max_steps:
        raise SystemExit(
            f"bench/lm_reference.py: tfnorm stopped at step {summary['final_step']}"
        )
    return summary["metrics"]["val_loss"]


def nanogpt_workdir(directory, args, data):
    """nanoGPT reads `data/<dataset>/` and `configurator.py` from its working
    directory: links to the shared data and to the checkout's file."""
    os.makedirs(os.path.join(directory, "data"))
    os.symlink(data["nanogpt_data"], os.path.join(directory, "data", lm_recipe.DATASET))
    os.symlink(
        os.path.join(os.path.abspath(args.nanogpt_dir), "configurator.py"),
        os.path.join(directory, "configurator.py"),
    )


def run_pair(args, data, repeat, preset, jit_compile):
    name = f"repeat{repeat}-{preset}-{'xla' if jit_compile else 'graph'}"
    directory = os.path.join(args.workdir, name)
    reference_dir = os.path.join(directory, "nanogpt")
    nanogpt_workdir(reference_dir, args, data)
    out_dir, logdir = (
        os.path.join(reference_dir, "out"),
        os.path.join(directory, "tfnorm"),
    )
    env = {**os.environ, **ONE_THREAD}
    reference_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    ours_env = {**env, "PYTHONPATH": os.pathsep.join(
        [lm_recipe.REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    )}  # fmt: skip
    seed = args.seed + repeat - 1
    reference = Child(
        "nanoGPT",
        lm_recipe.nanogpt_command(args, out_dir),
        args.cores[0],
        reference_dir,
        reference_env,
        os.path.join(directory, "nanogpt.log"),
    )
    ours = Child(
        "tfnorm train",
        lm_recipe.tfnorm_command(
            args, preset, jit_compile, seed, logdir, data["corpus"]
        ),
        args.cores[1],
        directory,
        ours_env,
        os.path.join(directory, "tfnorm.log"),
    )
    try:
        reference.wait()
        ours.wait()
    finally:
        for child in (reference, ours):
            if child.process.poll() is None:  # the other one failed
                child.process.kill()
                child.process.wait()
    theirs = {**nanogpt_figures(reference, args), **nanogpt_loss(args, data, out_dir)}
    return {
        "repeat": repeat,
        "preset": preset,
        "jit_compile": jit_compile,
        "seed": seed,
        "tfnorm": {"val_loss": tfnorm_loss(args, logdir), **tfnorm_figures(ours, args)},
        "nanogpt": theirs,
    }
