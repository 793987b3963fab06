"""Model code as users write it, after the keras.io examples.

Subclassed `layers.Layer` blocks holding their norms as attributes, custom
layers without a complete `get_config`, written the way the keras.io
examples write them ("Text classification with Transformer", "Text
generation with a miniature GPT", "English-to-Spanish translation with a
sequence-to-sequence Transformer"), shrunk to tiny sizes. Only two changes,
so the same code runs in Keras 2.9, tf_keras and Keras 3: `tf.keras` instead
of `keras`, and explicit attention masks instead of `use_causal_mask` (which
Keras 2.9's MultiHeadAttention lacks). Other tests that need keras.io-style
blocks can import them from here.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

keras = tf.keras

VOCAB, MAXLEN, EMBED, HEADS, FF = 50, 8, 16, 2, 32


# -- Text classification with Transformer (keras.io) -------------------------


class TransformerBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs, training=None):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output, training=training)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


class TokenAndPositionEmbedding(layers.Layer):
    def __init__(self, maxlen, vocab_size, embed_dim):
        super().__init__()
        self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
        self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

    def call(self, x):
        maxlen = tf.shape(x)[-1]
        positions = tf.range(start=0, limit=maxlen, delta=1)
        positions = self.pos_emb(positions)
        x = self.token_emb(x)
        return x + positions


def text_classifier():
    inputs = layers.Input(shape=(MAXLEN,))
    embedding_layer = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)
    x = embedding_layer(inputs)
    transformer_block = TransformerBlock(EMBED, HEADS, FF)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(8, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


# -- Text generation with a miniature GPT (keras.io) -------------------------


def causal_attention_mask(batch_size, n_dest, n_src, dtype):
    i = tf.range(n_dest)[:, None]
    j = tf.range(n_src)
    m = i >= j - n_src + n_dest
    mask = tf.cast(m, dtype)
    mask = tf.reshape(mask, [1, n_dest, n_src])
    mult = tf.concat(
        [tf.expand_dims(batch_size, -1), tf.constant([1, 1], dtype=tf.int32)], 0
    )
    return tf.tile(mask, mult)


class GPTBlock(layers.Layer):
    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1):
        super().__init__()
        self.att = layers.MultiHeadAttention(num_heads, embed_dim)
        self.ffn = keras.Sequential(
            [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
        self.dropout1 = layers.Dropout(rate)
        self.dropout2 = layers.Dropout(rate)

    def call(self, inputs, training=None):
        input_shape = tf.shape(inputs)
        batch_size, seq_len = input_shape[0], input_shape[1]
        causal_mask = causal_attention_mask(batch_size, seq_len, seq_len, tf.bool)
        attention_output = self.att(inputs, inputs, attention_mask=causal_mask)
        attention_output = self.dropout1(attention_output, training=training)
        out1 = self.layernorm1(inputs + attention_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output, training=training)
        return self.layernorm2(out1 + ffn_output)


def mini_gpt():
    inputs = layers.Input(shape=(MAXLEN,), dtype="int32")
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)(inputs)
    x = GPTBlock(EMBED, HEADS, FF)(x)
    outputs = layers.Dense(VOCAB)(x)
    return keras.Model(inputs=inputs, outputs=outputs)


# -- English-to-Spanish translation with a Transformer (keras.io) ------------


class TransformerEncoder(layers.Layer):
    def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.dense_dim = dense_dim
        self.num_heads = num_heads
        self.attention = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim
        )
        self.dense_proj = keras.Sequential(
            [layers.Dense(dense_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        self.layernorm_1 = layers.LayerNormalization()
        self.layernorm_2 = layers.LayerNormalization()

    def call(self, inputs, mask=None):
        attention_output = self.attention(query=inputs, value=inputs, key=inputs)
        proj_input = self.layernorm_1(inputs + attention_output)
        proj_output = self.dense_proj(proj_input)
        return self.layernorm_2(proj_input + proj_output)


class TransformerDecoder(layers.Layer):
    def __init__(self, embed_dim, latent_dim, num_heads, **kwargs):
        super().__init__(**kwargs)
        self.embed_dim = embed_dim
        self.latent_dim = latent_dim
        self.num_heads = num_heads
        self.attention_1 = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim
        )
        self.attention_2 = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=embed_dim
        )
        self.dense_proj = keras.Sequential(
            [layers.Dense(latent_dim, activation="relu"), layers.Dense(embed_dim)]
        )
        # The norms in a list: user code holds them in many ways.
        self.layernorms = [layers.LayerNormalization() for _ in range(3)]

    def call(self, inputs, encoder_outputs):
        input_shape = tf.shape(inputs)
        causal_mask = causal_attention_mask(
            input_shape[0], input_shape[1], input_shape[1], tf.int32
        )
        attention_output_1 = self.attention_1(
            query=inputs, value=inputs, key=inputs, attention_mask=causal_mask
        )
        out_1 = self.layernorms[0](inputs + attention_output_1)
        attention_output_2 = self.attention_2(
            query=out_1, value=encoder_outputs, key=encoder_outputs
        )
        out_2 = self.layernorms[1](out_1 + attention_output_2)
        proj_output = self.dense_proj(out_2)
        return self.layernorms[2](out_2 + proj_output)


def translator():
    encoder_inputs = keras.Input(shape=(MAXLEN,), dtype="int64", name="encoder_inputs")
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)(encoder_inputs)
    encoder_outputs = TransformerEncoder(EMBED, FF, HEADS, name="encoder")(x)
    decoder_inputs = keras.Input(shape=(MAXLEN,), dtype="int64", name="decoder_inputs")
    x = TokenAndPositionEmbedding(MAXLEN, VOCAB, EMBED)(decoder_inputs)
    x = TransformerDecoder(EMBED, FF, HEADS, name="decoder")(x, encoder_outputs)
    decoder_outputs = layers.Dense(VOCAB, activation="softmax")(x)
    return keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)


# -- Data --------------------------------------------------------------------


def token_batch(n=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(1, VOCAB, size=(n, MAXLEN)).astype("int32")


def randomize_norms(model, seed=0):
    """Gives every norm weight a non-trivial value (γ around 1, β around 0),
    so a conversion that drops or swaps them shows in the outputs."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        name = variable.name.split("/")[-1].split(":")[0]
        if name in ("gamma", "beta", "scale"):
            base = 1.0 if name in ("gamma", "scale") else 0.0
            variable.assign(base + 0.3 * rng.standard_normal(variable.shape))
