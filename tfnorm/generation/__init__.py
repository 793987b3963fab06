"""Text generation: `generate` (sampling with a KV cache, sliding the
window past the model's context) and the samplers that pick each token.

One vocabulary everywhere (`tfnorm.generate`, `TextGenerator`, `tfnorm
generate`): `temperature` (0 = greedy), `top_k`, `top_p`. A sampler can
also be named (`get("top_k", k=20)`) or be a `Sampler` of your own.
"""

from __future__ import annotations

from tfnorm.generation.generator import generate
from tfnorm.generation.greedy_sampler import GreedySampler
from tfnorm.generation.registry import SAMPLERS, get
from tfnorm.generation.sampler import Sampler
from tfnorm.generation.top_k_sampler import TopKSampler
from tfnorm.generation.top_p_sampler import TopPSampler

__all__ = [
    "GreedySampler",
    "SAMPLERS",
    "Sampler",
    "TopKSampler",
    "TopPSampler",
    "generate",
    "get",
]
