"""The largest model sizes tfnorm accepts, in one place.

`tfnorm train`'s settings (`--num-layers`, `--d-model`, ...) and the recipe
a language-model run leaves for `tfnorm generate` (`language_model.json`)
are both checked against these bounds before anything is built: a typo
such as `num_layers: 10000000` would otherwise build layers for minutes and
grow past gigabytes before failing. The bounds are far above anything that
trains on one machine, so they only catch mistakes. Importing this module
imports no TensorFlow.

Example:

>>> from tfnorm.limits import check_model_sizes
>>> check_model_sizes({"num_layers": 10_000_000}, "run.yaml")
Traceback (most recent call last):
...
ValueError: run.yaml: `num_layers` must be at most 1024 (tfnorm.limits.MODEL_SIZE_LIMITS). Received: num_layers=10000000
"""

from __future__ import annotations

from tfnorm._checks import is_int

#: The largest value of each size of a model, by its setting's name.
MODEL_SIZE_LIMITS = {
    "num_layers": 1024,
    "d_model": 65536,
    "num_heads": 1024,
    "dff": 262144,
    "vocab_size": 2**24,
    "max_len": 2**20,
}

#: The most weights a language model's recipe may describe (about the
#: embeddings and the blocks' matrices): 2**33 float32 weights are 32 GiB.
MAX_PARAMETERS = 2**33


def check_model_sizes(sizes, where):
    """Refuses sizes above `MODEL_SIZE_LIMITS`, or a model above `MAX_PARAMETERS`.

    Args:
        sizes: a mapping of setting names (any of `MODEL_SIZE_LIMITS`'s) to
            values; other keys, and values that are not ints, are left to
            the builder's own checks.
        where: what the sizes come from, to open the message (a file).

    Raises:
        ValueError: one line naming `where`, the size, its value and the bound.
    """
    for key, bound in MODEL_SIZE_LIMITS.items():
        value = sizes.get(key)
        if is_int(value) and value > bound:
            raise ValueError(
                f"{where}: `{key}` must be at most {bound} "
                f"(tfnorm.limits.MODEL_SIZE_LIMITS). Received: {key}={value!r}"
            )
    count = estimated_parameters(sizes)
    if count > MAX_PARAMETERS:
        raise ValueError(
            f"{where}: the model would have about {count:.3g} weights, more than "
            f"tfnorm.limits.MAX_PARAMETERS={MAX_PARAMETERS}. Received: "
            + ", ".join(f"{k}={sizes[k]!r}" for k in MODEL_SIZE_LIMITS if k in sizes)
        )


def estimated_parameters(sizes):
    """About how many weights a Transformer of `sizes` has (0 when unknown):
    per block 4 d_model**2 (attention) + 3 d_model * dff (a gated
    feed-forward), plus the vocabulary and position embeddings."""
    values = {k: sizes.get(k) for k in MODEL_SIZE_LIMITS}
    if not all(is_int(v) and v > 0 for v in values.values() if v is not None):
        return 0
    d_model = values["d_model"] or 0
    dff = values["dff"] or 4 * d_model
    blocks = (values["num_layers"] or 0) * (4 * d_model**2 + 3 * d_model * dff)
    embeddings = ((values["vocab_size"] or 0) + (values["max_len"] or 0)) * d_model
    return blocks + embeddings
