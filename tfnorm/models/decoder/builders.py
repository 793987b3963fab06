"""Functional builders: one decoder layer, and a causal language model with presets."""

from __future__ import annotations

import math

from tfnorm._checks import check_choice, check_number, check_positive_int, check_rate
from tfnorm._keras import keras
from tfnorm.layers.factory import norm_from_spec, norm_takes_epsilon
from tfnorm.models.block_parts import scale_kernels, validate_norm_position
from tfnorm.models.decoder.block import TransformerDecoderBlock
from tfnorm.models.decoder.embeddings import PositionEmbedding, TokenEmbedding
from tfnorm.models.decoder.model import DecoderModel
from tfnorm.models.decoder.options import check_bool
from tfnorm.models.decoder.presets import DECODER_PRESETS
from tfnorm.models.masked_model import MaskedSequenceModel

#: `position_embedding` choices of `build_decoder`.
POSITION_EMBEDDINGS = ("rotary", "learned", "none")

#: Options of `build_decoder` beyond the preset's (all may be overridden).
_OTHER_OPTIONS = {
    "num_kv_heads": None,
    "attention_dropout": None,
    "kernel_initializer": "glorot_uniform",
    "embeddings_initializer": None,
    "rope_scaling": None,
    "attention_bias": None,
    "ffn_bias": None,
    "init_std": None,
}


def decoder_layer(
    d_model,
    num_heads,
    dff,
    dropout_rate=0.0,
    *,
    with_padding_mask=True,
    seq_len=None,
    name="decoder_layer",
    **block_options,
):
    """One decoder layer as a functional `keras.Model`.

    As `tfnorm.encoder_layer`, with a causal `TransformerDecoderBlock`
    (named `"block"`) inside: the model maps a sequence `(batch, seq,
    d_model)`, alone or as `[sequence, padding_mask]`, to the same shape.

    Example:

    >>> import numpy as np, tfnorm
    >>> layer = tfnorm.decoder_layer(32, 4, 64, norm="layer", feed_forward="gelu")
    >>> layer(np.zeros((2, 7, 32), "float32")).shape
    TensorShape([2, 7, 32])

    Args:
        d_model, num_heads, dff, dropout_rate: as `TransformerDecoderBlock`.
        with_padding_mask: bool, whether the model has a (then optional)
            padding-mask input. Defaults to `True`.
        seq_len: int or None, the static sequence length. Defaults to `None`.
        name: the model name. Defaults to `"decoder_layer"`.
        **block_options: the keyword options of `TransformerDecoderBlock`.

    Returns:
        A `tfnorm.models.MaskedSequenceModel` (inputs `sequence`, `padding_mask`),
        or a plain functional model with `with_padding_mask=False`.
    """
    block = TransformerDecoderBlock(
        d_model, num_heads, dff, dropout_rate, name="block", **block_options
    )
    sequence = keras.Input(shape=(seq_len, d_model), name="sequence")
    if not with_padding_mask:
        return keras.Model(sequence, block(sequence), name=name)
    padding_mask = keras.Input(shape=(seq_len,), dtype="float32", name="padding_mask")
    outputs = block(sequence, padding_mask=padding_mask)
    return MaskedSequenceModel([sequence, padding_mask], outputs, name=name)


def _resolve_options(preset, overrides):
    check_choice("preset", preset, tuple(DECODER_PRESETS))
    known = {**DECODER_PRESETS[preset], **_OTHER_OPTIONS}
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(
            f"Unknown option of build_decoder: {unknown[0]!r}. Options: "
            f"{sorted(known)}. Received: {unknown[0]}={overrides[unknown[0]]!r}"
        )
    options = {**known, **overrides}
    if "epsilon" not in overrides and not norm_takes_epsilon(options["norm"]):
        # The preset's epsilon belongs to the preset's norm: a norm without a
        # row statistic (DyT) takes none.
        options["epsilon"] = None
    options["norm_position"] = validate_norm_position(options["norm_position"])
    check_choice(
        "position_embedding", options["position_embedding"], POSITION_EMBEDDINGS
    )
    check_bool("tie_embeddings", options["tie_embeddings"])
    check_rate("dropout_rate", options["dropout_rate"])
    if options["final_norm"] is None:
        options["final_norm"] = options["norm_position"] in ("pre", "sandwich")
    check_bool("final_norm", options["final_norm"])
    if options["init_std"] is not None:
        std = check_number("init_std", options["init_std"], above=0.0)
        # GPT-2's initialisation: every kernel and embedding from N(0, std).
        options["kernel_initializer"] = keras.initializers.RandomNormal(0.0, std)
        options["embeddings_initializer"] = keras.initializers.RandomNormal(0.0, std)
    return options


def _scale_residual_projections(blocks, num_layers):
    """GPT-2's residual scaling: the kernels that write into the residual
    stream (attention output, feed-forward output) times 1/sqrt(2 L), so
    the stream's variance does not grow with the depth L at initialisation."""
    layers = [layer for b in blocks for layer in (b.attention_output, b.ffn_output)]
    scale_kernels(layers, 1.0 / math.sqrt(2.0 * num_layers))


