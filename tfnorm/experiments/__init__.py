"""Experiments that test the claims behind tfnorm's defaults.

* The compare experiment, one name for one experiment: Post-LN vs Pre-LN
  with and without learning-rate warm-up, the run behind `tfnorm compare`
  and notebook 02. `compare_experiment` runs it, `compare_runs` trains one
  run (with the training loop of `tfnorm.training.loop.driver`),
  `compare_settings` holds its `CompareConfig`, `compare_report` and
  `compare_lm_report` write its tables (with `figures`, the plots both
  share), `compare_readers` read its settings. Its tasks are in `tasks/`:
  `tasks.reverse.ReverseTask`, `tasks.text.MaskedTextTask`
  (masked-language modelling on the Python
  language reference, `pydoc_data.topics`) and `tasks.lm.ByteTextTask`
  (next-byte prediction for causal decoders); its depth sweep `depth_sweep`.
  Its controls for the seed articles' claims (checked in `docs/claims.md`):
  `controls` (`gamma_init`, `input_offset`, the embeddings' spread, a
  per-position offset as the only position signal, the layered epsilon,
  and a batch norm and a LayerNorm with compute-dtype statistics, outside
  the norm family), `tasks.padded` (padded, variable-length sequences),
  `claim_measures` (NaN/Inf steps, the first broken norm, every step's loss
  scale, decision and weight finiteness, the train/inference gap),
  `batch_gradients` (the batch-to-batch gradient variance per block at
  fixed weights) and `claim_settings` (the second round's settings).
* `gradients`: per-layer gradient norms at initialisation (Xiong et al.,
  2020), the measurement behind the depth argument for warm-up;
  `layer_gradients` the per-block gradient norms during training and their
  spread (across layers, over time), which every compare run records.

Kept apart from `tfnorm.training`, which holds the reusable training pieces
and the `tfnorm train` application.
"""

from __future__ import annotations
