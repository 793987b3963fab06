"""Functional builders: one encoder layer, an encoder stack, a text classifier."""

from __future__ import annotations

from tfnorm._checks import check_positive_int, check_rate
from tfnorm._keras import keras
from tfnorm.layers.factory import norm_from_spec
from tfnorm.models.encoder_block import TransformerEncoderBlock, validate_norm_position
from tfnorm.models.encoder_model import EncoderModel
from tfnorm.models.text_layers import (
    PaddingMask,
    SequencePooling,
    TokenAndPositionEmbedding,
    validate_pooling,
)

# Positions whose last block leaves an un-normalised residual stream, so the
# stack needs one more norm before the output.
_NEEDS_FINAL_NORM = ("pre", "sandwich")


def _model_inputs(d_model, seq_len, with_padding_mask):
    sequence = keras.Input(shape=(seq_len, d_model), name="sequence")
    if not with_padding_mask:
        return sequence, None
    padding_mask = keras.Input(shape=(seq_len,), dtype="float32", name="padding_mask")
    return sequence, padding_mask


def encoder_layer(
    d_model,
    num_heads,
    dff,
    dropout_rate=0.1,
    *,
    with_padding_mask=True,
    seq_len=None,
    name="encoder_layer",
    **block_options,
):
    """One encoder layer as a functional `keras.Model`.

    The model maps a sequence `(batch, seq, d_model)` to the same shape.
    Call it with the sequence alone (every position is real, unless the
    sequence carries an implicit Keras mask, e.g. from
    `Embedding(mask_zero=True)`, which is then honoured and passed on) or
    with `[sequence, padding_mask]`, the mask `(batch, seq)`, 1 for real
    tokens and 0 for padding. It is a `tfnorm.models.EncoderModel` with the
    inputs `sequence` and `padding_mask`; with `with_padding_mask=False` it
    is a plain functional model of the sequence alone. Inside is one
    `TransformerEncoderBlock` named `"block"`.

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.encoder_layer(32, 4, 64, norm_position="post")
    >>> x = np.zeros((2, 7, 32), "float32")
    >>> layer(x).shape
    TensorShape([2, 7, 32])
    >>> mask = np.array([[1] * 7, [1] * 4 + [0] * 3], "float32")
    >>> layer([x, mask]).shape
    TensorShape([2, 7, 32])

    Args:
        d_model, num_heads, dff, dropout_rate: as `TransformerEncoderBlock`.
        with_padding_mask: bool, whether the model has a (then optional)
            padding-mask input. Defaults to `True`.
        seq_len: int or None, the static sequence length of the inputs.
            Defaults to `None` (any length).
        name: the model name. Defaults to `"encoder_layer"`.
        **block_options: the keyword options of `TransformerEncoderBlock`
            (`norm`, `norm_position`, `epsilon`, `activation`,
            `attention_dropout`, `ffn_dropout`, `kernel_initializer`,
            `num_layers_total`).

    Returns:
        A `tfnorm.models.EncoderModel` (a functional `keras.Model`; a plain
        one with `with_padding_mask=False`).
    """
    block = TransformerEncoderBlock(
        d_model, num_heads, dff, dropout_rate, name="block", **block_options
    )
    sequence, padding_mask = _model_inputs(d_model, seq_len, with_padding_mask)
    if padding_mask is None:
        return keras.Model(sequence, block(sequence), name=name)
    outputs = block(sequence, padding_mask=padding_mask)
    return EncoderModel([sequence, padding_mask], outputs, name=name)


def _layer_epsilons(epsilon, num_layers):
    if callable(epsilon):
        return [epsilon(i) for i in range(num_layers)]
    if isinstance(epsilon, (list, tuple)):
        if len(epsilon) != num_layers:
            raise ValueError(
                "A per-layer `epsilon` list needs one value per layer "
                f"(num_layers={num_layers}). Received: epsilon={list(epsilon)!r} "
                f"(length {len(epsilon)})"
            )
        return list(epsilon)
    return [epsilon] * num_layers


