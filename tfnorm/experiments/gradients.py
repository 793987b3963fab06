"""Per-layer gradient norms of an encoder at initialisation (Xiong et al., 2020).

Xiong et al., "On Layer Normalization in the Transformer Architecture"
(https://arxiv.org/abs/2002.04745), Theorem 1: at initialisation the
gradient of the last layer's FFN weights is O(d·sqrt(ln d / L)) for Pre-LN
and O(d·sqrt(ln d)) for Post-LN: deeper Pre-LN stacks get smaller gradients
at the top, Post-LN ones do not, which is why Post-LN needs warm-up. This
module measures it with a language-model-like loss, so the claim can be
tested and plotted.
"""

from __future__ import annotations

import numpy as np

from tfnorm._keras import keras, tf
from tfnorm.models.encoder.builders import build_encoder
from tfnorm.optim.optimizers import variable_path


def ffn_gradient_norms_at_init(
    num_layers,
    norm_position,
    *,
    d_model=64,
    num_heads=4,
    dff=256,
    seq_len=16,
    batch_size=16,
    vocab_size=100,
    seed=0,
    **encoder_options,
):
    """Gradient norm of each block's second FFN kernel at initialisation.

    Builds `build_encoder(num_layers, ..., dropout_rate=0)` with weights
    drawn from `seed`, feeds standard-normal inputs `(batch, seq, d_model)`,
    projects the encoder output onto a random vocabulary (`d_model ×
    vocab_size`, entries N(0, 1/d_model)) and takes the mean sparse
    cross-entropy against uniformly random targets:

    ```
    loss = CE(softmax(encoder(x) @ W_vocab), targets)
    g[l] = ||d loss / d block_l.ffn_output.kernel||_2   for l = 0 .. L-1
    ```

    A squared-error loss on a random projection does not show the effect
    reliably; cross-entropy does.

    Args:
        num_layers: int, the depth `L`.
        norm_position: `"post"`, `"pre"`, `"sandwich"` or `"deepnorm"`.
        d_model, num_heads, dff: encoder sizes. Default to 64, 4 and 256.
        seq_len, batch_size, vocab_size: loss sizes. Default to 16, 16,
            100.
        seed: int, seeds the weights, inputs, projection and targets.
        **encoder_options: more `build_encoder` options (`norm`,
            `epsilon`, ...).

    Returns:
        A float64 NumPy array of `num_layers` gradient norms, block 0 first.
    """
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(
        num_layers,
        d_model,
        num_heads,
        dff,
        dropout_rate=0.0,
        norm_position=norm_position,
        with_padding_mask=False,
        **encoder_options,
    )
    rng = np.random.default_rng(seed)
    inputs = tf.constant(
        rng.standard_normal((batch_size, seq_len, d_model)), dtype=tf.float32
    )
    vocab = tf.constant(
        rng.standard_normal((d_model, vocab_size)) / np.sqrt(d_model),
        dtype=tf.float32,
    )
    targets = tf.constant(rng.integers(0, vocab_size, (batch_size, seq_len)))
    kernels = [
        encoder.get_layer(f"block_{index}").ffn_output.kernel
        for index in range(num_layers)
    ]
    with tf.GradientTape() as tape:
        outputs = encoder(inputs, training=False)
        logits = tf.einsum("btd,dv->btv", tf.cast(outputs, tf.float32), vocab)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(targets, logits)
        )
    gradients = tape.gradient(loss, kernels)
    return np.array([float(tf.norm(g)) for g in gradients], dtype=np.float64)


def token_cross_entropy(targets, logits):
    """Mean sparse cross-entropy over every token, computed in float32."""
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=targets, logits=tf.cast(logits, tf.float32)
        )
    )


def layer_gradient_norms(model, encoder, tokens, targets, weights=None):
    """Gradient norm of each block's feed-forward weights, per block.

    All the FFN's weights of a block together (both kernels and biases) in
    the trained model; `ffn_gradient_norms_at_init` measures
    Xiong et al.'s exact quantity (the second FFN kernel) on a bare encoder.
    `weights` (per token, e.g. the masked positions of a masked-language
    task) weight the cross-entropy; by default every token counts.

    Returns:
        A list with one float per encoder block, bottom block first.
    """
    blocks = [layer for layer in encoder.layers if layer.name.startswith("block_")]
    groups = []
    for block in blocks:
        ffn = [v for v in block.trainable_variables if "ffn" in variable_path(v)]
        groups.append(ffn or list(block.trainable_variables))
    flat = [v for group in groups for v in group]
    with tf.GradientTape() as tape:
        logits = model(tokens, training=True)
        if weights is None:
            loss = token_cross_entropy(targets, logits)
        else:
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=targets, logits=tf.cast(logits, tf.float32)
            )
            loss = tf.reduce_sum(losses * weights) / tf.maximum(
                tf.reduce_sum(weights), 1.0
            )
    grads = tape.gradient(loss, flat)
    norms, start = [], 0
    for group in groups:
        norms.append(float(tf.linalg.global_norm(grads[start : start + len(group)])))
        start += len(group)
    return norms
