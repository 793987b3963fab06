"""Loading a Hugging Face checkpoint and generating from it: tfnorm against transformers.

A GPT-2-small-sized checkpoint (12 layers, 12 heads, width 768, vocabulary
50257, context 1024: 124M parameters) with random weights is written by
transformers (`GPT2LMHeadModel.save_pretrained`, safetensors) in float32
and in bfloat16. transformers and CPU PyTorch live in the reference venv
(`make hf-reference` builds `.venv-hf`; `--hf-venv` names another), never
in tfnorm's.

Every measurement is a fresh process (`bench/hf_tfnorm_child.py` in this
Python, `bench/hf_torch_child.py` in the reference venv's), the two sides
alternating, `--repeats` times:

1. Load: the wall-clock time of `tfnorm.models.decoder_from_hf(path)`
   against `AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)`
   (both build a float32 model, from either file), after the imports; and
   the process's peak resident memory (VmHWM, see the children) less that
   of a baseline process of the same runtime, which makes the same
   imports and one tiny op and builds nothing. Targets: tfnorm's time at
   most transformers'; its peak less its baseline at most 1.5x the float32
   weights.
2. Greedy generation, new tokens/s: `tfnorm.generate` (KV cache, XLA)
   against `model.generate(do_sample=False, use_cache=True)` (no stop
   token, so both make every token), `--new-tokens` after a
   `--prompt-tokens` random prompt at each batch size of `--batches`, from
   the float32 checkpoint; one warm-up call per batch size, then the median
   of `--gen-rounds` calls. Both runtimes get `--threads` threads (default:
   every core): TensorFlow's intra- and inter-op pools,
   `torch.set_num_threads` and `torch.set_num_interop_threads`, and
   OMP_NUM_THREADS. "same tokens" says whether both made the same tokens
   (random weights make near-ties, where float rounding may choose apart).

    python bench/hf_checkpoints.py [--hf-venv .venv-hf] [--repeats 3]
        [--tiny] [--dtypes float32,bfloat16] [--batches 1,8]
        [--require-idle] [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

import numpy as np  # noqa: E402

from bench.hf_tables import generation_row, load_row  # noqa: E402
from bench.machine import Run, add_report_arguments  # noqa: E402

#: GPT-2 small (124M parameters).
GPT2_SMALL = dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
#: `--tiny`: a smoke test's checkpoint.
TINY = dict(n_layer=2, n_head=4, n_embd=64, vocab_size=512, n_positions=128)
SIDES = ("tfnorm", "transformers")
MIB = 2**20


def child(side, args, *arguments):
    """Runs one child; returns its JSON line."""
    if side == "tfnorm":
        command = [sys.executable, os.path.join(HERE, "hf_tfnorm_child.py")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        )}  # fmt: skip
    else:
        command = [args.hf_python, os.path.join(HERE, "hf_torch_child.py")]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = str(args.threads)
    found = subprocess.run(
        command + [str(a) for a in arguments], capture_output=True, text=True, env=env
    )
    if found.returncode != 0:
        tail = found.stderr.strip().splitlines()[-15:]
        raise SystemExit(
            f"bench/hf_checkpoints.py: {' '.join(command[1:] + [arguments[0]])} "
            f"exited with status {found.returncode}:\n" + "\n".join(tail)
        )
    return json.loads(found.stdout.strip().splitlines()[-1])


def reference_missing(args):
    """Why the reference venv cannot run transformers, or None."""
    if not os.path.exists(args.hf_python):
        found = None
    else:
        found = subprocess.run(
            [args.hf_python, "-c", "import torch, transformers, safetensors"],
            capture_output=True,
        )
    if found is None or found.returncode != 0:
        return (
            f"no reference venv with torch and transformers at {args.hf_venv}: "
            "`make hf-reference` builds .venv-hf (CPU torch, transformers), or "
            f"pass --hf-venv PATH. Received: hf_venv={args.hf_venv}"
        )
    return None


def measure_load(args, checkpoints):
    """Per repeat: each side's baseline peak and each dtype's load."""
    repeats = []
    for repeat in range(args.repeats):
        order = SIDES if repeat % 2 == 0 else SIDES[::-1]
        figures = {}
        for side in order:
            baseline = child(side, args, "baseline", args.threads)
            figures[side] = {"baseline_bytes": baseline["peak_bytes"]}
            for dtype in args.dtypes:
                figures[side][dtype] = child(
                    side, args, "load", checkpoints[dtype], args.threads
                )
        repeats.append(figures)
        print(f"load, repeat {repeat + 1}: {json.dumps(figures)}", flush=True)
    return repeats


def measure_generation(args, checkpoint, workdir):
    rng = np.random.default_rng(0)
    prompts = os.path.join(workdir, "prompts.npz")
    np.savez(
        prompts,
        **{
            f"batch_{batch}": rng.integers(
                0, args.sizes["vocab_size"], (batch, args.prompt_tokens)
            ).astype(np.int32)
            for batch in args.batches
        },
    )
    repeats, same = [], {}
    for repeat in range(args.repeats):
        order = SIDES if repeat % 2 == 0 else SIDES[::-1]
        figures, tokens = {}, {}
        for side in order:
            out = os.path.join(workdir, f"tokens-{side}.npz")
            result = child(
                side, args, "generate", checkpoint, args.threads, prompts,
                args.new_tokens, args.gen_rounds, out,
            )  # fmt: skip
            figures[side] = result
            with np.load(out) as saved:
                tokens[side] = {name: saved[name] for name in saved.files}
        for name in tokens["tfnorm"]:
            agree = np.array_equal(tokens["tfnorm"][name], tokens["transformers"][name])
            same[name] = same.get(name, True) and bool(agree)
        repeats.append(figures)
        print(f"generation, repeat {repeat + 1}: {json.dumps(figures)}", flush=True)
    return repeats, same


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--hf-venv",
        default=os.path.join(REPO, ".venv-hf"),
        help="the reference venv with CPU torch and transformers (default: "
        ".venv-hf of this repository, built by `make hf-reference`)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny checkpoint (smoke test)"
    )
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument(
        "--gen-rounds", type=int, default=3, help="timed calls per batch"
    )
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count() or 1,
        help="threads of each runtime (default: every core)",
    )  # fmt: skip
    parser.add_argument(
        "--workdir", help="where the checkpoints go (default: a temp dir)"
    )
    add_report_arguments(parser)
    args = parser.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if not args.dtypes or set(args.dtypes) - {"float32", "bfloat16"}:
        parser.error(
            f"--dtypes takes float32, bfloat16. Received: dtypes={args.dtypes}"
        )
    try:
        args.batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        parser.error(f"--batches takes integers. Received: batches={args.batches}")
    counts = (args.repeats, args.prompt_tokens, args.new_tokens, args.gen_rounds,
              args.threads, *args.batches)  # fmt: skip
    if min(counts) < 1:
        parser.error(
            "--repeats, --prompt-tokens, --new-tokens, --gen-rounds, --threads "
            "and --batches must be at least 1"
        )
    args.sizes = TINY if args.tiny else GPT2_SMALL
    args.hf_python = os.path.join(os.path.abspath(args.hf_venv), "bin", "python")
    return args


def main(argv=None):
    args = parse_args(argv)
    missing = reference_missing(args)
    if missing:
        print(f"bench/hf_checkpoints.py: {missing}", file=sys.stderr)
        sys.exit(2)
    run = Run("wall", args.require_idle)
    print(run.header(), flush=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="tfnorm-bench-hf-")
    try:
        made = child("transformers", args, "make", workdir, json.dumps(args.sizes))
        checkpoints = {d: os.path.join(workdir, d) for d in ("float32", "bfloat16")}
        versions = subprocess.run(
            [args.hf_python, "-c",
             "import torch, transformers; print(torch.__version__, transformers.__version__)"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        method = (
            f"GPT-2 of {json.dumps(args.sizes)} ({made['params']:,} parameters, "
            f"float32 weights {made['float32_bytes'] / MIB:,.0f} MiB), random "
            f"weights; transformers {versions[1]} on PyTorch {versions[0]}; "
            f"{args.threads} thread(s) each; {args.repeats} repetitions of fresh "
            f"processes, the sides alternating; generation: greedy, "
            f"{args.new_tokens} new tokens after {args.prompt_tokens}, median of "
            f"{args.gen_rounds} calls after one warm-up call per batch size"
        )
        print(method, flush=True)
        loads = measure_load(args, checkpoints)
        generations, same = measure_generation(args, checkpoints["float32"], workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    run.finish()
    weights = made["float32_bytes"]
    table = "\n".join(
        [
            "Load (median over the repetitions; in brackets the min-max of "
            "each repetition's ratio); memory: peak RSS less the runtime's "
            "baseline process, MiB, and as a multiple of the float32 weights "
            f"({weights / MIB:,.0f} MiB):",
            "",
            "| checkpoint | tfnorm s | transformers s | time tfnorm ÷ transformers "
            "| tfnorm peak − baseline | transformers peak − baseline | memory "
            "tfnorm ÷ transformers | baselines, MiB (tfnorm / transformers) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *(load_row(dtype, loads, weights) for dtype in args.dtypes),
            "",
            "Greedy generation from the float32 checkpoint, new tokens/s:",
            "",
            "| batch | tfnorm tokens/s | transformers tokens/s | tfnorm ÷ "
            "transformers | same tokens |",
            "| ---: | ---: | ---: | ---: | --- |",
            *(
                generation_row(batch, generations, args.new_tokens, same)
                for batch in args.batches
            ),
        ]
    )
    run.report(
        method,
        table,
        args.markdown,
        args.json,
        sizes=args.sizes,
        params=made["params"],
        float32_bytes=weights,
        threads=args.threads,
        versions={"torch": versions[0], "transformers": versions[1]},
        load=loads,
        generation=generations,
        same_tokens=same,
    )


if __name__ == "__main__":
    main()
