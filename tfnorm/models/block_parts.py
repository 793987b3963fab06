"""What a Transformer block of tfnorm is made of, beside its layers: the norm
positions and DeepNet's constants, the norm spec it stores and the norms it
builds from it, the residual wiring of its two branches, per-kernel
initializers and the attention mask it builds from padding.

Nothing here is specific to an encoder or a decoder: `TransformerEncoderBlock`
and `TransformerDecoderBlock` take the same pieces.
"""

from __future__ import annotations

from tfnorm._checks import check_choice, check_positive_int, check_rate
from tfnorm._keras import build_sublayer, keras, tf
from tfnorm.choices import NORM_POSITIONS
from tfnorm.layers.factory import norm_from_spec


def validate_norm_position(norm_position):
    """Returns `norm_position` lower-cased, or raises naming the four choices."""
    if isinstance(norm_position, str) and norm_position.lower() in NORM_POSITIONS:
        return norm_position.lower()
    return check_choice("norm_position", norm_position, NORM_POSITIONS)


def deepnorm_alpha(num_layers_total):
    """DeepNet's residual scale α = (2L)^(1/4) for an L-layer encoder."""
    return (2.0 * num_layers_total) ** 0.25


def residual_scale(norm_position, num_layers_total):
    """α for DeepNorm, 1 for the other positions."""
    if norm_position == "deepnorm":
        return deepnorm_alpha(num_layers_total)
    return 1.0


def deepnorm_beta(num_layers_total):
    """DeepNet's initialisation gain β = (8L)^(-1/4) for an L-layer encoder."""
    return (8.0 * num_layers_total) ** -0.25


def optional_rate(name, rate):
    """`rate` checked as a dropout rate, or None (the block's default)."""
    return None if rate is None else check_rate(name, rate)


def checked_depth(norm_position, num_layers_total, builder="tfnorm.build_encoder"):
    """`num_layers_total` checked: a positive int or None, required by
    DeepNorm (its residual scale and initial gain depend on the depth);
    the error names `builder`, the function that passes it."""
    if num_layers_total is not None:
        num_layers_total = check_positive_int("num_layers_total", num_layers_total)
    if norm_position == "deepnorm" and num_layers_total is None:
        raise ValueError(
            "norm_position='deepnorm' needs the stack's total depth for "
            "its residual scale and initial weight gain. Pass "
            f"`num_layers_total` ({builder} does). Received: "
            "num_layers_total=None"
        )
    return num_layers_total


def serializable_norm_spec(norm, epsilon):
    """`norm` as a block stores it in its config: a name or config dict as
    given, a class or an instance as its config dict (JSON-serialisable).

    A trial norm is made first, so a bad spec or epsilon fails here, in the
    block's `__init__`.
    """
    norm_from_spec(norm, "norm", epsilon=epsilon)
    if isinstance(norm, (str, dict)):
        return norm
    return keras.layers.serialize(norm_from_spec(norm, "norm"))


def norm_names(norm_position):
    """The attributes holding a block's norms at `norm_position`."""
    names = ["attention_norm", "ffn_norm"]
    if norm_position == "sandwich":
        names += ["attention_output_norm", "ffn_output_norm"]
    return names


def build_norms(block, shape):
    """Makes and builds `block`'s norms from its `norm` and `epsilon`, each
    an attribute named like the layer (`block.ffn_norm`)."""
    for name in norm_names(block.norm_position):
        norm = norm_from_spec(
            block.norm,
            "norm",
            epsilon=block.epsilon,
            name=name,
            dtype=block.dtype_policy,
        )
        build_sublayer(norm, shape)
        setattr(block, name, norm)


def checked_block_input(block, input_shape):
    """`input_shape` as a `TensorShape`, checked to be `(batch, seq,
    d_model)` of `block`."""
    shape = tf.TensorShape(input_shape)
    if shape.rank != 3 or shape[-1] != block.d_model:
        raise ValueError(
            f"{type(block).__name__} expects inputs of shape (batch, seq, "
            f"d_model={block.d_model}). Received: input_shape={input_shape}"
        )
    return shape


def through_branches(
    block, x, attention_branch, ffn_branch, training, padding_mask=None
):
    """`x` through the attention branch, then the FFN branch, each with its
    residual connection, norms and output dropout at `block.norm_position`:

    ```
    pre:       x + dropout(branch(norm(x)))
    sandwich:  x + dropout(output_norm(branch(norm(x))))
    post:      norm(x + dropout(branch(x)))
    deepnorm:  norm(alpha * x + dropout(branch(x)))
    ```

    A norm whose statistics span positions (one that sets
    `takes_padding_mask`, like the batch-norm control of
    `tfnorm.experiments.controls`) is given `padding_mask`; the family's
    norms work row by row and need none.
    """
    position = block.norm_position
    for branch, first, second, dropout in (
        (
            attention_branch,
            block.attention_norm,
            getattr(block, "attention_output_norm", None),
            block.attention_dropout_layer,
        ),
        (
            ffn_branch,
            block.ffn_norm,
            getattr(block, "ffn_output_norm", None),
            block.output_dropout,
        ),
    ):
        if position == "pre":
            x = x + dropout(
                branch(apply_norm(first, x, padding_mask)), training=training
            )
        elif position == "sandwich":
            x = x + dropout(
                apply_norm(
                    second,
                    branch(apply_norm(first, x, padding_mask)),
                    padding_mask,
                ),
                training=training,
            )
        else:  # "post" and "deepnorm"
            residual = x
            if position == "deepnorm":
                residual = residual * tf.cast(block.residual_scale, x.dtype)
            x = apply_norm(
                first, residual + dropout(branch(x), training=training), padding_mask
            )
    return x


def scale_kernels(dense_layers, gain):
    """Multiplies the kernels of `dense_layers` by `gain` (DeepNet's β).

    MultiHeadAttention has one kernel initializer for all four projections,
    but DeepNet scales only value and output, so kernels are scaled after
    creation; loading saved weights overwrites this, as it should.
    """
    for dense in dense_layers:
        with tf.init_scope():
            dense.kernel.assign(dense.kernel * gain)


def combined_attention_mask(x, padding_mask, attention_mask):
    """The boolean `(batch, query, key)` mask for self-attention over `x`:
    keys hidden where `padding_mask` is 0, AND `attention_mask` if given;
    None when neither is given."""
    mask = None
    if padding_mask is not None:
        keys = tf.cast(padding_mask, tf.bool)[:, tf.newaxis, :]
        queries = tf.ones(tf.shape(x)[:2], dtype=tf.bool)[:, :, tf.newaxis]
        mask = tf.logical_and(queries, keys)
    if attention_mask is not None:
        attention_mask = tf.cast(attention_mask, tf.bool)
        mask = attention_mask if mask is None else tf.logical_and(mask, attention_mask)
    return mask


def apply_norm(norm, x, padding_mask=None):
    """`norm(x)`, given `padding_mask` too when the norm's statistics span
    positions and it asks for one (`takes_padding_mask`)."""
    if padding_mask is not None and getattr(norm, "takes_padding_mask", False):
        return norm(x, mask=padding_mask)
    return norm(x)
