"""keras-hub's Llama and GPT-2 backbones as tfnorm decoders, and back.

The tfnorm decoder stores each weight in the shape keras-hub does (see
`TransformerDecoderBlock`), so converting either way is building the model of
the same architecture and copying the weights by path. Only public Keras API
is used: the configs (`get_config()`) and the variables' `path`.
"""

from __future__ import annotations

import re

from tfnorm.layers.layer_normalization import LayerNormalization
from tfnorm.layers.rms_norm import RMSNorm
from tfnorm.models.decoder.builders import build_decoder
from tfnorm.models.decoder.model import DecoderModel

# keras-hub Llama options that tfnorm's decoder has no counterpart for, with
# the value that means "off".
_LLAMA_UNSUPPORTED = {
    "rope_position_scaling_factor": 1.0,
    "rope_frequency_adjustment_factor": None,
    "rope_low_freq_factor": None,
    "rope_high_freq_factor": None,
    "rope_pretraining_sequence_length": None,
    "sliding_window": None,
}

# keras-hub sublayer name -> tfnorm sublayer name, inside one decoder layer.
_BLOCK_NAMES = {
    "self_attention/query": "query",
    "self_attention/key": "key",
    "self_attention/value": "value",
    "self_attention/attention_output": "attention_output",
    "self_attention_layernorm": "attention_norm",
    "self_attention_layer_norm": "attention_norm",
    "feedforward_layernorm": "ffn_norm",
    "feedforward_layer_norm": "ffn_norm",
    "feedforward_gate_dense": "ffn_gate",
    "feedforward_intermediate_dense": "ffn_inner",
    "feedforward_output_dense": "ffn_output",
}
_TOP_NAMES = {
    "token_embedding/embeddings": "token_embedding/embeddings",
    "token_embedding/reverse_embeddings": "lm_head/kernel",
    "position_embedding/embeddings": "position_embedding/embeddings",
    "sequence_output_layernorm/scale": "final_norm/gamma",
    "layer_norm/gamma": "final_norm/gamma",
    "layer_norm/beta": "final_norm/beta",
}
_WEIGHT_NAMES = {"scale": "gamma"}
_LAYER_PATH = re.compile(r"^transformer_layer_(\d+)/(.+)/(\w+)$")


def _architecture(backbone):
    names = {cls.__name__ for cls in type(backbone).__mro__}
    for name in ("LlamaBackbone", "GPT2Backbone"):
        if name in names:
            return name
    raise ValueError(
        "decoder_from_keras_hub converts a keras-hub LlamaBackbone or "
        f"GPT2Backbone. Received: backbone={type(backbone).__name__}"
    )


def _llama_options(config):
    for option, off in _LLAMA_UNSUPPORTED.items():
        value = config.get(option, off)
        if value != off:
            raise ValueError(
                f"tfnorm's decoder has no counterpart for keras-hub Llama's "
                f"`{option}`. Received: {option}={value!r}"
            )
    return {
        "num_layers": config["num_layers"],
        "d_model": config["hidden_dim"],
        "num_heads": config["num_query_heads"],
        "dff": config["intermediate_dim"],
        "preset": "llama",
        "num_kv_heads": config["num_key_value_heads"],
        "rope_max_wavelength": float(config["rope_max_wavelength"]),
        "epsilon": config["layer_norm_epsilon"],
        "dropout_rate": config.get("dropout", 0.0),
        "tie_embeddings": bool(config.get("tie_word_embeddings", False)),
    }


def _gpt2_options(config):
    return {
        "num_layers": config["num_layers"],
        "d_model": config["hidden_dim"],
        "num_heads": config["num_heads"],
        "dff": config["intermediate_dim"],
        "preset": "gpt2",
        "dropout_rate": config.get("dropout", 0.1),
        "max_len": config["max_sequence_length"],
    }


def _tfnorm_path(hub_path):
    """The tfnorm weight path for a keras-hub weight path, or None."""
    if hub_path in _TOP_NAMES:
        return _TOP_NAMES[hub_path]
    match = _LAYER_PATH.match(hub_path)
    if match is None or match.group(2) not in _BLOCK_NAMES:
        return None
    weight = _WEIGHT_NAMES.get(match.group(3), match.group(3))
    return f"block_{match.group(1)}/{_BLOCK_NAMES[match.group(2)]}/{weight}"


def _path_in_model(variable, model):
    # Keras 3 paths start with the layer's name (`block_0/query/kernel`);
    # drop a leading model name if there is one.
    path = variable.path
    prefix = model.name + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path


