"""Functional builders: one encoder layer, an encoder stack, and an encoder
stack from keras-hub's."""

from __future__ import annotations

from tfnorm._checks import check_positive_int
from tfnorm._keras import keras
from tfnorm.layers.factory import norm_from_spec
from tfnorm.models.block_parts import apply_norm
from tfnorm.models.encoder.block import TransformerEncoderBlock, validate_norm_position
from tfnorm.models.encoder.keras_hub import (
    copy_keras_hub_encoder_weights,
    keras_hub_encoder_options,
    keras_hub_option,
)
from tfnorm.models.encoder.model import EncoderModel

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
        final = norm_from_spec(norm, "norm", epsilon=epsilons[-1], name="final_norm")
        x = apply_norm(final, x, padding_mask)
    if padding_mask is None:
        return keras.Model(sequence, x, name=name)
    return EncoderModel([sequence, padding_mask], x, name=name)


def encoder_from_keras_hub(layers, name="encoder"):
    """A `tfnorm.build_encoder` model equal to a stack of keras-hub encoders.

    `layers` are built `keras_hub.layers.TransformerEncoder`s applied one
    after the other (as in keras-hub's BERT backbone, say). Each is read as
    by `TransformerEncoderBlock.from_keras_hub`; all must share the hidden size,
    heads, `intermediate_dim`, dropout, activation and `normalize_first`
    (the epsilon may differ per layer). The model is
    `tfnorm.build_encoder(len(layers), ...)` without a final norm: Post-LN
    blocks end on a norm, and keras-hub's Pre-LN encoders have none after
    the last block (a keras-hub model that adds one keeps it outside the
    stack). Blocks `block_0, block_1, ...` get the layers' weights, so the
    model's outputs match the stack's, with or without a padding mask
    (`model([x, padding_mask])`).

    Example:

    ```python
    import keras_hub
    import numpy as np
    from tfnorm.models import encoder_from_keras_hub

    x = np.random.rand(2, 10, 32).astype("float32")
    stack = [keras_hub.layers.TransformerEncoder(64, 4) for _ in range(2)]
    y = x
    for layer in stack:
        y = layer(y)
    encoder = encoder_from_keras_hub(stack)  # Post-LN, no final norm
    np.testing.assert_allclose(encoder(x), y, atol=1e-5)
    ```

    Args:
        layers: a non-empty list of built keras-hub `TransformerEncoder`s.
        name: the model name. Defaults to `"encoder"`.

    Returns:
        A `tfnorm.models.EncoderModel` (inputs: the sequence, or
        `[sequence, padding_mask]`).

    Raises:
        ValueError: `layers` is empty, a layer cannot be converted (see
            `TransformerEncoderBlock.from_keras_hub`), or the layers differ in an
            option other than the epsilon (the message names it and both
            values).
    """
    layers = list(layers)
    if not layers:
        raise ValueError(
            "encoder_from_keras_hub needs at least one TransformerEncoder. "
            f"Received: layers={layers!r}"
        )
    options = [
        keras_hub_encoder_options(layer, f"layers[{index}] ({layer.name})")
        for index, layer in enumerate(layers)
    ]
    # Compared by keras-hub's names, which the user knows.
    shared = {
        "hidden_dim": "d_model",
        "intermediate_dim": "dff",
        "num_heads": "num_heads",
        "dropout": "dropout_rate",
        "activation": "activation",
        "normalize_first": "norm_position",
    }
    first = options[0]
    for index, other in enumerate(options[1:], start=1):
        for hub_name, key in shared.items():
            if other[key] != first[key]:
                ours, theirs = (
                    keras_hub_option(layers[0], hub_name),
                    keras_hub_option(layers[index], hub_name),
                )
                raise ValueError(
                    "build_encoder gives every block the same options, but "
                    f"layers[0] and layers[{index}] differ in `{hub_name}`. "
                    f"Received: {hub_name}={ours!r} and {hub_name}={theirs!r}"
                )
    block_options = dict(first)
    d_model = block_options.pop("d_model")
    num_heads = block_options.pop("num_heads")
    dff = block_options.pop("dff")
    block_options.pop("epsilon")
    model = build_encoder(
        len(layers),
        d_model,
        num_heads,
        dff,
        epsilon=[o["epsilon"] for o in options],
        final_norm=False,
        name=name,
        **block_options,
    )
    for index, layer in enumerate(layers):
        copy_keras_hub_encoder_weights(layer, model.get_layer(f"block_{index}"))
    return model
