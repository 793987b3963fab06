"""Plots Xiong et al.'s gradient result for tfnorm's encoder: docs/xiong_gradients.png.

Left: the gradient norm of each block's second FFN kernel at initialisation
in a 12-layer Post-LN and Pre-LN stack (mean over seeds, the band spans the
seeds). Right: the last block's gradient norm at depth 2 divided by the same
at depth 16, per seed, against the 1/sqrt(L) prediction sqrt(8) for Pre-LN.
Settings as the calibration in the project notes: d_model 64, 4 heads, dff
256, sequence 16, batch 16, cross-entropy over a random 100-word vocabulary
projection (`tfnorm.experiments.gradients.ffn_gradient_norms_at_init`). The
figures are printed too.

    python tools/plot_xiong.py [--seeds 0,1,2] [--output docs/xiong_gradients.png]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tfnorm._keras import FLAVOUR, KERAS_VERSION  # noqa: E402
from tfnorm.experiments.gradients import ffn_gradient_norms_at_init  # noqa: E402

POSITIONS = {"post": ("Post-LN", "tab:red"), "pre": ("Pre-LN", "tab:blue")}
PROFILE_DEPTH = 12


def measure(seeds):
    profiles = {p: [] for p in POSITIONS}
    ratios = {p: [] for p in POSITIONS}
    for seed in seeds:
        for position in POSITIONS:
            profile = ffn_gradient_norms_at_init(PROFILE_DEPTH, position, seed=seed)
            shallow = ffn_gradient_norms_at_init(2, position, seed=seed)[-1]
            deep = ffn_gradient_norms_at_init(16, position, seed=seed)[-1]
            profiles[position].append(profile)
            ratios[position].append(shallow / deep)
            print(
                f"seed {seed} {POSITIONS[position][0]:8s} depth2/depth16 "
                f"{shallow / deep:.2f}   12-layer last/first "
                f"{profile[-1] / profile[0]:.2f}   profile "
                + " ".join(f"{g:.3f}" for g in profile),
                flush=True,
            )
    return {p: np.array(v) for p, v in profiles.items()}, ratios


def plot(profiles, ratios, seeds, output):
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.6, 1]}
    )
    layers = np.arange(1, PROFILE_DEPTH + 1)
    for position, (label, colour) in POSITIONS.items():
        values = profiles[position]
        left.plot(layers, values.mean(axis=0), "o-", color=colour, label=label)
        left.fill_between(
            layers, values.min(axis=0), values.max(axis=0), color=colour, alpha=0.2
        )
    left.set_xlabel("layer (1 = closest to the input)")
    left.set_ylabel("‖∂loss / ∂W₂‖ at initialisation")
    left.set_title(f"Second FFN kernel gradient, {PROFILE_DEPTH}-layer encoder")
    left.set_xticks(layers)
    left.set_ylim(bottom=0)
    left.legend()
    left.grid(alpha=0.3)

    width = 0.8 / len(seeds)
    for index, (position, (_label, colour)) in enumerate(POSITIONS.items()):
        for s, ratio in enumerate(ratios[position]):
            right.bar(
                index + (s - (len(seeds) - 1) / 2) * width,
                ratio,
                width * 0.9,
                color=colour,
                alpha=0.5 + 0.5 * s / max(1, len(seeds) - 1),
            )
    right.set_ylim(0, 1.15 * max(np.sqrt(8), *ratios["pre"], *ratios["post"]))
    right.axhline(np.sqrt(8), color="tab:blue", ls="--", lw=1)
    right.text(1.45, np.sqrt(8), "√8 (Pre-LN, 1/√L)", va="bottom", ha="right")
    right.axhline(1.0, color="gray", ls=":", lw=1)
    right.set_xticks(range(len(POSITIONS)))
    right.set_xticklabels([label for label, _ in POSITIONS.values()])
    right.set_ylabel("last-layer gradient, depth 2 / depth 16")
    right.set_title(f"Depth 2 vs 16, seeds {', '.join(map(str, seeds))}")
    right.grid(alpha=0.3, axis="y")
    fig.suptitle(
        "Xiong et al. 2020, Thm 1, with tfnorm.build_encoder "
        f"(d=64, 4 heads, dff 256; Keras {KERAS_VERSION}, {FLAVOUR})",
        fontsize=10,
    )
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    fig.savefig(output, dpi=110)
    print("wrote", output)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument(
        "--output", default=os.path.join(REPO, "docs", "xiong_gradients.png")
    )
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    profiles, ratios = measure(seeds)
    plot(profiles, ratios, seeds, args.output)


if __name__ == "__main__":
    main()
