"""Validation loss of a nanoGPT checkpoint, measured as `tfnorm train` measures its own.

Run in the reference venv (CPU PyTorch), by `bench/lm_reference.py`:

    .venv-hf/bin/python bench/nanogpt_eval.py NANOGPT_DIR OUT_DIR/ckpt.pt val.bin

It builds nanoGPT's own `GPT` (imported from the checkout's `model.py`, not
copied), loads the checkpoint's weights, and prints one JSON line:
`{"val_loss": ..., "tokens": ...}`: the mean cross-entropy (nats per token)
over the whole held-out text `val.bin` (uint16 token ids), read in the
windows of `tfnorm train`'s final evaluation (`validation_windows`): the
text cut into windows of `block_size + 1` tokens one after the other, the
model reading the first `block_size` and predicting each next token, and
the shorter rest as one more window, so every token but the first is
predicted once, from the same context as tfnorm's model predicts it.

`validation_windows` needs only NumPy (the tests compare it with tfnorm's
evaluation in the TensorFlow venv); PyTorch is imported inside `main`.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

#: Windows evaluated together (the result does not depend on it).
BATCH = 12


def validation_windows(tokens, block_size):
    """The (inputs, targets) pieces of `tfnorm train`'s evaluation of
    `tokens`: `(len(tokens) - 1) // block_size` whole windows, each
    `block_size` inputs and the next tokens as targets, then the rest (at
    least two tokens) as one shorter window."""
    tokens = np.asarray(tokens, np.int64)
    count = max(0, (len(tokens) - 1) // block_size)
    starts = np.arange(count)[:, None] * block_size
    windows = tokens[starts + np.arange(block_size + 1)]
    pieces = [
        (windows[i : i + BATCH, :-1], windows[i : i + BATCH, 1:])
        for i in range(0, count, BATCH)
    ]
    rest = tokens[count * block_size :]
    if len(rest) >= 2:
        pieces.append((rest[None, :-1], rest[None, 1:]))
    # Contiguous: nanoGPT's forward views the targets as one row.
    return [(np.ascontiguousarray(x), np.ascontiguousarray(y)) for x, y in pieces]


def main(nanogpt_dir, checkpoint_path, val_path):
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, os.path.abspath(nanogpt_dir))
    from model import GPT, GPTConfig  # nanoGPT's model.py, from its checkout

    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
    model = GPT(GPTConfig(**checkpoint["model_args"]))
    # A compiled model's keys start with "_orig_mod." (nanoGPT strips it too).
    state = {
        key[len("_orig_mod.") :] if key.startswith("_orig_mod.") else key: value
        for key, value in checkpoint["model"].items()
    }
    model.load_state_dict(state)
    model.eval()
    tokens = np.fromfile(val_path, dtype=np.uint16)
    total, count = 0.0, 0
    with torch.no_grad():
        for inputs, targets in validation_windows(tokens, model.config.block_size):
            targets = torch.from_numpy(targets)
            # With targets, nanoGPT's forward returns every position's logits.
            logits, _ = model(torch.from_numpy(inputs), targets)
            losses = F.cross_entropy(
                logits.reshape(-1, logits.size(-1)).double(),
                targets.reshape(-1),
                reduction="sum",
            )
            total += float(losses)
            count += targets.numel()
    print(
        json.dumps(
            {
                "val_loss": total / count,
                "tokens": count,
                "iter_num": int(checkpoint["iter_num"]),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
