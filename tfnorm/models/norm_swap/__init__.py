"""Swapping the norms of a built model: `replace_norms` and the table of
each norm's counterpart (Keras's, keras-hub's and tfnorm's)."""

from __future__ import annotations

from tfnorm.models.norm_swap.counterparts import ConversionError
from tfnorm.models.norm_swap.swap import replace_norms

__all__ = ["ConversionError", "replace_norms"]
