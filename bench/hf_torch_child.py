"""The transformers side of `bench/hf_checkpoints.py` (run in the reference venv).

Each call is a fresh process that prints one JSON line, with its peak
resident memory, `peak_bytes`: VmHWM of /proc/self/status, the peak of this
program's own address space (`getrusage`'s `ru_maxrss` would also count the
spawning process's resident memory, which a new process inherits until
`exec` and which the kernel keeps in its high-water mark).

    .venv-hf/bin/python bench/hf_torch_child.py make OUT_DIR SIZES_JSON
    .venv-hf/bin/python bench/hf_torch_child.py baseline THREADS
    .venv-hf/bin/python bench/hf_torch_child.py load CHECKPOINT THREADS
    .venv-hf/bin/python bench/hf_torch_child.py generate CHECKPOINT THREADS \
        PROMPTS.npz NEW_TOKENS ROUNDS OUT.npz

`make` writes a randomly initialised GPT-2 of SIZES (n_layer, n_head,
n_embd, vocab_size, n_positions) as `OUT_DIR/float32` and
`OUT_DIR/bfloat16` (safetensors, `save_pretrained`). `baseline` imports
what `load` imports and starts the runtime (one tiny op), and builds
nothing. `load` times `AutoModelForCausalLM.from_pretrained` into a
float32 model (`dtype=torch.float32`, whatever the file's dtype, as
tfnorm's default policy builds). `generate` times greedy
`model.generate(do_sample=False, use_cache=True)` after one warm-up call
per batch size, for each batch of PROMPTS.npz (`batch_<n>` arrays), and
saves the tokens.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel


def peak_bytes():
    """This process's peak resident memory since `exec` (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    raise SystemExit("no VmHWM in /proc/self/status (Linux only)")


def start(threads):
    torch.set_num_threads(int(threads))
    torch.set_num_interop_threads(int(threads))
    torch.zeros(2).add_(1)  # the runtime started, as in every mode


def make(out_dir, sizes):
    torch.manual_seed(0)
    config = GPT2Config(**json.loads(sizes))
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(f"{out_dir}/float32")
    params = sum(p.numel() for p in model.parameters())
    model.to(torch.bfloat16).save_pretrained(f"{out_dir}/bfloat16")
    print(json.dumps({"params": params, "float32_bytes": 4 * params}))


def load(path, threads):
    start(threads)
    began = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    seconds = time.perf_counter() - began
    dtype = str(next(model.parameters()).dtype).replace("torch.", "")
    print(json.dumps({"seconds": seconds, "dtype": dtype, "peak_bytes": peak_bytes()}))


def generate(path, threads, prompts_path, new_tokens, rounds, out_path):
    start(threads)
    new_tokens, rounds = int(new_tokens), int(rounds)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    # No stop token: every call makes exactly NEW_TOKENS, as tfnorm's.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    results, tokens = {}, {}
    prompts = np.load(prompts_path)
    for name in sorted(prompts.files):
        ids = torch.tensor(prompts[name], dtype=torch.long)

        def call(ids=ids):
            return model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                do_sample=False,
                use_cache=True,
            )

        call()  # warm-up
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            out = call()
            times.append(time.perf_counter() - began)
        if out.shape[1] != ids.shape[1] + new_tokens:
            raise SystemExit(f"generate made {out.shape[1] - ids.shape[1]} tokens")
        results[name] = statistics.median(times)
        tokens[name] = out.numpy()
    np.savez(out_path, **tokens)
    print(json.dumps({"seconds": results, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    mode, arguments = sys.argv[1], sys.argv[2:]
    if mode == "baseline":
        start(*arguments)
        print(json.dumps({"peak_bytes": peak_bytes()}))
    else:
        {"make": make, "load": load, "generate": generate}[mode](*arguments)
