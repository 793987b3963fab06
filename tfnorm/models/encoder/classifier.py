"""`build_classifier`: a Transformer text classifier from token ids to logits."""

from __future__ import annotations

from tfnorm._checks import check_positive_int, check_rate
from tfnorm._keras import keras
from tfnorm.models.encoder.builders import build_encoder
from tfnorm.models.encoder.text_layers import (
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
    validate_pooling,
)


def build_classifier(
    vocab_size,
    max_len,
    num_classes,
    *,
    num_layers,
    d_model,
    num_heads,
    dff,
    norm="layer",
    norm_position="pre",
    pooling="mean",
    dropout_rate=0.1,
    epsilon=None,
    final_norm=None,
    embeddings_initializer="uniform",
    pad_id=0,
    name="classifier",
    **block_options,
):
    """A Transformer text classifier: token ids → class **logits**.

    Token + learned position embeddings (`embedding`), dropout, the encoder
    from `build_encoder` (nested as the sub-model `encoder`), pooling that
    ignores padding (`pooling`), dropout and a Dense head (`logits`, kept
    in float32 under mixed precision).

    The model returns logits, not probabilities: compile with
    `keras.losses.SparseCategoricalCrossentropy(from_logits=True)`. Taking
    the log of a softmax computed separately loses precision for confident
    predictions (probabilities round to 0 or 1, especially in float16),
    while the fused log-softmax inside the loss stays exact; apply
    `softmax` yourself when you need probabilities.

    Example:

    >>> import numpy as np, tfnorm
    >>> model = tfnorm.build_classifier(
    ...     1000, 16, 2, num_layers=2, d_model=32, num_heads=4, dff=64)
    >>> ids = np.array([[5, 8, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    >>> model(ids).shape
    TensorShape([1, 2])

    Args:
        vocab_size: int, the number of token ids.
        max_len: int, the sequence length of the inputs `(batch, max_len)`.
        num_classes: int, the number of output logits.
        num_layers, d_model, num_heads, dff: the encoder's size.
        norm: a `tfnorm.get_norm` spec for every norm. Defaults to
            `"layer"`.
        norm_position: `"post"`, `"pre"`, `"sandwich"` or `"deepnorm"`.
            Defaults to `"pre"`.
        pooling: `"mean"` (average over real tokens) or `"cls"` (the first
            token's output; put a classification token first). Defaults to
            `"mean"`.
        dropout_rate: float in [0, 1), used after the embeddings, in the
            blocks and before the head. Defaults to `0.1`.
        epsilon: as `build_encoder`. Defaults to `None`.
        final_norm: as `build_encoder`. Defaults to `None`.
        embeddings_initializer: initializer of the token and position
            tables. Defaults to `"uniform"`.
        pad_id: int, the padding token id. Defaults to `0`.
        name: the model name. Defaults to `"classifier"`.
        **block_options: other `TransformerEncoderBlock` options.

    Returns:
        A `keras.Model` from int token ids `(batch, max_len)` to logits
        `(batch, num_classes)`.
    """
    vocab_size = check_positive_int("vocab_size", vocab_size)
    max_len = check_positive_int("max_len", max_len)
    num_classes = check_positive_int("num_classes", num_classes)
    pooling = validate_pooling(pooling)
    dropout_rate = check_rate("dropout_rate", dropout_rate)

    encoder = build_encoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        dropout_rate=dropout_rate,
        norm=norm,
        norm_position=norm_position,
        epsilon=epsilon,
        final_norm=final_norm,
        seq_len=max_len,
        **block_options,
    )
    token_ids = keras.Input(shape=(max_len,), dtype="int32", name="token_ids")
    x = TokenAndPositionEmbedding(
        vocab_size,
        max_len,
        d_model,
        embeddings_initializer=embeddings_initializer,
        name="embedding",
    )(token_ids)
    padding_mask = PaddingMask(pad_id, name="padding_mask")(token_ids)
    x = keras.layers.Dropout(dropout_rate, name="embedding_dropout")(x)
    x = encoder([x, padding_mask])
    x = SequencePooling(pooling, name="pooling")([x, padding_mask])
    x = keras.layers.Dropout(dropout_rate, name="head_dropout")(x)
    logits = keras.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(token_ids, logits, name=name)
