"""`TransformerDecoderBlock`: one causal (decoder-only) layer with a choice of norm position."""

from __future__ import annotations

from tfnorm._checks import check_block_sizes, check_choice, check_rate
from tfnorm._keras import (
    Layer,
    build_sublayer,
    get_keras_mask,
    keras,
    register_serializable,
    single_input_build_config,
    tf,
)
from tfnorm.models.block_parts import (
    build_norms,
    checked_block_input,
    checked_depth,
    deepnorm_beta,
    norm_names,
    optional_rate,
    residual_scale,
    scale_kernels,
    serializable_norm_spec,
    through_branches,
    validate_norm_position,
)
from tfnorm.models.decoder.attention import (
    causal_mask,
    grouped_attention,
    rotary_embedding,
    update_cache,
)
from tfnorm.models.decoder.options import (
    ACTIVATIONS,
    FEED_FORWARDS,
    KERNELS,
    check_bool,
    check_num_kv_heads,
    check_rope,
    dense,
    projection,
)


@register_serializable
class TransformerDecoderBlock(Layer):
    """One decoder-only Transformer layer: causal self-attention and a feed-forward network.

    Maps `(batch, seq, d_model)` to the same shape; position `i` of the
    output depends on input positions `0..i` only. With `N` a norm, `D`
    dropout and `Attn` causal self-attention, the norms sit as in
    `tfnorm.TransformerEncoderBlock` (`"pre"` is GPT-2 and LLaMA):

    ```
    "post"     x = N(x + D(Attn(x)));           x = N(x + D(FFN(x)))
    "pre"      x = x + D(Attn(N(x)));           x = x + D(FFN(N(x)))
    "sandwich" x = x + D(N2(Attn(N1(x))));      x = x + D(N2'(FFN(N1'(x))))
    "deepnorm" x = N(alpha * x + D(Attn(x)));   x = N(alpha * x + D(FFN(x)))

    Attn(x) = concat_i(softmax(q_i k_j^T / sqrt(h) + causal) v_j) W_o,
              j = i // (num_heads / num_kv_heads)
    FFN(x)  = W2 · (silu(W_gate · x) * (W1 · x))   "swiglu"
    FFN(x)  = W2 · act(W1 · x + b1) + b2          "gelu", "gelu_tanh", "relu"
    ```

    Queries and keys are rotated by their position (rotary embeddings, RoPE)
    unless `rope_max_wavelength=None`; a model with learned absolute
    positions adds them before the first block. With `num_kv_heads <
    num_heads`, groups of query heads share one key/value head
    (grouped-query attention): the KV cache shrinks by the same factor.

    Masks: `padding_mask` (`(batch, seq)`, nonzero for real tokens) hides
    padded keys, on top of the causal mask; without it the implicit Keras
    mask of `x` is used, if any. Outputs at padded positions are computed
    but meaningless. Positions count from the first column, padded or not:
    pad on the right for positions that start at 0.

    Generation: `init_cache(batch_size, length)` makes an empty key/value
    cache and `call_with_cache(x, cache, cache_index)` runs the block on the
    tokens at `cache_index, cache_index + 1, ...`, attending to the cached
    earlier positions, and returns `(output, updated_cache)`. The cache has a
    fixed length, so a compiled loop over tokens is traced once.

    Weights, shaped as keras-hub's Llama and GPT-2 store them: `query`
    `(d_model, num_heads, head_dim)`, `key` and `value` `(d_model,
    num_kv_heads, head_dim)`, `attention_output` `(num_heads, head_dim,
    d_model)` (EinsumDense layers; biases `(heads, head_dim)` / `(d_model,)`
    with `use_bias`), the Dense layers `ffn_gate` (SwiGLU only), `ffn_inner`
    and `ffn_output`, and the norms `attention_norm`, `ffn_norm` (plus
    `attention_output_norm`, `ffn_output_norm` for Sandwich-LN). Dropout
    layers: `attention_dropout` (attention output), `output_dropout` (FFN
    output) and `attention_probs_dropout`.

    Example:

    >>> import numpy as np, tfnorm
    >>> block = tfnorm.TransformerDecoderBlock(32, 4, 64, num_kv_heads=2)
    >>> block(np.zeros((2, 10, 32), "float32")).shape
    TensorShape([2, 10, 32])

    Args:
        d_model: int, the model width.
        num_heads: int, query heads; must divide `d_model`.
        dff: int, the feed-forward hidden width.
        dropout_rate: float in [0, 1), dropout before each residual add.
            Defaults to `0.0`.
        num_kv_heads: int or None, key/value heads; must divide
            `num_heads`. None means `num_heads`. Defaults to `None`.
        rope_max_wavelength: float or None, the rotary embeddings' longest
            wavelength; None turns them off. Defaults to `10000.0`.
        feed_forward: one of `"swiglu"`, `"gelu"`, `"gelu_tanh"`, `"relu"`.
            Defaults to `"swiglu"`.
        use_bias: bool, biases in the attention and FFN projections.
            Defaults to `False`.
        norm: a `tfnorm.get_norm` spec for every norm. Defaults to `"rms"`.
        norm_position: `"post"`, `"pre"`, `"sandwich"` or `"deepnorm"`.
            Defaults to `"pre"`.
        epsilon: float or None, the norms' epsilon (None: the norm's
            default). Defaults to `None`.
        attention_dropout: float in [0, 1) or None, dropout on the attention
            probabilities; None means `dropout_rate`. Defaults to `None`.
        kernel_initializer: initializer of every kernel; each attention
            projection is drawn as the matrix it stands for
            (`tfnorm.models.MatrixInitializer`), so the scale is the same in
            every Keras version, and a seeded one gives kernel `i` the seed
            `seed + i`. Defaults to `"glorot_uniform"`.
        num_layers_total: int or None, the stack's depth; required by
            `"deepnorm"`. Defaults to `None`.
        **kwargs: base layer arguments (`name`, `dtype`, `trainable`).

    References:
        - [Radford et al., 2019. Language Models are Unsupervised Multitask
          Learners (GPT-2)](https://openai.com/research/better-language-models)
        - [Touvron et al., 2023. LLaMA](https://arxiv.org/abs/2302.13971)
        - [Su et al., 2021. RoFormer: Rotary Position
          Embedding](https://arxiv.org/abs/2104.09864)
        - [Ainslie et al., 2023. GQA](https://arxiv.org/abs/2305.13245)
        - [Shazeer, 2020. GLU Variants Improve
          Transformer](https://arxiv.org/abs/2002.05202)
    """

    def __init__(
        self,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.0,
        *,
        num_kv_heads=None,
        rope_max_wavelength=10000.0,
        feed_forward="swiglu",
        use_bias=False,
        norm="rms",
        norm_position="pre",
        epsilon=None,
        attention_dropout=None,
        kernel_initializer="glorot_uniform",
        num_layers_total=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.d_model, self.num_heads, self.dff = check_block_sizes(
            d_model, num_heads, dff
        )
        self.num_kv_heads = check_num_kv_heads(self.num_heads, num_kv_heads)
        self.head_dim = self.d_model // self.num_heads
        self.rope_max_wavelength = check_rope(
            rope_max_wavelength, self.d_model, self.num_heads
        )
        self.feed_forward = check_choice("feed_forward", feed_forward, FEED_FORWARDS)
        self.use_bias = check_bool("use_bias", use_bias)
        self.dropout_rate = check_rate("dropout_rate", dropout_rate)
        self.attention_dropout = optional_rate("attention_dropout", attention_dropout)
        self.norm = serializable_norm_spec(norm, epsilon)
        self.norm_position = validate_norm_position(norm_position)
        self.epsilon = epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.num_layers_total = checked_depth(
            self.norm_position, num_layers_total, builder="tfnorm.build_decoder"
        )
        self.supports_masking = True

    # -- construction -----------------------------------------------------

    def _norm_names(self):
        return norm_names(self.norm_position)

    def build(self, input_shape):
        shape = checked_block_input(self, input_shape)
        build_norms(self, shape)
        d, h = self.d_model, self.head_dim
        for name, heads in (
            ("query", self.num_heads),
            ("key", self.num_kv_heads),
            ("value", self.num_kv_heads),
        ):
            layer = projection(
                self, name, "btd,dnh->btnh", (None, heads, h), "nh", (d, heads * h)
            )
            build_sublayer(layer, shape)
            setattr(self, name, layer)
        heads = self.num_heads
        self.attention_output = projection(
            self, "attention_output", "btnh,nhd->btd", (None, d), "d", (heads * h, d)
        )
        heads_shape = tf.TensorShape([shape[0], shape[1], heads, h])
        build_sublayer(self.attention_output, heads_shape)
        if self.feed_forward == "swiglu":
            self.ffn_gate = dense(self, self.dff, "ffn_gate", len(KERNELS))
            build_sublayer(self.ffn_gate, shape)
        self.ffn_inner = dense(self, self.dff, "ffn_inner", 4)
        build_sublayer(self.ffn_inner, shape)
        self.ffn_output = dense(self, self.d_model, "ffn_output", 5)
        build_sublayer(self.ffn_output, tf.TensorShape([shape[0], shape[1], self.dff]))
        probs_rate = (
            self.dropout_rate
            if self.attention_dropout is None
            else self.attention_dropout
        )
        for attribute, name, rate in (
            ("attention_probs_dropout", "attention_probs_dropout", probs_rate),
            ("attention_dropout_layer", "attention_dropout", self.dropout_rate),
            ("output_dropout", "output_dropout", self.dropout_rate),
        ):
            layer = keras.layers.Dropout(rate, dtype=self.dtype_policy, name=name)
            build_sublayer(layer, shape)
            setattr(self, attribute, layer)
        if self.norm_position == "deepnorm":
            self._scale_for_deepnorm()
        self.built = True

    def _scale_for_deepnorm(self):
        # DeepNet scales the value, output and FFN kernels (not query, key).
        scaled = [self.value, self.attention_output, self.ffn_inner, self.ffn_output]
        scaled += [self.ffn_gate] if self.feed_forward == "swiglu" else []
        scale_kernels(scaled, deepnorm_beta(self.num_layers_total))

    def get_build_config(self):
        return single_input_build_config(super().get_build_config())

    # -- forward ----------------------------------------------------------

    @property
    def residual_scale(self):
        """α for DeepNorm, 1 for the other positions."""
        return residual_scale(self.norm_position, self.num_layers_total)

    def _attend(self, x, positions, mask, training, cache, cache_index):
        """Attention of `x`; returns `(output, cache)` (cache None without one)."""
        query, key, value = self.query(x), self.key(x), self.value(x)
        if self.rope_max_wavelength is not None:
            query = rotary_embedding(query, positions, self.rope_max_wavelength)
            key = rotary_embedding(key, positions, self.rope_max_wavelength)
        query = query * tf.cast(self.head_dim**-0.5, query.dtype)
        if cache is not None:
            key = update_cache(cache[0], key, cache_index)
            value = update_cache(cache[1], value, cache_index)
            cache = (key, value)
        heads = grouped_attention(
            query, key, value, mask, self.attention_probs_dropout, training
        )
        return self.attention_output(heads), cache

    def _ffn(self, x):
        activation = ACTIVATIONS[self.feed_forward]
        if self.feed_forward == "swiglu":
            hidden = activation(self.ffn_gate(x)) * self.ffn_inner(x)
        else:
            hidden = activation(self.ffn_inner(x))
        return self.ffn_output(hidden)

    def _forward(self, x, positions, mask, training, cache=None, cache_index=None):
        new_cache = [cache]

        def attention_branch(inputs):
            output, new_cache[0] = self._attend(
                inputs, positions, mask, training, cache, cache_index
            )
            return output

        x = through_branches(self, x, attention_branch, self._ffn, training)
        return x, new_cache[0]

    def call(self, x, padding_mask=None, training=None, mask=None):
        if padding_mask is None:
            padding_mask = mask if mask is not None else get_keras_mask(x)
        length = tf.shape(x)[1]
        positions = tf.range(length)
        output, _ = self._forward(
            x, positions, causal_mask(positions, length, padding_mask), training
        )
        return output

    def init_cache(self, batch_size, length):
        """An empty key/value cache: a pair of zero tensors `(batch_size,
        length, num_kv_heads, head_dim)` in the compute dtype."""
        shape = (batch_size, length, self.num_kv_heads, self.head_dim)
        return (
            tf.zeros(shape, self.compute_dtype),
            tf.zeros(shape, self.compute_dtype),
        )

    def call_with_cache(self, x, cache, cache_index, padding_mask=None):
        """Runs the (built) block on `x` at positions `cache_index, ...`.

        Args:
            x: `(batch, t, d_model)`, the inputs at positions `cache_index`
                to `cache_index + t - 1`.
            cache: the pair from `init_cache` or an earlier call.
            cache_index: int or scalar int tensor, the position of `x[:, 0]`.
            padding_mask: optional `(batch, cache length)`, nonzero for real
                tokens, over every cached position.

        Returns:
            `(output, cache)`: the block's output at those positions (no
            dropout) and the cache with their keys and values written in.
        """
        x = tf.cast(x, self.compute_dtype)
        positions = tf.cast(cache_index, tf.int32) + tf.range(tf.shape(x)[1])
        mask = causal_mask(positions, tf.shape(cache[0])[1], padding_mask)
        return self._forward(x, positions, mask, False, cache, cache_index)

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
                "num_kv_heads": self.num_kv_heads,
                "rope_max_wavelength": self.rope_max_wavelength,
                "feed_forward": self.feed_forward,
                "use_bias": self.use_bias,
                "norm": self.norm,
                "norm_position": self.norm_position,
                "epsilon": self.epsilon,
                "attention_dropout": self.attention_dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
                "num_layers_total": self.num_layers_total,
            }
        )
        return config
