"""`encoder_from_hf`: a Hugging Face BERT checkpoint as a Keras model on tfnorm's norms.

The checkpoint is read with `tfnorm.checkpoints` (no PyTorch, no
transformers): config.json gives the sizes, the model is built from
`TokenAndPositionEmbedding`, a segment embedding, tfnorm's LayerNorm and
Post-LN `TransformerEncoderBlock`s, and each safetensors tensor is copied
into the weight of the same role.
"""

from __future__ import annotations

import os

from tfnorm._keras import attention_projections, keras
from tfnorm.checkpoints import CheckpointError, HFConfig, SafetensorsReader
from tfnorm.layers.factory import get_norm
from tfnorm.models.checkpoint_copy import copy_tensor
from tfnorm.models.encoder.block import TransformerEncoderBlock
from tfnorm.models.encoder.text_layers import (
    SequencePooling,
    TokenAndPositionEmbedding,
)

#: BERT `hidden_act` -> Keras activation (Keras's "gelu" is the exact,
#: erf one, as BERT's).
_ACTIVATIONS = {"gelu": "gelu", "relu": "relu"}
_MLM = "cls.predictions."
_POOLER = "pooler.dense.weight"


def _checked_options(config):
    if config.model_type != "bert":
        config.refuse(
            "model_type",
            config.model_type,
            "encoder_from_hf converts BERT encoders (model_type bert); read a "
            "causal LM with tfnorm.models.decoder_from_hf",
        )
    activation = config["hidden_act"]
    if activation not in _ACTIVATIONS:
        config.refuse(
            "hidden_act", activation, f"tfnorm computes {', '.join(_ACTIVATIONS)}"
        )
    kind = config["position_embedding_type"]
    if kind != "absolute":
        config.refuse(
            "position_embedding_type", kind, "tfnorm learns absolute positions only"
        )
    if config.get("is_decoder", False):
        config.refuse("is_decoder", True, "encoder_from_hf reads encoders only")
    d_model, heads = config["hidden_size"], config["num_attention_heads"]
    if d_model % heads:
        config.refuse(
            "num_attention_heads", heads, f"it must divide hidden_size={d_model}"
        )
    return {
        "num_layers": config["num_hidden_layers"],
        "d_model": d_model,
        "num_heads": heads,
        "dff": config["intermediate_size"],
        "vocab_size": config["vocab_size"],
        "max_len": config["max_position_embeddings"],
        "segments": config["type_vocab_size"],
        "epsilon": float(config["layer_norm_eps"]),
        "activation": _ACTIVATIONS[activation],
        "dropout_rate": float(config.get("hidden_dropout_prob", 0.1)),
        "attention_dropout": float(config.get("attention_probs_dropout_prob", 0.1)),
    }


def _build(options, heads, name):
    d_model, epsilon = options["d_model"], options["epsilon"]
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
    embedded = TokenAndPositionEmbedding(
        options["vocab_size"], options["max_len"], d_model, name="embeddings"
    )(token_ids)
    segments = keras.layers.Embedding(
        options["segments"], d_model, name="segment_embedding"
    )(segment_ids)
    x = keras.layers.Add(name="embeddings_add")([embedded, segments])
    x = get_norm("layer", epsilon=epsilon, name="embeddings_norm")(x)
    x = keras.layers.Dropout(options["dropout_rate"], name="embeddings_dropout")(x)
    for index in range(options["num_layers"]):
        block = TransformerEncoderBlock(
            d_model,
            options["num_heads"],
            options["dff"],
            options["dropout_rate"],
            norm="layer",
            norm_position="post",
            epsilon=epsilon,
            activation=options["activation"],
            attention_dropout=options["attention_dropout"],
            name=f"block_{index}",
        )
        x = block(x, padding_mask=padding_mask)
    outputs = {"sequence_output": x}
    if "pooler" in heads:
        first = SequencePooling("cls", name="first_token")(x)
        outputs["pooled_output"] = keras.layers.Dense(
            d_model, activation="tanh", name="pooler"
        )(first)
    if "mlm" in heads:
        hidden = keras.layers.Dense(
            d_model, activation=options["activation"], name="mlm_dense"
        )(x)
        hidden = get_norm("layer", epsilon=epsilon, name="mlm_norm")(hidden)
        outputs["mlm_logits"] = keras.layers.Dense(
            options["vocab_size"], name="mlm_logits"
        )(hidden)
    inputs = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
    }
    return keras.Model(inputs, outputs, name=name)


def _places(model, prefix, options):
    """`(key, shape, variable, transpose)` for every weight of `model`:
    `nn.Linear` stores `(out, in)`, hence the transpose to a Keras kernel."""
    d, dff, vocab = options["d_model"], options["dff"], options["vocab_size"]
    embeddings = model.get_layer("embeddings")
    places = [
        (prefix + "embeddings.word_embeddings.weight", (vocab, d),
         embeddings.token_embedding.embeddings, False),
        (prefix + "embeddings.position_embeddings.weight", (options["max_len"], d),
         embeddings.position_embedding.embeddings, False),
        (prefix + "embeddings.token_type_embeddings.weight", (options["segments"], d),
         model.get_layer("segment_embedding").embeddings, False),
    ]  # fmt: skip
    _norm(places, prefix + "embeddings.LayerNorm", model.get_layer("embeddings_norm"))
    for index in range(options["num_layers"]):
        block = model.get_layer(f"block_{index}")
        key = f"{prefix}encoder.layer.{index}."
        query, key_dense, value, output = attention_projections(block.attention)
        for name, layer, shape in (
            ("attention.self.query", query, (d, d)),
            ("attention.self.key", key_dense, (d, d)),
            ("attention.self.value", value, (d, d)),
            ("attention.output.dense", output, (d, d)),
            ("intermediate.dense", block.ffn_inner, (dff, d)),
            ("output.dense", block.ffn_output, (d, dff)),
        ):
            _linear(places, key + name, layer, shape)
        _norm(places, key + "attention.output.LayerNorm", block.attention_norm)
        _norm(places, key + "output.LayerNorm", block.ffn_norm)
    return places


