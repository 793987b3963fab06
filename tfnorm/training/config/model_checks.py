"""The checks of `TrainConfig.resolve` on the model a run builds: a model
and a step that fit in memory, a norm spec with its epsilon, and a start
from a checkpoint (`init_from`) that leaves the model's shape to it.

Each failure is a `ConfigError` naming the key to change. Like the rest of
`config`, this module must not import TensorFlow at import time.
"""

from __future__ import annotations

import dataclasses

from tfnorm._errors import setting_key
from tfnorm.choices import LANGUAGE_MODEL_TASK
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_defaults import default_vocab_size

# The largest model and step `resolve` lets through: weights, or one layer's
# attention scores or feed-forward activations for a batch, past 2**31 values
# (8 GiB in float32) exceed TensorFlow's int32 tensor sizes and most
# machines' memory; such sizes are typos (an extra zero), caught before
# anything is created.
MAX_VALUES = 2**31 - 1


def language_model_vocab_size(tokenizer):
    """The language model's vocabulary as far as the settings tell: the
    bytes and end-of-text token, or `bpe:N`'s N (a tokenizer.json is read
    only when the run starts: its size is at least the bytes')."""
    from tfnorm.training.data.byte_text import VOCAB_SIZE

    if tokenizer.startswith("bpe:"):
        return int(tokenizer[len("bpe:") :])
    return VOCAB_SIZE


def check_model_size(values):
    d_model, max_len, layers = (
        values["d_model"],
        values["max_len"],
        values["num_layers"],
    )
    vocab = values["vocab_size"] or default_vocab_size(values["data"], max_len)
    if values["task"] == LANGUAGE_MODEL_TASK:
        vocab = language_model_vocab_size(values["tokenizer"])
    dff = values["dff"] or 4 * d_model
    # Embeddings, then each block's attention and feed-forward kernels.
    weights = {
        "vocab_size": vocab * d_model,
        "max_len": max_len * d_model,
        "num_classes": (values["num_classes"] or 0) * d_model,
        "d_model": layers * (4 * d_model * d_model + 2 * d_model * dff),
    }
    total = sum(weights.values())
    if total > MAX_VALUES:
        key = max(weights, key=weights.get)
        vocabulary = f"vocab_size={vocab}"
        if values["task"] == LANGUAGE_MODEL_TASK:  # its vocabulary is its tokenizer's
            vocabulary = f"tokenizer={values['tokenizer']!r} ({vocab} ids)"
            key = "tokenizer" if key == "vocab_size" else key
        raise ConfigError(
            key,
            f"The model would have about {total:.2g} weights, more than the "
            f"{MAX_VALUES} tfnorm train builds. Received: {vocabulary}, "
            f"max_len={max_len}, num_classes={values['num_classes']}, "
            f"num_layers={layers}, d_model={d_model}, dff={dff}",
        )
    batch = values["batch_size"]
    activations = {
        "max_len": batch * values["num_heads"] * max_len * max_len,
        "dff": batch * max_len * dff,
    }
    if max(activations.values()) > MAX_VALUES:
        key = max(activations, key=activations.get)
        raise ConfigError(
            key,
            f"One batch would need about {max(activations.values()):.2g} values "
            f"in one layer (attention scores: batch x heads x max_len^2; "
            f"feed-forward: batch x max_len x dff), more than {MAX_VALUES}. "
            f"Lower batch_size, max_len or dff. Received: batch_size={batch}, "
            f"num_heads={values['num_heads']}, max_len={max_len}, dff={dff}",
        )


def check_norm(norm, epsilon, values):
    from tfnorm.layers.factory import NormSpecError, norm_from_spec

    try:
        layer = norm_from_spec(norm, "norm", epsilon=epsilon)
    except NormSpecError as error:  # naming the argument at fault
        raise ConfigError(error.argument, str(error)) from None
    if isinstance(norm, dict):
        _check_norm_config(norm, layer, values)


def _check_norm_config(norm, layer, values):
    """A norm config dict must fit the classifier's (batch, max_len, d_model) rows.

    Its `axis` and `dtype` are the user's, and a wrong one (the batch axis,
    an axis past the rank, float16 weights in a float32 model) would only
    fail while the model is built, as a traceback.
    """
    from tfnorm._keras import tf
    from tfnorm.choices import PRECISION_POLICIES

    config = norm.get("config") or {}
    policy = getattr(getattr(layer, "dtype_policy", None), "name", None)
    run_policy = PRECISION_POLICIES.get(values["mixed_precision"], "float32")
    if config.get("dtype") is not None and policy not in ("float32", run_policy):
        raise ConfigError(
            "norm",
            f"the norm's `dtype` must be left out (the run's dtypes follow "
            f"{setting_key('mixed_precision', values['mixed_precision'])}); a {policy} norm "
            "cannot sit between the model's layers. "
            f"Received: norm.config.dtype={config['dtype']!r}",
        )
    shape = tf.TensorShape([None, values["max_len"], values["d_model"]])
    try:
        layer.build(shape)
    except (ValueError, TypeError) as error:
        axis = config.get("axis", getattr(layer, "axis", None))
        reason = " ".join(str(error).split("Received:")[0].split()).rstrip(". ")
        raise ConfigError(
            "norm",
            f"the norm's `axis` does not fit the model's rows of shape (batch, "
            f"max_len, d_model) = {shape} ({reason}); "
            f"use axis -1 (the features). Received: norm.config.axis={axis!r}",
        ) from None


#: The model settings a checkpoint's config.json sets (`init_from`).
CHECKPOINT_SHAPED = ("num_layers", "d_model", "num_heads", "dff", "preset")
#: The other model settings the checkpoint fixes: its feed-forward network,
#: biases and norm epsilon are in its weights and config.json, and its
#: weights replace any initialisation. (`dropout_rate` is not among them:
#: it applies to the checkpoint's model as to any other.)
CHECKPOINT_FIXED = (
    "norm_position",
    "tokenizer",
    "feed_forward",
    "bias",
    "init_std",
    "epsilon",
)


def check_init_from(values, config_class):
    """With `init_from`, the checkpoint's config.json sets the model: a model
    setting given too is refused, not silently ignored (`norm` may replace
    the checkpoint's norms; `max_len` is the context trained on;
    `dropout_rate` replaces the checkpoint's dropout)."""
    if values.get("init_from") is None:
        return
    defaults = {field.name: field.default for field in dataclasses.fields(config_class)}
    for key in CHECKPOINT_SHAPED + CHECKPOINT_FIXED:
        if values[key] != defaults[key]:
            raise ConfigError(
                key,
                f"{key} comes from the checkpoint's config.json with "
                f"{setting_key('init_from')}; leave it out. "
                f"Received: {key}={values[key]!r}",
            )
