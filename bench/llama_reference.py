"""keras-hub's Llama as the reference of `bench/decoder.py` (Keras 3 only)."""

from __future__ import annotations

from tfnorm._keras import IS_KERAS_3


def keras_hub_missing():
    """Why keras-hub's Llama cannot be the reference here, or None."""
    if not IS_KERAS_3:
        return "keras-hub needs Keras 3 (this runtime has Keras 2)"
    try:
        import keras_hub  # noqa: F401
    except ImportError:
        return "keras-hub is not installed"
    return None


def keras_hub_llama(layers, d_model, heads, dff, vocab, epsilon):
    """keras-hub's `LlamaCausalLM` of these sizes, built from its config (no
    download), without a preprocessor: it takes token ids and a padding mask."""
    import keras_hub

    backbone = keras_hub.models.LlamaBackbone(
        vocabulary_size=vocab,
        num_layers=layers,
        num_query_heads=heads,
        hidden_dim=d_model,
        intermediate_dim=dff,
        num_key_value_heads=heads,
        layer_norm_epsilon=epsilon,
    )
    return keras_hub.models.LlamaCausalLM(backbone, preprocessor=None)


def copy_weights(model, causal_lm):
    """Gives keras-hub's Llama the weights of a tfnorm llama-preset decoder of
    the same sizes (the two share one layout, weight for weight)."""
    backbone = causal_lm.backbone
    pairs = [
        ("token_embedding/embeddings", "token_embedding/embeddings"),
        ("lm_head/kernel", "token_embedding/reverse_embeddings"),
        ("final_norm/gamma", "sequence_output_layernorm/scale"),
    ]
    block_pairs = [
        ("attention_norm/gamma", "self_attention_layernorm/scale"),
        ("query/kernel", "self_attention/query/kernel"),
        ("key/kernel", "self_attention/key/kernel"),
        ("value/kernel", "self_attention/value/kernel"),
        ("attention_output/kernel", "self_attention/attention_output/kernel"),
        ("ffn_norm/gamma", "feedforward_layernorm/scale"),
        ("ffn_gate/kernel", "feedforward_gate_dense/kernel"),
        ("ffn_inner/kernel", "feedforward_intermediate_dense/kernel"),
        ("ffn_output/kernel", "feedforward_output_dense/kernel"),
    ]
    for index in range(backbone.num_layers):
        pairs += [
            (f"block_{index}/{ours}", f"transformer_layer_{index}/{theirs}")
            for ours, theirs in block_pairs
        ]
    ours = {_path(w): w for w in model.weights}
    theirs = {_path(w): w for w in backbone.weights}
    for source, target in pairs:
        theirs[target].assign(ours[source])


def _path(weight):
    return getattr(weight, "path", weight.name).split(":")[0]
