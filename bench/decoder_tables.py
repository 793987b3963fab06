"""The Markdown rows of `bench/decoder.py`'s tables."""

from __future__ import annotations

import statistics

NORMS = ("rms", "layer", "identity")


def _medians(repetitions):
    return [{n: statistics.median(v) for n, v in r.items()} for r in repetitions]


def _spread(values):
    middle = statistics.median(values)
    return f"{middle:.2f}x ({min(values):.2f}-{max(values):.2f})"


def speed_row(mode, repetitions, tokens, reference):
    medians = _medians(repetitions)
    ours = statistics.median(tokens / m["tfnorm"] for m in medians)
    theirs = statistics.median(tokens / m[reference] for m in medians)
    ratios = [m[reference] / m["tfnorm"] for m in medians]
    return f"| {mode} | {ours:,.0f} | {theirs:,.0f} | {_spread(ratios)} |"


def generation_row(batch, repetitions, same, reference_missing, new_tokens):
    """`new_tokens`: name -> how many tokens each call of that variant makes."""
    medians = _medians(repetitions)
    rates = {
        name: [batch * new_tokens[name] / m[name] for m in medians]
        for name in new_tokens
        if name in medians[0]
    }
    cells = [
        f"{statistics.median(rates[name]):,.0f}" if name in rates else "-"
        for name in new_tokens
    ]
    for name in ("keras-hub", "uncached"):
        # Each repetition's tokens/s ratio (the uncached loop makes fewer).
        ratios = [
            ours / theirs for ours, theirs in zip(rates["tfnorm"], rates.get(name, []))
        ]
        cells.append(_spread(ratios) if ratios else f"skipped: {reference_missing}")
    agree = ", ".join(
        "-" if n not in same else "yes" if same[n] else "no"
        for n in ("keras-hub", "uncached")
    )
    return f"| {batch} | " + " | ".join(cells) + f" | {agree} |"


def _cost(times, name):
    return statistics.median(
        ours - bare for ours, bare in zip(times[name], times["identity"])
    )


def _ratio(numerator, denominator):
    return numerator / denominator if denominator else float("nan")


def pooled(repetitions):
    """Each variant's times over every repetition, in round order."""
    return {n: [t for r in repetitions for t in r[n]] for n in repetitions[0]}


def step_share(times, name):
    """`name`'s step less the identity norm's (paired by round, median) as
    a share of `name`'s median step."""
    return _cost(times, name) / statistics.median(times[name])


def cost_row(preset, mode, repetitions):
    times = pooled(repetitions)
    rms, layer = _cost(times, "rms"), _cost(times, "layer")
    rms_share, layer_share = step_share(times, "rms"), step_share(times, "layer")
    fractions = [_ratio(_cost(r, "layer"), _cost(r, "rms")) for r in repetitions]
    ratio = _ratio(layer, rms)
    return (
        f"| {preset} | {mode} | {rms_share:.1%} | {layer_share:.1%} | "
        f"{ratio:.2f} ({min(fractions):.2f}-{max(fractions):.2f}) |"
    )