def _block(index, num_layers, d_model, num_heads, dff, options):
    rotary = options["position_embedding"] == "rotary"
    return TransformerDecoderBlock(
        d_model,
        num_heads,
        dff,
        options["dropout_rate"],
        num_kv_heads=options["num_kv_heads"],
        rope_max_wavelength=options["rope_max_wavelength"] if rotary else None,
        feed_forward=options["feed_forward"],
        use_bias=options["use_bias"],
        norm=options["norm"],
        norm_position=options["norm_position"],
        epsilon=options["epsilon"],
        attention_dropout=options["attention_dropout"],
        kernel_initializer=options["kernel_initializer"],
        num_layers_total=num_layers,
        rope_scaling=options["rope_scaling"] if rotary else None,
        attention_bias=options["attention_bias"],
        ffn_bias=options["ffn_bias"],
        name=f"block_{index}",
    )


def build_decoder(
    num_layers,
    d_model,
    num_heads,
    dff,
    *,
    vocab_size,
    max_len,
    preset="llama",
    name="decoder",
    **options,
):
    """A decoder-only causal language model: token ids → next-token logits.

    Token embedding (`token_embedding`), learned positions if chosen
    (`position_embedding`), dropout (`embedding_dropout`), `num_layers`
    `TransformerDecoderBlock`s (`block_0 ...`), a final norm (`final_norm`)
    and the output head: the token embedding used in reverse when tied,
    else a Dense layer without bias (`lm_head`). Logits are float32 under
    mixed precision; train with
    `SparseCategoricalCrossentropy(from_logits=True)` on the ids shifted by
    one. `tfnorm.generate` samples from it.

    Presets (every entry can be overridden by a keyword of the same name):

    ```
                        "llama"            "gpt2"
    norm, epsilon       "rms", 1e-6        "layer", 1e-5
    norm_position       "pre"              "pre"
    position_embedding  "rotary"           "learned"
    feed_forward        "swiglu"           "gelu_tanh"
    use_bias            False              True
    tie_embeddings      False              True
    final_norm          None               None   (one after Pre-/Sandwich-LN)
    dropout_rate        0.0                0.1
    ```

    Example:

    >>> import numpy as np, tfnorm
    >>> model = tfnorm.build_decoder(
    ...     2, 32, 4, 64, vocab_size=100, max_len=16, preset="gpt2",
    ...     norm_position="post")
    >>> model(np.array([[5, 8, 13]])).shape
    TensorShape([1, 3, 100])

    Args:
        num_layers: int, the number of blocks.
        d_model, num_heads, dff: as `TransformerDecoderBlock`.
        vocab_size: int, the number of token ids.
        max_len: int, the longest sequence (the learned position table's
            size, and `tfnorm.generate`'s limit).
        preset: `"llama"` or `"gpt2"`. Defaults to `"llama"`.
        name: the model name. Defaults to `"decoder"`.
        **options: the preset's entries above, and `num_kv_heads`,
            `rope_max_wavelength` (10000), `attention_dropout`,
            `kernel_initializer` (`"glorot_uniform"`), `rope_scaling`,
            `attention_bias`, `ffn_bias` (None: as the block),
            `embeddings_initializer` (None: normal, std 0.02 for tokens and
            0.01 for positions) and `init_std` (None; a float draws every
            kernel and embedding from N(0, init_std) and scales the
            attention-output and feed-forward-output kernels by
            1/sqrt(2 * num_layers), as GPT-2 does; it replaces both
            initializers). `final_norm=None` adds one after Pre-LN and
            Sandwich-LN stacks only.

    Returns:
        A `tfnorm.models.DecoderModel`.
    """
    num_layers = check_positive_int("num_layers", num_layers)
    vocab_size = check_positive_int("vocab_size", vocab_size)
    max_len = check_positive_int("max_len", max_len)
    options = _resolve_options(preset, options)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input(shape=(None,), dtype="float32", name="padding_mask")
    embedding = TokenEmbedding(
        vocab_size,
        d_model,
        embeddings_initializer=options["embeddings_initializer"],
        name="token_embedding",
    )
    x = embedding(token_ids)
    if options["position_embedding"] == "learned":
        x = PositionEmbedding(
            max_len,
            d_model,
            embeddings_initializer=options["embeddings_initializer"],
            name="position_embedding",
        )(x)
    x = keras.layers.Dropout(options["dropout_rate"], name="embedding_dropout")(x)
    blocks = []
    for index in range(num_layers):
        blocks.append(_block(index, num_layers, d_model, num_heads, dff, options))
        x = blocks[-1](x, padding_mask=padding_mask)
    if options["init_std"] is not None:
        _scale_residual_projections(blocks, num_layers)
    if options["final_norm"]:
        x = norm_from_spec(
            options["norm"], "norm", epsilon=options["epsilon"], name="final_norm"
        )(x)
    if options["tie_embeddings"]:
        logits = embedding(x, reverse=True)
    else:
        logits = keras.layers.Dense(
            vocab_size, use_bias=False, dtype="float32", name="lm_head"
        )(x)
    model = DecoderModel([token_ids, padding_mask], logits, name=name)
    model.max_len = max_len
    return model
