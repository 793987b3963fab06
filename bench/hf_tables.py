"""The Markdown rows of `bench/hf_checkpoints.py`'s tables."""

from __future__ import annotations

import statistics

MIB = 2**20


def _ratio(values):
    """Median (min-max) of per-repetition ratios."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def load_row(dtype, repeats, weight_bytes):
    """`repeats`: per repetition, side -> {baseline_bytes, dtype -> {seconds,
    peak_bytes}}."""
    seconds = {s: [r[s][dtype]["seconds"] for r in repeats] for s in repeats[0]}
    extra = {
        s: [r[s][dtype]["peak_bytes"] - r[s]["baseline_bytes"] for r in repeats]
        for s in repeats[0]
    }
    baselines = {
        s: statistics.median(r[s]["baseline_bytes"] for r in repeats) / MIB
        for s in repeats[0]
    }
    ours, theirs = "tfnorm", "transformers"

    def memory(side):
        middle = statistics.median(extra[side])
        return f"{middle / MIB:,.0f} MiB ({middle / weight_bytes:.2f}x)"

    return (
        f"| {dtype} | {statistics.median(seconds[ours]):.2f} | "
        f"{statistics.median(seconds[theirs]):.2f} | "
        f"{_ratio([a / b for a, b in zip(seconds[ours], seconds[theirs])])} | "
        f"{memory(ours)} | {memory(theirs)} | "
        f"{_ratio([a / b for a, b in zip(extra[ours], extra[theirs])])} | "
        f"{baselines[ours]:,.0f} / {baselines[theirs]:,.0f} |"
    )


def generation_row(batch, repeats, new_tokens, same):
    """`repeats`: per repetition, side -> {seconds: {batch_<n>: s}}."""
    name = f"batch_{batch}"
    rates = {
        side: [batch * new_tokens / r[side]["seconds"][name] for r in repeats]
        for side in repeats[0]
    }
    ours, theirs = rates["tfnorm"], rates["transformers"]
    return (
        f"| {batch} | {statistics.median(ours):,.0f} | "
        f"{statistics.median(theirs):,.0f} | "
        f"{_ratio([a / b for a, b in zip(ours, theirs)])} | "
        f"{'yes' if same[name] else 'no'} |"
    )
