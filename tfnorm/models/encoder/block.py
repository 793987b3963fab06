"""`TransformerEncoderBlock`: one encoder layer with a choice of norm position."""

from __future__ import annotations

from tfnorm._checks import check_block_sizes, check_rate
from tfnorm._keras import (
    Layer,
    attention_projections,
    build_attention,
    build_sublayer,
    get_keras_mask,
    keras,
    register_serializable,
    single_input_build_config,
    tf,
    without_keras_mask,
)
from tfnorm.models.block_parts import (
    build_norms,
    checked_block_input,
    checked_depth,
    combined_attention_mask,
    deepnorm_beta,
    norm_names,
    optional_rate,
    residual_scale,
    scale_kernels,
    serializable_norm_spec,
    through_branches,
    validate_norm_position,
)
from tfnorm.models.encoder.keras_hub import (
    copy_keras_hub_encoder_weights,
    keras_hub_encoder_options,
)
from tfnorm.models.matrix_initializer import (
    MatrixInitializer,
    kernel_initializer_copy,
    redraw_seeded_projections,
)


@register_serializable
class TransformerEncoderBlock(Layer):
    """One Transformer encoder layer: self-attention and a feed-forward network.

    The block maps `(batch, seq, d_model)` to the same shape. Where its norms
    sit is one argument, `norm_position`, with the four placements used in
    the literature. With `N` a norm, `D` dropout, `Attn` multi-head
    self-attention and `FFN(x) = W2 · D(act(W1 · x))`:

    ```
    "post"     x = N(x + D(Attn(x)));           x = N(x + D(FFN(x)))
    "pre"      x = x + D(Attn(N(x)));           x = x + D(FFN(N(x)))
    "sandwich" x = x + D(N2(Attn(N1(x))));      x = x + D(N2'(FFN(N1'(x))))
    "deepnorm" x = N(alpha * x + D(Attn(x)));   x = N(alpha * x + D(FFN(x)))
               alpha = (2L) ** (1/4); the attention value and output
               projections and both FFN kernels start scaled by
               beta = (8L) ** (-1/4); L = num_layers_total
    ```

    Post-LN is the original Transformer; it needs learning-rate warm-up
    because, at initialisation, the gradients of its last layers do not
    shrink with depth (Xiong et al., 2020). Pre-LN trains without warm-up,
    and a Pre-LN stack needs a final norm after its last block
    (`tfnorm.build_encoder` adds it). Sandwich-LN adds a second norm on each
    sublayer's output. DeepNorm keeps Post-LN's placement but up-weights the
    residual and down-scales the initial weights so very deep stacks train.

    Every norm comes from `tfnorm.get_norm(norm, epsilon=epsilon)`: choosing
    `norm="rms"` makes all of them RMSNorm. Attention uses
    `key_dim = d_model // num_heads`, so the total attention width equals
    `d_model`.

    Masks: `padding_mask` (`(batch, seq)`, 1 or True for real tokens, 0 for
    padding) hides padded keys from every query. When it is not given, the
    implicit Keras mask of `x` (e.g. from `Embedding(mask_zero=True)`) is
    used instead. `attention_mask` (`(batch, seq, seq)`, 1 = may attend) is
    combined with the padding mask by logical AND. Outputs at padded
    positions are computed but meaningless; outputs at real positions do
    not depend on them. The implicit mask of `x` is passed on to the next
    layer unchanged.

    Sublayers, by name (handy for TensorBoard tags and `get_layer`):
    `attention` (MultiHeadAttention), `attention_dropout` (dropout on the
    attention output, before the residual add), `ffn_inner` (Dense(dff,
    activation)), `ffn_dropout` (dropout between the FFN's two Dense layers),
    `ffn_output` (Dense(d_model)), `output_dropout` (dropout on the FFN
    output, before the residual add), the norms `attention_norm` and
    `ffn_norm`, and for Sandwich-LN also `attention_output_norm` and
    `ffn_output_norm`.

    Example:

    >>> import numpy as np, tfnorm
    >>> block = tfnorm.TransformerEncoderBlock(32, 4, 64, norm_position="pre")
    >>> block(np.zeros((2, 10, 32), "float32")).shape
    TensorShape([2, 10, 32])

    Args:
        d_model: int, the model width (last dimension of the input).
        num_heads: int, the number of attention heads; must divide
            `d_model`.
        dff: int, the width of the feed-forward network's hidden layer.
        dropout_rate: float in [0, 1), the rate of the `attention_dropout`
            and `output_dropout` layers (before each residual add). Defaults
            to `0.1`.
        norm: a `tfnorm.get_norm` spec (`"layer"`, `"rms"`, `"scale"`, a
            config dict, a class or an instance) used for every norm in the
            block. Defaults to `"layer"`.
        norm_position: one of `"post"`, `"pre"`, `"sandwich"`, `"deepnorm"`.
            Defaults to `"pre"`.
        epsilon: float or None, the norms' epsilon; None keeps the norm's
            default. Defaults to `None`.
        activation: the FFN's hidden activation. Defaults to `"gelu"`.
        attention_dropout: float in [0, 1) or None, the dropout rate on the
            attention probabilities inside `attention`. None means
            `dropout_rate`. Defaults to `None`.
        ffn_dropout: float in [0, 1) or None, the rate of `ffn_dropout`
            between the FFN's two Dense layers. None means `dropout_rate`.
            Defaults to `None`.
        kernel_initializer: initializer of the attention and FFN kernels
            (each sublayer gets its own copy). Each attention projection
            is drawn as the `(d_model, d_model)` matrix it stands for
            (`tfnorm.models.MatrixInitializer`), so fans and the resulting
            scale are the same in every Keras version. A seeded
            initializer gives each of the six kernels its own seed
            (`seed + i`), so no two start equal. Defaults to
            `"glorot_uniform"`.
        num_layers_total: int or None, the depth `L` of the whole encoder;
            required by `"deepnorm"` (for α and β), ignored otherwise.
            `tfnorm.build_encoder` fills it in. Defaults to `None`.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).

    Call arguments:
        x: float tensor `(batch, seq, d_model)`; `seq` may be unknown.
        padding_mask: optional `(batch, seq)` tensor, nonzero/True for real
            tokens.
        attention_mask: optional `(batch, seq, seq)` tensor, nonzero/True
            where a query may attend to a key.
        training: bool, whether dropout is active.

    References:
        - [Vaswani et al., 2017. Attention Is All You Need](
          https://arxiv.org/abs/1706.03762)
        - [Xiong et al., 2020. On Layer Normalization in the Transformer
          Architecture](https://arxiv.org/abs/2002.04745)
        - [Ding et al., 2021. CogView](https://arxiv.org/abs/2105.13290)
        - [Wang et al., 2022. DeepNet: Scaling Transformers to 1,000
          Layers](https://arxiv.org/abs/2203.00555)
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.1,
        *,
        norm="layer",
        norm_position="pre",
        epsilon=None,
        activation="gelu",
        attention_dropout=None,
        ffn_dropout=None,
        kernel_initializer="glorot_uniform",
        num_layers_total=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dff = check_block_sizes(
            d_model, num_heads, dff
        )
        self.dropout_rate = check_rate("dropout_rate", dropout_rate)
        self.attention_dropout = optional_rate("attention_dropout", attention_dropout)
        self.ffn_dropout = optional_rate("ffn_dropout", ffn_dropout)
        self.norm = serializable_norm_spec(norm, epsilon)
        self.norm_position = validate_norm_position(norm_position)
        self.epsilon = epsilon
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.num_layers_total = checked_depth(self.norm_position, num_layers_total)
        self.key_dim = self.d_model // self.num_heads
        self.supports_masking = True

    @classmethod
    def from_keras_hub(cls, layer):
        """The block equal to a built `keras_hub.layers.TransformerEncoder`.

        Builds `cls(**options)` from `layer`'s sizes, activation, epsilon,
        dropout sites and norm position (`normalize_first=True` is `"pre"`),
        as `tfnorm.models.encoder.keras_hub.keras_hub_encoder_options` reads
        them, and copies its weights, so outputs match (float32, 1e-5), with
        or without a padding mask. `layer` is not changed, and keras-hub is
        not imported. `tfnorm.models.encoder_from_keras_hub` converts a
        stack.

        Example:

        ```python
        import keras_hub, numpy as np, tfnorm

        hub = keras_hub.layers.TransformerEncoder(64, 4)  # Post-LN
        x = np.random.rand(2, 10, 32).astype("float32")
        hub(x)  # builds it
        block = tfnorm.TransformerEncoderBlock.from_keras_hub(hub)
        np.testing.assert_allclose(block(x), hub(x), atol=1e-5)
        ```

        Args:
            layer: a built `keras_hub.layers.TransformerEncoder`.

        Returns:
            A built block of class `cls`, named like `layer`, with its
            weights.

        Raises:
            ValueError: naming the option (and its value) that tfnorm's
                block has no counterpart for, or saying `layer` is not a
                built keras-hub `TransformerEncoder`.
        """
        options = keras_hub_encoder_options(layer)
        block = cls(name=layer.name, dtype=layer.dtype_policy, **options)
        block.build((None, None, options["d_model"]))
        copy_keras_hub_encoder_weights(layer, block)
        return block

    def _norm_names(self):
        return norm_names(self.norm_position)

    def build(self, input_shape):
        shape = checked_block_input(self, input_shape)
        # Created in this order (norms, attention branch, FFN branch): the
        # order of the block's weights and of unseeded initial draws.
        build_norms(self, shape)
        projections = self._build_attention_branch(shape)
        self._build_ffn_branch(shape)
        if self.norm_position == "deepnorm":
            _, _, value, output = projections
            scale_kernels(
                (value, output, self.ffn_inner, self.ffn_output),
                deepnorm_beta(self.num_layers_total),
            )
        self.built = True

    def _dropout(self, rate, name):
        return keras.layers.Dropout(rate, dtype=self.dtype_policy, name=name)

    def _build_attention_branch(self, shape):
        """`attention` and `attention_dropout`; returns the four projections."""
        attention_rate = (
            self.dropout_rate
            if self.attention_dropout is None
            else self.attention_dropout
        )
        # Each projection is a d_model x d_model matrix (num_heads * key_dim
        # == d_model) stored as a 3-D kernel; drawing it as that matrix gives
        # the fans, hence the scale, every Keras version agrees on.
        self.attention = keras.layers.MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            dropout=attention_rate,
            kernel_initializer=MatrixInitializer(
                kernel_initializer_copy(self.kernel_initializer),
                (self.d_model, self.d_model),
            ),
            dtype=self.dtype_policy,
            name="attention",
        )
        build_attention(self.attention, shape, shape)
        projections = attention_projections(self.attention)
        redraw_seeded_projections(self.kernel_initializer, projections, self.d_model)
        self.attention_dropout_layer = self._dropout(
            self.dropout_rate, "attention_dropout"
        )
        build_sublayer(self.attention_dropout_layer, shape)
        return projections

    def _build_ffn_branch(self, shape):
        """`ffn_inner`, `ffn_dropout`, `ffn_output` and `output_dropout`."""
        ffn_rate = self.dropout_rate if self.ffn_dropout is None else self.ffn_dropout
        self.ffn_inner = keras.layers.Dense(
            self.dff,
            activation=self.activation,
            kernel_initializer=kernel_initializer_copy(self.kernel_initializer, 4),
            dtype=self.dtype_policy,
            name="ffn_inner",
        )
        build_sublayer(self.ffn_inner, shape)
        self.ffn_dropout_layer = self._dropout(ffn_rate, "ffn_dropout")
        build_sublayer(self.ffn_dropout_layer, shape)
        self.ffn_output = keras.layers.Dense(
            self.d_model,
            kernel_initializer=kernel_initializer_copy(self.kernel_initializer, 5),
            dtype=self.dtype_policy,
            name="ffn_output",
        )
        build_sublayer(self.ffn_output, tf.TensorShape([shape[0], shape[1], self.dff]))
        self.output_dropout = self._dropout(self.dropout_rate, "output_dropout")
        build_sublayer(self.output_dropout, shape)

    def get_build_config(self):
        # `build` needs only x's shape, not the masks'.
        return single_input_build_config(super().get_build_config())

    @property
    def residual_scale(self):
        """α for DeepNorm, 1 for the other positions."""
        return residual_scale(self.norm_position, self.num_layers_total)

    def _self_attention(self, x, mask, training):
        # `mask` already holds the padding; attention must not consume the
        # Keras mask of `x`, which Post-LN uses again for its residual.
        x = without_keras_mask(x)
        return self.attention(x, x, attention_mask=mask, training=training)

    def _ffn(self, x, training):
        hidden = self.ffn_inner(x)
        hidden = self.ffn_dropout_layer(hidden, training=training)
        return self.ffn_output(hidden)

    def call(self, x, padding_mask=None, attention_mask=None, training=None, mask=None):
        if padding_mask is None:
            padding_mask = mask if mask is not None else get_keras_mask(x)
        attn_mask = combined_attention_mask(x, padding_mask, attention_mask)

        def attention_branch(inputs):
            return self._self_attention(inputs, attn_mask, training)

        def ffn_branch(inputs):
            return self._ffn(inputs, training)

        return through_branches(
            self, x, attention_branch, ffn_branch, training, padding_mask
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_model": self.d_model,
                "num_heads": self.num_heads,
                "dff": self.dff,
                "dropout_rate": self.dropout_rate,
                "norm": self.norm,
                "norm_position": self.norm_position,
                "epsilon": self.epsilon,
                "activation": keras.activations.serialize(self.activation),
                "attention_dropout": self.attention_dropout,
                "ffn_dropout": self.ffn_dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "num_layers_total": self.num_layers_total,
            }
        )
        return config
