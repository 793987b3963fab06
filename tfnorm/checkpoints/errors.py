"""`CheckpointError`: a checkpoint that cannot be read or written, on one line."""

from __future__ import annotations


class CheckpointError(ValueError):
    """A checkpoint file, key or setting tfnorm cannot use.

    The message is one line and names the file (and the key or setting, with
    its value) that is wrong, and where there is one, the way out: a
    `pytorch_model.bin` directory says how to write safetensors instead, an
    unknown `model_type` lists the known ones.

    Example:

    >>> raise CheckpointError("ckpt/config.json: unknown model_type 'mamba'")
    Traceback (most recent call last):
    ...
    tfnorm.checkpoints.errors.CheckpointError: ckpt/config.json: unknown model_type 'mamba'
    """