def _linear(places, key, layer, shape):
    places.append((key + ".weight", shape, layer.kernel, True))
    places.append((key + ".bias", shape[:1], layer.bias, False))


def _norm(places, key, norm):
    width = (int(norm.gamma.shape[-1]),)
    places.append((key + ".weight", width, norm.gamma, False))
    places.append((key + ".bias", width, norm.beta, False))


def _mlm_places(model, reader, prefix, options):
    d, vocab = options["d_model"], options["vocab_size"]
    places = []
    _linear(places, _MLM + "transform.dense", model.get_layer("mlm_dense"), (d, d))
    _norm(places, _MLM + "transform.LayerNorm", model.get_layer("mlm_norm"))
    logits = model.get_layer("mlm_logits")
    # The decoder is tied to the word embeddings unless the file stores it.
    decoder = _MLM + "decoder.weight"
    if decoder not in reader:
        decoder = prefix + "embeddings.word_embeddings.weight"
    places.append((decoder, (vocab, d), logits.kernel, True))
    places.append((_MLM + "bias", (vocab,), logits.bias, False))
    return places


def _prefix(reader):
    return "bert." if "bert.embeddings.word_embeddings.weight" in reader else ""


def _copy_in(places, reader, source):
    used = set()
    for key, shape, variable, transpose in places:
        copy_tensor(
            reader,
            key,
            variable,
            shape=shape,
            reason=f"{source}/config.json",
            transpose=transpose,
        )
        used.add(key)
    return used


def encoder_from_hf(path, *, name="bert"):
    """A Hugging Face BERT checkpoint as a Keras model on tfnorm's norms.

    Reads `config.json` and the safetensors weights of a `BertModel` or
    `BertForMaskedLM` checkpoint directory (no PyTorch or transformers
    needed) and builds the same network from tfnorm's parts: token, position
    and segment embeddings summed and normalised by tfnorm's
    `LayerNormalization` (`embeddings_norm`), then `num_hidden_layers`
    Post-LN `TransformerEncoderBlock`s (`block_0, ...`) with the config's
    `layer_norm_eps` and exact GELU. With the masked-LM head
    (`cls.predictions.*`) it adds that too: Dense + GELU (`mlm_dense`),
    LayerNorm (`mlm_norm`) and the vocabulary projection (`mlm_logits`,
    initialised from the word embeddings it is tied to, as a copy: fine-
    tuning unties them). A checkpoint with BERT's pooler (`pooler.dense`,
    as `BertModel` saves) also gets `pooled_output`: tanh(Dense(the first
    token's output)). Outputs equal `transformers`' at the real
    (unpadded) positions.

    ```
    inputs  (keras-hub BERT's names)   outputs (a dict)
    token_ids     (batch, seq) int     sequence_output (batch, seq, hidden)
    segment_ids   (batch, seq) int     mlm_logits (batch, seq, vocab), with
    padding_mask  (batch, seq) 1 real                the MLM head only
                                       pooled_output (batch, hidden), with
                                                 the pooler only
    ```

    Example:

    ```python
    model = tfnorm.models.encoder_from_hf("bert-tiny")
    out = model({"token_ids": ids, "segment_ids": segments,
                 "padding_mask": mask})
    out["sequence_output"], out["mlm_logits"]
    ```

    Args:
        path: str, the checkpoint directory (`save_pretrained`'s layout).
        name: str, the model's name. Defaults to `"bert"`.

    Returns:
        A functional `keras.Model` with dict inputs and outputs.

    Raises:
        CheckpointError: one line naming the file and the key: what
            `tfnorm.checkpoints` refuses (missing files, unknown
            `model_type`), a `model_type` other than bert, a tensor whose
            shape disagrees with config.json, a tensor that has no place in
            the model, and options tfnorm does not compute (another
            `hidden_act` or `position_embedding_type`).
    """
    path = os.fspath(path)
    config = HFConfig.read(path)
    options = _checked_options(config)
    with SafetensorsReader(path) as reader:
        prefix = _prefix(reader)
        heads = [
            head
            for head, key in (("pooler", prefix + _POOLER), ("mlm", _MLM + "bias"))
            if key in reader
        ]
        model = _build(options, heads, name)
        places = _places(model, prefix, options)
        if "pooler" in heads:
            d = options["d_model"]
            _linear(places, prefix + "pooler.dense", model.get_layer("pooler"), (d, d))
        if "mlm" in heads:
            places += _mlm_places(model, reader, prefix, options)
        used = _copy_in(places, reader, path)
        for key in reader.keys():
            if key not in used and not key.endswith(".position_ids"):
                raise CheckpointError(
                    f"{reader.file_of(key)}: tensor {key!r} has no place in "
                    "tfnorm's BERT encoder (another task's head?)."
                )
    return model
