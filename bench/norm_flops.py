"""What share of a decoder's arithmetic its norms are: floating-point operations per token, counted.

No timing and no TensorFlow: the arithmetic behind claim 2 of
docs/claims.md ("RMSNorm saves about 7% of the compute"). For a causal
decoder of the given sizes it counts the forward pass's floating-point
operations per token (a multiply-add is 2), part by part:

- matrix products: the attention projections (query and output d x d, key
  and value d x (kv heads x head width)), the feed-forward (three d x dff
  matrices when gated, as SwiGLU; two otherwise) and the output head
  (d x vocabulary);
- attention: the scores and the weighted sum over the keys a token sees,
  (context + 1) / 2 on average under a causal mask, 2 x 2 x d each;
- residual additions: 2 per block, d each;
- norms: 2 per block and a final one, each over d features. RMSNorm:
  square, sum, scale by 1/rms, times gamma = 4 per feature; LayerNorm:
  sum, subtract the mean, square, sum, scale, times gamma, plus beta = 7.
  (The one square root per row is left out: it is per row, not per
  feature.)

Softmax, activations and the loss are left out; they would only lower the
norms' share. A training step's backward pass costs about twice the
forward for the products and for the norms alike, so the shares hold for a
step too.

    python bench/norm_flops.py [--markdown FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json

#: Floating-point operations per feature of one row.
NORM_FLOPS_PER_FEATURE = {"rms": 4, "layer": 7}

_SIZES = ("d_model", "num_layers", "num_heads", "dff", "vocab_size", "context", "gated")
#: The models the table counts: the LLaMA paper's 7B model (Touvron et
#: al., 2023: d 4096, 32 layers, 32 heads, SwiGLU width 11008, vocabulary
#: 32000, context 2048), GPT-2 small, and this project's benchmark decoder.
MODELS = {
    name: dict(zip(_SIZES, sizes))
    for name, sizes in (
        ("LLaMA 7B", (4096, 32, 32, 11008, 32000, 2048, True)),
        ("GPT-2 small", (768, 12, 12, 3072, 50257, 1024, False)),
        ("bench/decoder.py (d 256)", (256, 4, 4, 1024, 4096, 128, True)),
    )
}


def decoder_flops_per_token(
    *,
    d_model,
    num_layers,
    num_heads,
    dff,
    vocab_size,
    context,
    gated,
    norm,
    num_kv_heads=None,
):
    """Forward floating-point operations per token of a causal decoder, by
    part: `{"products", "attention", "residual", "norms", "total"}`."""
    if norm not in NORM_FLOPS_PER_FEATURE:
        raise ValueError(
            f"`norm` must be one of {sorted(NORM_FLOPS_PER_FEATURE)}. "
            f"Received: norm={norm!r}"
        )
    d = d_model
    kv_width = (num_kv_heads or num_heads) * (d // num_heads)
    per_block = 2 * (2 * d * d + 2 * d * kv_width + (3 if gated else 2) * d * dff)
    parts = {
        "products": num_layers * per_block + 2 * d * vocab_size,
        "attention": num_layers * 2 * 2 * d * (context + 1) / 2,
        "residual": num_layers * 2 * d,
        "norms": (2 * num_layers + 1) * NORM_FLOPS_PER_FEATURE[norm] * d,
    }
    parts["total"] = sum(parts.values())
    return parts


def norm_shares(sizes):
    """For one model: each norm's share of the total, and what RMSNorm
    saves against LayerNorm, as a share of LayerNorm's model and of
    LayerNorm itself."""
    rms = decoder_flops_per_token(norm="rms", **sizes)
    layer = decoder_flops_per_token(norm="layer", **sizes)
    saved = layer["norms"] - rms["norms"]
    return {
        "total_flops_per_token": layer["total"],
        "rms_share": rms["norms"] / rms["total"],
        "layer_share": layer["norms"] / layer["total"],
        "saving_of_model": saved / layer["total"],
        "saving_of_norm": saved / layer["norms"],
    }


def markdown(rows):
    lines = [
        "Forward floating-point operations per token (products, attention, "
        "residual additions and norms; see bench/norm_flops.py):",
        "",
        "| model | GFLOPs per token | RMSNorm's share | LayerNorm's share | "
        "RMSNorm saves, of the model | RMSNorm saves, of the norm |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['total_flops_per_token'] / 1e9:.3f} | "
            f"{100 * row['rms_share']:.4f}% | {100 * row['layer_share']:.4f}% | "
            f"{100 * row['saving_of_model']:.4f}% | "
            f"{100 * row['saving_of_norm']:.0f}% |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--json", help="also write every figure to this file")
    args = parser.parse_args(argv)
    rows = {name: norm_shares(sizes) for name, sizes in MODELS.items()}
    table = markdown(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(table + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"models": MODELS, "shares": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