def _paired_weights(backbone, model):
    """Each backbone weight with the tfnorm weight at its path (None where
    none is), and the sorted paths of the tfnorm weights left unpaired: the
    one path table serves both directions of conversion."""
    ours = {_path_in_model(v, model): v for v in model.weights}
    pairs = []
    for variable in backbone.weights:
        path = _tfnorm_path(variable.path)
        pairs.append((variable, ours.pop(path, None) if path else None))
    return pairs, sorted(ours)


def decoder_from_keras_hub(backbone, max_len=None):
    """The tfnorm decoder equal to a keras-hub `LlamaBackbone` or `GPT2Backbone`.

    Builds `tfnorm.build_decoder` with the backbone's architecture (preset
    `"llama"` or `"gpt2"`, sizes, heads, key/value heads, epsilon, RoPE
    wavelength, dropout) and copies every weight. Its logits equal those of
    keras-hub's `LlamaCausalLM` / `GPT2CausalLM` on the same batch.

    Example:

    ```python
    import keras_hub, tfnorm
    hub = keras_hub.models.LlamaBackbone(
        vocabulary_size=100, num_layers=2, num_query_heads=4,
        num_key_value_heads=2, hidden_dim=32, intermediate_dim=64)
    model = tfnorm.models.decoder_from_keras_hub(hub, max_len=128)
    ```

    Args:
        backbone: a built keras-hub `LlamaBackbone` or `GPT2Backbone`.
        max_len: int, the longest sequence of the tfnorm model. Defaults to
            GPT-2's `max_sequence_length`, and to 2048 for Llama (RoPE has
            no table; set it to what you generate).

    Returns:
        A `tfnorm.models.DecoderModel` with the backbone's weights.

    Raises:
        ValueError: naming the option and value tfnorm has no counterpart
            for (RoPE scaling, sliding windows), or for another backbone.
    """
    architecture = _architecture(backbone)
    config = backbone.get_config()
    if architecture == "LlamaBackbone":
        options = _llama_options(config)
    else:
        options = _gpt2_options(config)
    options["max_len"] = max_len or options.get("max_len", 2048)
    model = _build(config, options)
    pairs, missing = _paired_weights(backbone, model)
    for hub_variable, variable in pairs:
        if variable is None:
            raise ValueError(
                "decoder_from_keras_hub does not know where the keras-hub weight "
                f"goes in tfnorm's decoder. Received: weight {hub_variable.path!r}"
            )
        variable.assign(hub_variable.numpy())
    if missing:
        raise ValueError(
            f"The keras-hub backbone has no weight for tfnorm's {missing[0]!r}. "
            f"Received: backbone={type(backbone).__name__}"
        )
    return model


def _build(config, options):
    options = dict(options)
    return build_decoder(
        options.pop("num_layers"),
        options.pop("d_model"),
        options.pop("num_heads"),
        options.pop("dff"),
        vocab_size=config["vocabulary_size"],
        max_len=options.pop("max_len"),
        **options,
    )


# What a tfnorm decoder must be to have a keras-hub counterpart: block
# options, and the model-level layers (`None`: the layer must be absent).
_HUB_LAYOUTS = {
    "LlamaBackbone": {
        "block": {"norm_position": "pre", "feed_forward": "swiglu", "use_bias": False},
        "norm": RMSNorm,
        "layers": {"final_norm": True, "position_embedding": False},
    },
    "GPT2Backbone": {
        "block": {
            "norm_position": "pre",
            "feed_forward": "gelu_tanh",
            "use_bias": True,
            "rope_max_wavelength": None,
        },
        "norm": LayerNormalization,
        "layers": {"final_norm": True, "position_embedding": True, "lm_head": False},
    },
}


def _hub_architecture(model):
    if not isinstance(model, DecoderModel) or not model.blocks:
        raise ValueError(
            "decoder_to_keras_hub converts a tfnorm decoder (`build_decoder`). "
            f"Received: model={type(model).__name__}"
        )
    if model.optional_layer("position_embedding") is not None:
        return "GPT2Backbone"
    return "LlamaBackbone"


def _refuse(architecture, option, value):
    raise ValueError(
        f"keras-hub's {architecture} has no counterpart for this decoder's "
        f"`{option}`. Received: {option}={value!r}"
    )