def build_encoder(
    num_layers,
    d_model,
    num_heads,
    dff,
    *,
    dropout_rate=0.1,
    norm="layer",
    norm_position="pre",
    epsilon=None,
    final_norm=None,
    with_padding_mask=True,
    seq_len=None,
    name="encoder",
    **block_options,
):
    """A stack of `num_layers` Transformer encoder blocks as a `keras.Model`.

    Inputs and outputs as `encoder_layer`: the sequence alone or
    `[sequence, padding_mask]` → `(batch, seq, d_model)`; without a padding
    mask every position is real unless the sequence carries an implicit
    Keras mask. Blocks are named `block_0 ... block_{L-1}`;
    the optional final norm is `final_norm`, so TensorBoard shows paths like
    `encoder/block_3/attention_norm`.

    A Pre-LN or Sandwich-LN stack ends on an un-normalised residual sum
    whose scale grows with depth, so it needs a final norm; Post-LN and
    DeepNorm blocks already end on a norm. `final_norm=None` follows that
    rule.

    Layer-wise epsilon: `epsilon` may be one value for every norm, a list
    with one value per block, or a callable `layer_index -> epsilon` (e.g.
    `lambda i: 1e-6 if i < 6 else 1e-5`). The final norm uses the last
    block's value. A callable is evaluated here; the saved model stores the
    resulting numbers.

    Example:

    >>> import numpy as np, tfnorm
    >>> encoder = tfnorm.build_encoder(2, 32, 4, 64, norm_position="pre")
    >>> x = np.zeros((2, 8, 32), "float32")
    >>> encoder(x).shape
    TensorShape([2, 8, 32])
    >>> mask = np.array([[1] * 8, [1] * 5 + [0] * 3], "float32")
    >>> encoder([x, mask]).shape
    TensorShape([2, 8, 32])
    >>> [layer.name for layer in encoder.layers[2:]]
    ['block_0', 'block_1', 'final_norm']

    Args:
        num_layers: int, the number of blocks `L`. DeepNorm's α and β use
            it.
        d_model, num_heads, dff: as `TransformerEncoderBlock`.
        dropout_rate: float in [0, 1). Defaults to `0.1`.
        norm: a `tfnorm.get_norm` spec for every norm. Defaults to
            `"layer"`.
        norm_position: `"post"`, `"pre"`, `"sandwich"` or `"deepnorm"`.
            Defaults to `"pre"`.
        epsilon: None, a float, a list of `num_layers` floats, or a callable
            `index -> float`. Defaults to `None` (the norm's default).
        final_norm: None (automatic, see above), True or False. Defaults to
            `None`.
        with_padding_mask: bool, whether the model has a (then optional)
            padding-mask input. Defaults to `True`.
        seq_len: int or None, the static sequence length. Defaults to
            `None`.
        name: the model name. Defaults to `"encoder"`.
        **block_options: other `TransformerEncoderBlock` options
            (`activation`, `attention_dropout`, `ffn_dropout`,
            `kernel_initializer`).

    Returns:
        A `tfnorm.models.EncoderModel` (a functional `keras.Model`; a plain
        one with `with_padding_mask=False`).
    """
    num_layers = check_positive_int("num_layers", num_layers)
    norm_position = validate_norm_position(norm_position)
    if "num_layers_total" in block_options:
        raise ValueError(
            "build_encoder sets each block's `num_layers_total` to `num_layers`. "
            f"Received: num_layers_total={block_options['num_layers_total']!r}"
        )
    epsilons = _layer_epsilons(epsilon, num_layers)
    if final_norm is None:
        final_norm = norm_position in _NEEDS_FINAL_NORM

    sequence, padding_mask = _model_inputs(d_model, seq_len, with_padding_mask)
    x = sequence
    for index in range(num_layers):
        block = TransformerEncoderBlock(
            d_model,
            num_heads,
            dff,
            dropout_rate,
            norm=norm,
            norm_position=norm_position,
            epsilon=epsilons[index],
            num_layers_total=num_layers,
            name=f"block_{index}",
            **block_options,
        )
        x = block(x) if padding_mask is None else block(x, padding_mask=padding_mask)
    if final_norm:
        x = norm_from_spec(norm, "norm", epsilon=epsilons[-1], name="final_norm")(x)
    if padding_mask is None:
        return keras.Model(sequence, x, name=name)
    return EncoderModel([sequence, padding_mask], x, name=name)


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
