"""nanoGPT's CPU recipe and its `tfnorm train` flags, and the shared data, for `bench/lm_reference.py`."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The nanoGPT commit the benchmark runs (its last, 2025-11-12; the training
#: code is that of 2024-12-09).
NANOGPT_COMMIT = "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"
HOW_TO_GET = (
    "git clone https://github.com/karpathy/nanoGPT && "
    f"git -C nanoGPT checkout {NANOGPT_COMMIT}"
)
PRESETS = ("gpt2", "llama")
MAX_STEPS = 2000
#: nanoGPT's dataset name: `data/bytes/` under its working directory.
DATASET = "bytes"
MAX_LEN, VAL_SPLIT, BATCH = 64, 0.1, 12
#: nanoGPT's own validation estimate at the end (its CPU recipe's
#: `--eval_iters=20`); the compared loss is `bench/nanogpt_eval.py`'s.
EVAL_ITERS = 20


def warmup_steps(max_steps):
    """The recipe's 100 warm-up steps of 2000, in proportion to shorter runs."""
    return max(1, round(100 * max_steps / MAX_STEPS))


def mapping(max_steps):
    """The recipe, setting by setting: (nanoGPT key, value, tfnorm flag,
    value); a flag of None: the setting has no tfnorm counterpart (said in
    the docs), a nanoGPT key of None: a tfnorm flag that keeps its run like
    nanoGPT's (no histograms, one checkpoint, evaluation at the ends)."""
    warmup = warmup_steps(max_steps)
    return [
        ("n_layer", 4, "--num-layers", 4),
        ("n_head", 4, "--num-heads", 4),
        ("n_embd", 128, "--d-model", 128),
        (None, None, "--dff", 512),  # nanoGPT's MLP: 4 * n_embd
        ("block_size", MAX_LEN, "--max-len", MAX_LEN),
        ("batch_size", BATCH, "--batch-size", BATCH),
        ("gradient_accumulation_steps", 1, None, None),
        ("max_iters", max_steps, "--max-steps", max_steps),
        ("lr_decay_iters", max_steps, "--decay", "cosine"),
        ("learning_rate", 1e-3, "--learning-rate", 1e-3),
        ("warmup_iters", warmup, "--warmup-steps", warmup),
        ("min_lr", 1e-4, "--min-learning-rate", 1e-4),
        ("beta1", 0.9, "--beta1", 0.9),
        ("beta2", 0.99, "--beta2", 0.99),
        (None, None, "--adam-epsilon", 1e-8),  # torch's AdamW default
        ("weight_decay", 0.1, "--weight-decay", 0.1),
        (None, None, "--weight-decay-on", "matrices"),  # nanoGPT: every 2-D tensor
        ("grad_clip", 1.0, "--clipnorm", 1.0),
        ("dropout", 0.0, "--dropout-rate", 0.0),
        ("bias", False, None, None),  # the gpt2 preset: --bias false (PRESET_FLAGS)
        (None, None, "--optimizer", "adamw"),
        (None, None, "--windows", "random"),  # nanoGPT's get_batch
        (None, None, "--val-split", VAL_SPLIT),  # train.bin/val.bin: tfnorm's split
        ("eval_interval", max_steps, "--eval-every", max_steps),
        ("eval_iters", EVAL_ITERS, None, None),
        ("log_interval", 1, "--log-every", 10),
        ("always_save_checkpoint", True, "--checkpoint-every", max_steps),
        (None, None, "--histogram-every", 0),
        (None, None, "--no-export", None),
        ("compile", False, None, None),
        ("device", "cpu", None, None),
        ("dtype", "float32", None, None),
        ("decay_lr", True, None, None),
        ("wandb_log", False, None, None),
        ("init_from", "scratch", None, None),
        ("dataset", DATASET, "--data", "the corpus directory"),
    ]


#: LLaMA's own sizing of its SwiGLU: 2/3 of 4 x d_model (341), rounded up to
#: a multiple of 8. Its three matrices then hold the weights (and make the
#: products) of nanoGPT's two-matrix MLP of width 4 x d_model (132,096 vs
#: 131,072 per block): the step times compare models of one size.
LLAMA_DFF = 344

#: The gpt2 preset set to nanoGPT's model; the llama preset keeps its own,
#: at nanoGPT's size.
PRESET_FLAGS = {
    "gpt2": [
        "--preset", "gpt2", "--bias", "false", "--init-std", "0.02",
        "--feed-forward", "gelu", "--epsilon", "1e-5",
    ],
    "llama": ["--preset", "llama", "--dff", str(LLAMA_DFF)],
}  # fmt: skip


