"""`tfnorm train --task lm` against nanoGPT, a PyTorch reference trainer, on the same text.

nanoGPT (https://github.com/karpathy/nanoGPT, MIT licence) runs from a
checkout at the pinned commit `NANOGPT_COMMIT` (`--nanogpt-dir`; another
commit or local changes are refused), in the reference venv (CPU PyTorch,
`make hf-reference` builds `.venv-hf`); none of its code is in this
repository. Get it with

    git clone https://github.com/karpathy/nanoGPT
    git -C nanoGPT checkout 3adf61e154c3fe3fca428ad6bc3818b27a3b8291

The text is the corpus `examples/data/make_corpus.py` writes (the prose of
the Python language reference), as tfnorm reads it: byte tokens with an
end-of-text token (256) after each file, a vocabulary of 257, the last 10%
held out. nanoGPT gets exactly those token streams (`train.bin`, `val.bin`,
uint16, and `meta.pkl` with `vocab_size` 257), so both model the same
vocabulary and the same split.

The reference's CPU recipe (4 layers, 4 heads, width 128, context 64,
batch 12, 2000 steps, learning rate 1e-3 with 100 warm-up steps and a
cosine decay to 1e-4, AdamW with beta2 0.99 and weight decay 0.1 on the
matrices, clipping at 1.0, no dropout, no biases, float32) maps flag by
flag onto `tfnorm train` (`bench/lm_recipe.py` lists both sides). tfnorm
runs two presets: gpt2 set to match nanoGPT's model (no biases, N(0, 0.02)
weights with GPT-2's scaled residual projections, exact GELU, tied head,
epsilon 1e-5; its norms keep a beta, nanoGPT's have none) and llama with
its own model settings (RMSNorm, rotary, SwiGLU); graph mode and XLA
(`--jit-compile`).

Each tfnorm run starts together with a nanoGPT run, each trainer pinned to
one core (`taskset`, `--cores`) with one thread (OMP/MKL, TensorFlow's
intra- and inter-op pools); every pair runs `--repeats` times (tfnorm's
seed is `--seed` plus the repeat; nanoGPT's is its own fixed 1337).

Measured:
- validation loss after the last step, the same way on both sides: the mean
  cross-entropy per token over the whole held-out text in the windows of
  tfnorm's final evaluation (`summary.json`'s `val_loss`); nanoGPT's
  checkpoint of the last step is evaluated the same way by
  `bench/nanogpt_eval.py` (nanoGPT's own estimate from 20 random batches is
  kept in the JSON);
- step time: each trainer's progress lines are time-stamped as they arrive
  here (both print one and flush it after a step); ms/step is the median
  over windows of 10 steps, after the first `--skip-steps` (tracing,
  compilation, warm-up). Each trainer's own figure is given beside it:
  nanoGPT's median `time ...ms`, tfnorm's mean over the run from its last
  `examples/s`.

    python bench/lm_reference.py --nanogpt-dir DIR [--hf-venv .venv-hf]
        [--repeats 2] [--max-steps 2000] [--presets gpt2,llama]
        [--jit-compile off|on|both] [--workdir DIR] [--require-idle]
        [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from bench import lm_recipe  # noqa: E402
from bench.lm_pair import run_pair  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402

#: The file that marks a directory as this bench's workdir (emptied at the start).
MARKER = ".tfnorm-lm-reference"


def workdir_problem(workdir):
    """Why `workdir` may not be emptied for this run (it holds other
    files), or None."""
    if not os.path.isdir(workdir) or not os.listdir(workdir):
        return None
    if os.path.exists(os.path.join(workdir, MARKER)):
        return None  # an earlier run's
    return (
        f"--workdir {workdir} holds files of something else: the bench empties "
        f"its workdir first, so give a new or empty one. Received: workdir={workdir}"
    )


def setup_error(args):
    """Why this run cannot start (one line), or None."""
    if not args.nanogpt_dir:
        return (
            "--nanogpt-dir is required: a checkout of nanoGPT at commit "
            f"{lm_recipe.NANOGPT_COMMIT} ({lm_recipe.HOW_TO_GET})"
        )
    problem = lm_recipe.nanogpt_problem(args.nanogpt_dir)
    if problem:
        return problem
    python = os.path.join(args.hf_venv, "bin", "python")
    check = (
        subprocess.run(
            [python, "-c", "import torch, numpy"], capture_output=True, text=True
        )
        if os.path.exists(python)
        else None
    )
    if check is None or check.returncode != 0:
        return (
            f"no reference venv with torch at {args.hf_venv}: `make hf-reference` "
            "builds .venv-hf (or pass --hf-venv PATH). Received: "
            f"hf_venv={args.hf_venv}"
        )
    if workdir_problem(args.workdir):
        return workdir_problem(args.workdir)
    if shutil.which("taskset") is None:
        return "taskset (util-linux) is needed to pin each trainer to one core"
    allowed = os.sched_getaffinity(0)
    if (
        len(args.cores) != 2
        or not set(args.cores) <= allowed
        or len(set(args.cores)) != 2
    ):
        return (
            "--cores must name two different cores this process may use "
            f"({sorted(allowed)}). Received: cores={args.cores}"
        )
    return None


def _ratio_cell(ours, theirs):
    return f"{ours / theirs:.3f}" if theirs else "-"


def row(result):
    ours, theirs = result["tfnorm"], result["nanogpt"]
    return (
        f"| {result['repeat']} | {result['preset']} | "
        f"{'XLA' if result['jit_compile'] else 'graph'} | "
        f"{ours['val_loss']:.4f} | {theirs['val_loss']:.4f} | "
        f"{_ratio_cell(ours['val_loss'], theirs['val_loss'])} | "
        f"{ours['ms_per_step']:.1f} | {theirs['ms_per_step']:.1f} | "
        f"{_ratio_cell(ours['ms_per_step'], theirs['ms_per_step'])} | "
        f"{ours['own_ms_per_step']:.1f} / {theirs['own_ms_per_step']:.1f} |"
    )


def summary_rows(results):
    """Per preset and mode: the median ratios over the repeats (min-max)."""
    rows = []
    keys = sorted({(r["preset"], r["jit_compile"]) for r in results})
    for preset, jit_compile in keys:
        chosen = [
            r
            for r in results
            if (r["preset"], r["jit_compile"]) == (preset, jit_compile)
        ]
        cells = []
        for measure in ("val_loss", "ms_per_step"):
            ratios = [r["tfnorm"][measure] / r["nanogpt"][measure] for r in chosen]
            cells.append(
                f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
            )
        first = chosen[0]["tfnorm"]["ms_per_step"]
        spread = " / ".join(
            f"{r['tfnorm']['ms_per_step'] / first:.2f}" for r in chosen[1:]
        )
        rows.append(
            f"| {preset} | {'XLA' if jit_compile else 'graph'} | {cells[0]} | "
            f"{cells[1]} | {spread or '-'} |"
        )
    return rows


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nanogpt-dir", help="a nanoGPT checkout at the pinned commit")
    parser.add_argument(
        "--hf-venv",
        default=os.path.join(REPO, ".venv-hf"),
        help="the reference venv with CPU torch (default: .venv-hf of this "
        "repository, built by `make hf-reference`)",
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=lm_recipe.MAX_STEPS)
    parser.add_argument(
        "--presets", default="gpt2,llama", help="tfnorm presets, comma-separated"
    )
    parser.add_argument(
        "--jit-compile",
        choices=("off", "on", "both"),
        default="both",
        help="tfnorm's step in graph mode (off), under XLA (on), or both",
    )
    parser.add_argument("--seed", type=int, default=0, help="tfnorm's first seed")
    parser.add_argument(
        "--skip-steps",
        type=int,
        default=50,
        help="first steps left out of the step time (at most a third of the steps)",
    )
    parser.add_argument(
        "--cores",
        default="0,1",
        help="the cores of nanoGPT and tfnorm, in that order (default: 0,1)",
    )
    parser.add_argument(
        "--workdir",
        default=os.path.join(REPO, "runs", "bench", "lm-reference"),
        help="where the corpus, both trainers' runs and logs go (emptied first)",
    )
    add_report_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.cores = [int(core) for core in args.cores.split(",")]
    except ValueError:
        parser.error(f"--cores takes two core numbers. Received: cores={args.cores}")
    args.presets = [p for p in args.presets.split(",") if p]
    unknown = [p for p in args.presets if p not in lm_recipe.PRESETS]
    if unknown or not args.presets:
        parser.error(
            f"--presets takes {', '.join(lm_recipe.PRESETS)}. Received: "
            f"presets={','.join(args.presets)}"
        )
    if args.repeats < 1 or args.max_steps < 20:
        parser.error(
            "--repeats must be at least 1 and --max-steps at least 20. Received: "
            f"repeats={args.repeats}, max_steps={args.max_steps}"
        )
    args.skip_steps = max(10, min(args.skip_steps, args.max_steps // 3))
    # The trainers run in their own working directories.
    args.hf_venv, args.workdir = map(os.path.abspath, (args.hf_venv, args.workdir))
    if args.nanogpt_dir:
        args.nanogpt_dir = os.path.abspath(args.nanogpt_dir)
    return args


def main(argv=None):
    args = parse_args(argv)
    problem = setup_error(args)
    if problem:
        print(f"bench/lm_reference.py: {problem}", file=sys.stderr)
        sys.exit(2)
    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    if os.path.isdir(args.workdir):
        shutil.rmtree(args.workdir)
    os.makedirs(args.workdir)
    open(os.path.join(args.workdir, MARKER), "w").close()
    data = lm_recipe.prepare_data(args.workdir)
    torch_version = subprocess.run(
        [os.path.join(args.hf_venv, "bin", "python"), "-c",
         "import torch; print(torch.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.jit_compile]
    method = lm_recipe.describe(args, data, torch_version, modes)
    print(method, flush=True)
    results = []
    for repeat in range(1, args.repeats + 1):
        for preset in args.presets:
            for jit_compile in modes:
                result = run_pair(args, data, repeat, preset, jit_compile)
                results.append(result)
                print(row(result), flush=True)
    run.finish()
    table = "\n".join(
        [
            "Each pair of runs (tfnorm's validation loss and step time ÷ "
            "nanoGPT's; step time: the median over windows of 10 steps as the "
            "progress lines arrived; own logs: tfnorm's mean ms/step from its "
            "last examples/s, nanoGPT's median `time`):",
            "",
            "| repeat | preset | mode | tfnorm val loss | nanoGPT val loss | "
            "loss ratio | tfnorm ms/step | nanoGPT ms/step | step-time ratio | "
            "own logs, ms/step (tfnorm / nanoGPT) |",
            "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *map(row, results),
            "",
            "Over the repeats: median ratio (min-max); targets: the gpt2 "
            "preset's loss within ±3% (0.970-1.030), both presets' step time at "
            "most 0.9; the last column is each later repeat's tfnorm ms/step ÷ "
            "the first's (target within ±15%):",
            "",
            "| preset | mode | val loss tfnorm ÷ nanoGPT | step time tfnorm ÷ "
            "nanoGPT | tfnorm ms/step, repeat ÷ first |",
            "| --- | --- | ---: | ---: | ---: |",
            *summary_rows(results),
        ]
    )
    run.report(
        method,
        table,
        args.markdown,
        args.json,
        nanogpt_commit=lm_recipe.NANOGPT_COMMIT,
        torch=torch_version,
        recipe=lm_recipe.mapping(args.max_steps),
        data=data,
        results=results,
    )
    return results


if __name__ == "__main__":
    main()
