"""`EncoderModel`: a functional encoder whose padding-mask input is optional."""

from __future__ import annotations

from tfnorm._keras import register_model_class
from tfnorm.models.masked_model import MaskedSequenceModel


@register_model_class
class EncoderModel(MaskedSequenceModel):
    """A functional model of `(sequence, padding_mask)` that also takes `sequence` alone.

    `tfnorm.encoder_layer` and `tfnorm.build_encoder` return this class.
    It is an ordinary functional `keras.Model` with two inputs, `sequence`
    `(batch, seq, d_model)` and `padding_mask` `(batch, seq)` (1 for real
    tokens, 0 for padding), plus one convenience: called with the sequence
    alone, it fills in the padding mask itself, as keras-hub's
    `TransformerEncoder(x, padding_mask=None)` does:

    ```
    model(x)                 padding_mask = implicit Keras mask of x, if any,
                             else all ones (every position is real)
    model([x, padding_mask]) as given
    ```

    The implicit mask of `x` (e.g. from `Embedding(mask_zero=True)`) is
    passed on to the output in both forms. Saving and reloading keep both
    call forms (the class is registered as `tfnorm>EncoderModel`).

    Example:

    >>> import numpy as np, tfnorm
    >>> encoder = tfnorm.build_encoder(2, 32, 4, 64)
    >>> encoder(np.zeros((2, 8, 32), "float32")).shape
    TensorShape([2, 8, 32])
    """
