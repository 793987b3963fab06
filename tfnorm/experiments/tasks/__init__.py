"""The tasks of `tfnorm compare` (`make_task`).

* `ReverseTask`, token-level and synthetic: the target sequence is the input
  reversed, which needs attention across the whole sequence. Fresh random
  batches at every step; token accuracy on a fixed evaluation set (chance =
  1 / vocab_size). `tfnorm.experiments.tasks.padded.PaddedReverseTask` is
  its padded, variable-length form.
* `tfnorm.experiments.tasks.text.MaskedTextTask`: BERT-style masked-language
  modelling on the Python language reference's prose.
* `tfnorm.experiments.tasks.lm.ByteTextTask`: next-byte prediction on the
  same text, for causal decoders.

Each gives batches as `(inputs, targets, weights)`: the loss and the
accuracy are weighted means over tokens (all ones for reverse, the masked
positions for mlm, the real tokens for padded sequences).
"""

from __future__ import annotations

from tfnorm.experiments.tasks.reverse import ReverseTask, reverse_task

__all__ = ["ReverseTask", "make_task", "reverse_task"]


def make_task(cfg):
    """The task `cfg.task` names, at `cfg`'s sizes."""
    if cfg.task == "lm":
        from tfnorm.experiments.tasks.lm import ByteTextTask

        return ByteTextTask(cfg.seq_len, cfg.eval_size)
    if cfg.task == "mlm":
        from tfnorm.experiments.tasks.text import MaskedTextTask

        return MaskedTextTask(
            cfg.vocab_size, cfg.seq_len, cfg.eval_size, unit=cfg.text_unit
        )
    if cfg.variable_length:
        from tfnorm.experiments.tasks.padded import PaddedReverseTask

        return PaddedReverseTask(cfg.vocab_size, cfg.seq_len, cfg.eval_size)
    return ReverseTask(cfg.vocab_size, cfg.seq_len, cfg.eval_size)
