"""The math of causal self-attention: rotary positions, masks, grouped heads, the KV cache.

Plain TensorFlow functions on tensors, so `TransformerDecoderBlock` stays a
list of sublayers and a test can call each step directly. Shapes use `b`
batch, `t` query positions, `s` key positions, `n` query heads, `k` key and
value heads, `g = n // k` query heads per key head and `h` the head width.
"""

from __future__ import annotations

from tfnorm._keras import tf

#: Added to the scores of keys a query must not see. Large enough that
#: softmax gives them exactly 0 in float32, small enough not to overflow.
_MASKED_SCORE = -1e9


def rotary_embedding(x, positions, max_wavelength):
    """Rotates pairs of features of `x` by angles that grow with position.

    `x` is `(b, t, heads, h)` with an even `h`; feature `i` of the first
    half is paired with feature `i + h/2` (the layout of GPT-NeoX, LLaMA
    and keras-hub), rotated by `position * max_wavelength ** (-2i / h)`:

    ```
    y1 = x1 * cos - x2 * sin
    y2 = x2 * cos + x1 * sin
    ```

    The angles are computed in float32 and the result cast to `x.dtype`.

    Args:
        x: float tensor `(b, t, heads, h)`.
        positions: int or float tensor `(t,)`, the absolute positions.
        max_wavelength: float, the longest wavelength (10000 in LLaMA).
    """
    head_dim = x.shape[-1]
    half = head_dim // 2
    exponents = tf.range(half, dtype=tf.float32) * (2.0 / head_dim)
    inverse_frequency = tf.pow(tf.constant(float(max_wavelength)), -exponents)
    angles = tf.cast(positions, tf.float32)[:, tf.newaxis] * inverse_frequency
    # Both halves turn by the same angles: y = x * cos + rotate_half(x) * sin
    # with rotate_half(x) = [-x2, x1] is the formula above to the bit (a
    # negation is exact). The halves come from `tf.split`, whose gradient is
    # one concatenation; each slice of x would have a zero-padded full-size
    # gradient of its own (4-5% of a CPU training step in graph mode).
    angles = tf.concat([angles, angles], -1)
    cos = tf.cast(tf.cos(angles), x.dtype)[:, tf.newaxis, :]
    sin = tf.cast(tf.sin(angles), x.dtype)[:, tf.newaxis, :]
    first, second = tf.split(x, 2, axis=-1)
    return x * cos + tf.concat([-second, first], -1) * sin


def causal_mask(query_positions, key_length, key_padding=None):
    """`(b or 1, 1, 1, t, s)` bool: query at `query_positions[i]` may see key `j`.

    A query sees the keys at its own and earlier positions, minus padded
    keys (`key_padding` `(b, s)`, nonzero for real tokens).
    """
    keys = tf.range(key_length)
    mask = keys[tf.newaxis, :] <= tf.cast(query_positions, tf.int32)[:, tf.newaxis]
    mask = mask[tf.newaxis, tf.newaxis, tf.newaxis]
    if key_padding is not None:
        real = tf.cast(key_padding, tf.bool)[:, tf.newaxis, tf.newaxis, tf.newaxis, :]
        mask = tf.logical_and(mask, real)
    return mask


def grouped_attention(query, key, value, mask, dropout=None, training=None):
    """Softmax attention where each key/value head serves `g` query heads.

    `query` `(b, t, n, h)` already scaled by `1 / sqrt(h)`; `key`, `value`
    `(b, s, k, h)` with `n = g * k` (`g = 1` is multi-head attention); query
    head `i` reads key head `i // g`. `mask` broadcasts to `(b, k, g, t,
    s)`. The softmax runs in float32 whatever the inputs' dtype. Returns
    `(b, t, n, h)`.
    """
    num_heads, head_dim = query.shape[-2], query.shape[-1]
    num_kv_heads = key.shape[-2]
    groups = num_heads // num_kv_heads
    if groups == 1:
        # Multi-head attention as transposes and batched matmuls: TensorFlow's
        # Einsum kernels (and the Einsums of their gradient) took longer on
        # CPU in graph mode for the same products.
        scores = tf.matmul(
            tf.transpose(query, [0, 2, 1, 3]), tf.transpose(key, [0, 2, 3, 1])
        )
        scores = tf.where(mask[:, 0], tf.cast(scores, tf.float32), _MASKED_SCORE)
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype)
        if dropout is not None:
            weights = dropout(weights, training=training)
        heads = tf.matmul(weights, tf.transpose(value, [0, 2, 1, 3]))
        return tf.transpose(heads, [0, 2, 1, 3])
    batch_and_time = tf.shape(query)[:2]
    grouped = tf.reshape(
        query, tf.concat([batch_and_time, [num_kv_heads, groups, head_dim]], 0)
    )
    scores = tf.einsum("btkgh,bskh->bkgts", grouped, key)
    scores = tf.where(mask, tf.cast(scores, tf.float32), _MASKED_SCORE)
    weights = tf.cast(tf.nn.softmax(scores, axis=-1), value.dtype)
    if dropout is not None:
        weights = dropout(weights, training=training)
    output = tf.einsum("bkgts,bskh->btkgh", weights, value)
    return tf.reshape(output, tf.concat([batch_and_time, [num_heads, head_dim]], 0))


def update_cache(cache, new, index):
    """`cache` `(b, T, k, h)` with `new` `(b, t, k, h)` written at `index..index+t-1`.

    A scatter into the preallocated cache: the shapes never change, so a
    compiled generation loop is traced once, and XLA updates in place.
    """
    batch = tf.shape(new)[0]
    length = tf.shape(new)[1]
    positions = tf.cast(index, tf.int32) + tf.range(length)
    rows = tf.broadcast_to(tf.range(batch)[:, tf.newaxis], tf.stack([batch, length]))
    cols = tf.broadcast_to(positions[tf.newaxis, :], tf.stack([batch, length]))
    indices = tf.stack([rows, cols], axis=-1)
    return tf.tensor_scatter_nd_update(cache, indices, tf.cast(new, cache.dtype))
