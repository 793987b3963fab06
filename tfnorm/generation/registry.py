"""The samplers by name: `get("top_k", k=20)`."""

from __future__ import annotations

from tfnorm.generation.greedy_sampler import GreedySampler
from tfnorm.generation.sampler import Sampler
from tfnorm.generation.top_k_sampler import TopKSampler
from tfnorm.generation.top_p_sampler import TopPSampler

#: Sampler names `get` and `generate(sampler=...)` take ("random": the
#: whole softmax, the base `Sampler`).
SAMPLERS = {
    "greedy": GreedySampler,
    "random": Sampler,
    "top_k": TopKSampler,
    "top_p": TopPSampler,
}


def get(name, **kwargs):
    """The sampler called `name` (a key of `SAMPLERS`), built with `kwargs`.

    Example:

    >>> from tfnorm import generation
    >>> generation.get("top_k", k=5, temperature=0.5)
    TopKSampler(k=5, temperature=0.5)

    Raises:
        ValueError: an unknown name, naming the argument `sampler`.
    """
    key = name.lower() if isinstance(name, str) else None
    if key not in SAMPLERS:
        raise ValueError(
            f"`sampler` must be one of {', '.join(map(repr, SAMPLERS))} or a "
            f"tfnorm.generation.Sampler. Received: sampler={name!r}"
        )
    return SAMPLERS[key](**kwargs)
