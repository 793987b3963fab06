"""The tfnorm side of `bench/hf_checkpoints.py` (run in the TensorFlow venv).

Each call is a fresh process that prints one JSON line, with its peak
resident memory, `peak_bytes`: VmHWM of /proc/self/status, the peak of this
program's own address space (`getrusage`'s `ru_maxrss` would also count the
spawning process's resident memory, which a new process inherits until
`exec` and which the kernel keeps in its high-water mark).

    python bench/hf_tfnorm_child.py baseline THREADS
    python bench/hf_tfnorm_child.py load CHECKPOINT THREADS
    python bench/hf_tfnorm_child.py generate CHECKPOINT THREADS \
        PROMPTS.npz NEW_TOKENS ROUNDS OUT.npz

`baseline` imports what `load` imports and starts the runtime (one tiny
op), and builds nothing. `load` times `tfnorm.models.decoder_from_hf`
(a float32 model: the default policy). `generate` times greedy
`tfnorm.generate` (KV cache, XLA) after one warm-up call per batch size,
for each batch of PROMPTS.npz (`batch_<n>` arrays), and saves the tokens.
TensorFlow's intra- and inter-op pools get THREADS threads.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tfnorm  # noqa: E402
from tfnorm._keras import tf  # noqa: E402
from tfnorm.models import decoder_from_hf  # noqa: E402


def peak_bytes():
    """This process's peak resident memory since `exec` (Linux)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    raise SystemExit("no VmHWM in /proc/self/status (Linux only)")


def start(threads):
    tf.config.threading.set_intra_op_parallelism_threads(int(threads))
    tf.config.threading.set_inter_op_parallelism_threads(int(threads))
    float(tf.reduce_sum(tf.ones([2]) + 1.0))  # the runtime started, as in every mode


def load(path, threads):
    start(threads)
    began = time.perf_counter()
    model = decoder_from_hf(path)
    seconds = time.perf_counter() - began
    dtype = tf.as_dtype(model.weights[0].dtype).name
    print(json.dumps({"seconds": seconds, "dtype": dtype, "peak_bytes": peak_bytes()}))


def generate(path, threads, prompts_path, new_tokens, rounds, out_path):
    start(threads)
    new_tokens, rounds = int(new_tokens), int(rounds)
    model = decoder_from_hf(path)
    results, tokens = {}, {}
    prompts = np.load(prompts_path)
    for name in sorted(prompts.files):
        ids = prompts[name]
        tfnorm.generate(model, ids, new_tokens)  # warm-up: traces and compiles
        times = []
        for _ in range(rounds):
            began = time.perf_counter()
            out = np.asarray(tfnorm.generate(model, ids, new_tokens))
            times.append(time.perf_counter() - began)
        results[name] = statistics.median(times)
        tokens[name] = out
    np.savez(out_path, **tokens)
    threads_used = tf.config.threading.get_intra_op_parallelism_threads()
    print(json.dumps({"seconds": results, "threads": threads_used}))


if __name__ == "__main__":
    mode, arguments = sys.argv[1], sys.argv[2:]
    if mode == "baseline":
        start(*arguments)
        print(json.dumps({"peak_bytes": peak_bytes()}))
    else:
        {"load": load, "generate": generate}[mode](*arguments)