def _check_hub_layout(model, architecture):
    layout = _HUB_LAYOUTS[architecture]
    block = model.blocks[0]
    config = block.get_config()
    for other in model.blocks[1:]:
        differing = sorted(
            key
            for key, value in other.get_config().items()
            if key != "name" and config.get(key) != value
        )
        if differing:
            key = differing[0]
            _refuse(architecture, f"{other.name}.{key}", other.get_config()[key])
    for option, value in layout["block"].items():
        if config[option] != value:
            _refuse(architecture, option, config[option])
    if architecture == "LlamaBackbone" and config["rope_max_wavelength"] is None:
        _refuse(architecture, "position_embedding", "none")
    if architecture == "GPT2Backbone" and block.num_kv_heads != block.num_heads:
        _refuse(architecture, "num_kv_heads", block.num_kv_heads)
    norm = block.attention_norm
    if type(norm) is not layout["norm"]:
        _refuse(architecture, "norm", type(norm).__name__)
    for option, plain in (("partial", None), ("zero_centered_gamma", False)):
        if getattr(norm, option, plain) != plain:
            _refuse(architecture, f"norm.{option}", getattr(norm, option))
    if architecture == "GPT2Backbone" and norm.epsilon != 1e-5:
        # keras-hub's GPT-2 blocks fix their LayerNorms' epsilon at 1e-5.
        _refuse(architecture, "epsilon", norm.epsilon)
    for name, present in layout["layers"].items():
        if (model.optional_layer(name) is not None) != present:
            _refuse(architecture, name, "present" if not present else "absent")


def _hub_config(model, architecture):
    block = model.blocks[0]
    sizes = {
        "vocabulary_size": model.vocab_size,
        "num_layers": len(model.blocks),
        "hidden_dim": block.d_model,
        "intermediate_dim": block.dff,
        "dropout": block.dropout_rate,
    }
    if architecture == "GPT2Backbone":
        return {
            **sizes,
            "num_heads": block.num_heads,
            "max_sequence_length": model.get_layer("position_embedding").max_len,
        }
    return {
        **sizes,
        "num_query_heads": block.num_heads,
        "num_key_value_heads": block.num_kv_heads,
        "rope_max_wavelength": block.rope_max_wavelength,
        "layer_norm_epsilon": block.attention_norm.epsilon,
        "tie_word_embeddings": model.optional_layer("lm_head") is None,
    }


def decoder_to_keras_hub(model):
    """The keras-hub backbone equal to a tfnorm decoder of Llama's or GPT-2's layout.

    The reverse of `decoder_from_keras_hub`: a `tfnorm.build_decoder` model
    with the `"llama"` layout (Pre-LN RMSNorm, RoPE, SwiGLU, no biases, a
    final norm; grouped-query attention and a tied head allowed) becomes a
    keras-hub `LlamaBackbone`, one with the `"gpt2"` layout (Pre-LN
    LayerNorm at epsilon 1e-5, learned positions, GELU, biases, a final norm,
    the tied head) a `GPT2Backbone`, with every weight copied. Wrapped in
    keras-hub's `LlamaCausalLM` / `GPT2CausalLM` it gives the decoder's
    logits. Keras 3 with keras-hub installed.

    Example:

    ```python
    import keras_hub, tfnorm
    model = tfnorm.build_decoder(2, 32, 4, 64, vocab_size=100, max_len=128)
    backbone = tfnorm.models.decoder_to_keras_hub(model)
    causal_lm = keras_hub.models.LlamaCausalLM(backbone, preprocessor=None)
    ```

    Args:
        model: a `tfnorm.models.DecoderModel`.

    Returns:
        A keras-hub `LlamaBackbone` or `GPT2Backbone` with the model's weights.

    Raises:
        ValueError: naming the option and value keras-hub's backbone has no
            counterpart for (another norm, norm position or feed-forward,
            blocks that differ), or for a model that is not a tfnorm decoder.
        ImportError: without keras-hub.
    """
    architecture = _hub_architecture(model)
    _check_hub_layout(model, architecture)
    import keras_hub

    backbone_class = getattr(keras_hub.models, architecture)
    backbone = backbone_class(**_hub_config(model, architecture))
    pairs, unpaired = _paired_weights(backbone, model)
    for hub_variable, variable in pairs:
        if variable is None:
            raise ValueError(
                "decoder_to_keras_hub does not know which weight of tfnorm's "
                f"decoder fills keras-hub's {hub_variable.path!r}. "
                f"Received: model={model.name}"
            )
        hub_variable.assign(variable.numpy())
    if unpaired:
        _refuse(architecture, "weight", unpaired[0])
    return backbone