def nanogpt_problem(directory):
    """Why `directory` is not a clean nanoGPT checkout at `NANOGPT_COMMIT`, or None."""
    if not os.path.isfile(os.path.join(directory, "train.py")):
        return (
            f"{directory} is not a nanoGPT checkout (no train.py); get one with: "
            f"{HOW_TO_GET}. Received: nanogpt_dir={directory}"
        )

    if shutil.which("git") is None:
        return (
            f"git is needed to check the nanoGPT checkout's commit ({NANOGPT_COMMIT})"
        )

    def git(*command):
        return subprocess.run(
            ["git", "-C", directory, *command], capture_output=True, text=True
        )

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return (
            f"{directory} is not a git checkout, so its commit cannot be checked; "
            f"get one with: {HOW_TO_GET}. Received: nanogpt_dir={directory}"
        )
    if head.stdout.strip() != NANOGPT_COMMIT:
        return (
            f"{directory} is at commit {head.stdout.strip()}, not the pinned "
            f"{NANOGPT_COMMIT}: run `git -C {directory} checkout {NANOGPT_COMMIT}`. "
            f"Received: nanogpt_dir={directory}"
        )
    changed = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    if changed:
        return (
            f"{directory} has local changes ({changed.splitlines()[0].strip()}, ...): "
            f"the benchmark runs nanoGPT as committed. Received: nanogpt_dir={directory}"
        )
    return None


def prepare_data(workdir):
    """Writes the corpus and nanoGPT's copy of tfnorm's token streams under
    `workdir`; returns where they are and their sizes."""
    from tfnorm.training.data import byte_text

    corpus = os.path.join(workdir, "corpus")
    subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "examples", "data", "make_corpus.py"),
            corpus,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    read = byte_text.read_corpus(corpus, MAX_LEN, VAL_SPLIT)
    data_dir = os.path.join(workdir, "nanogpt-data", DATASET)
    os.makedirs(data_dir)
    for name, tokens in (("train", read.train.tokens), ("val", read.val.tokens)):
        tokens.astype(np.uint16).tofile(os.path.join(data_dir, f"{name}.bin"))
    with open(os.path.join(data_dir, "meta.pkl"), "wb") as handle:
        pickle.dump({"vocab_size": byte_text.VOCAB_SIZE}, handle)
    return {
        "corpus": corpus,
        "nanogpt_data": data_dir,
        "files": len(read.files),
        "sha256": read.sha256,
        "train_tokens": int(len(read.train.tokens)),
        "val_tokens": int(len(read.val.tokens)),
        "vocab_size": byte_text.VOCAB_SIZE,
    }


def nanogpt_command(args, out_dir):
    """nanoGPT's train.py with the recipe (run from a directory whose `data/`
    holds the dataset and whose `configurator.py` is nanoGPT's)."""
    python = os.path.join(args.hf_venv, "bin", "python")
    flags = [
        f"--{key}={value}"
        for key, value, _, _ in mapping(args.max_steps)
        if key is not None
    ]
    flags.append(f"--out_dir={out_dir}")
    return [python, os.path.join(args.nanogpt_dir, "train.py"), *flags]


def tfnorm_command(args, preset, jit_compile, seed, logdir, corpus):
    flags = []
    for _, _, flag, value in mapping(args.max_steps):
        if flag == "--data":
            flags += [flag, corpus]
        elif flag is not None:
            flags += [flag] if value is None else [flag, str(value)]
    flags += PRESET_FLAGS[preset] + ["--seed", str(seed), "--logdir", logdir]
    if jit_compile:
        flags.append("--jit-compile")
    return [sys.executable, "-m", "tfnorm", "train", "--task", "lm", *flags]


def describe(args, data, torch_version, modes):
    return (
        f"nanoGPT {NANOGPT_COMMIT[:12]} (PyTorch {torch_version}, CPU, float32) "
        f"vs `tfnorm train --task lm`, presets {', '.join(args.presets)} in "
        f"{' and '.join('XLA' if m else 'graph mode' for m in modes)}; "
        f"{data['files']} files of examples/data/make_corpus.py as byte tokens "
        f"(vocabulary {data['vocab_size']}), {data['train_tokens']:,} training "
        f"and {data['val_tokens']:,} validation tokens; 4 layers, 4 heads, width "
        f"128, context {MAX_LEN}, batch {BATCH}, {args.max_steps} steps, "
        f"learning rate 1e-3 ({warmup_steps(args.max_steps)} warm-up steps, "
        "cosine to 1e-4), AdamW (0.9, 0.99), weight decay 0.1, clipping 1.0; "
        f"nanoGPT on core {args.cores[0]}, tfnorm on core {args.cores[1]}, one "
        f"thread each, started together, {args.repeats} repeat(s); step time "
        f"after the first {args.skip_steps} steps"
    )
