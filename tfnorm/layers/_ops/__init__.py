"""The normalisation formulas as plain TensorFlow functions.

Layers delegate their math here so tests can call the formulas directly.
Statistics are computed in float32 (float64 for float64 inputs). LayerNorm,
RMSNorm and ScaleNorm take inputs in their own dtype and return
`output_dtype` (casts inside the formula fuse with its ops under XLA);
partial RMSNorm takes inputs already in the statistics dtype. `axes` are
positive and sorted; `gamma`/`beta` are None or have the rank of `x` with
size 1 outside `axes`, in the statistics dtype.

One module per concern: `primitives` (the reductions and the affine the
formulas are written against), `routes` (which primitives serve a call),
`guarded` (the fast and careful paths), and one `*_formula` module per norm.
"""

from __future__ import annotations

from tfnorm.layers._ops.layer_norm_formula import layer_norm
from tfnorm.layers._ops.rms_norm_formula import partial_rms_norm, rms_norm
from tfnorm.layers._ops.scale_norm_formula import scale_norm

__all__ = ["layer_norm", "partial_rms_norm", "rms_norm", "scale_norm"]
