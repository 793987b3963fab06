"""Starting `tfnorm train --task lm` from a Hugging Face checkpoint (`init_from`).

The checkpoint's tokenizer replaces tfnorm's bytes and its weights the
random start: `tfnorm.models.decoder_from_hf` builds the model its
config.json describes, with `norm` (when given) in place of the family's
norms. The tokenizer is saved in the run directory, where `tfnorm generate`
finds it (`language_model.json` names the folder).
"""

from __future__ import annotations

import os

from tfnorm._errors import setting_key
from tfnorm.training.data import DataError

#: The run directory's folder for the tokenizer (`language_model.json`'s
#: `tokenizer`).
TOKENIZER_DIR = "tokenizer"


def is_run_directory(path):
    """Whether `path` is a tfnorm language-model run (its
    `language_model.json`), not a Hugging Face checkpoint."""
    from tfnorm.training.rundir.reading import LANGUAGE_MODEL_FILE

    return os.path.isfile(os.path.join(path, LANGUAGE_MODEL_FILE))


def _run_recipe(config):
    from tfnorm.training.rundir.reading import RunDirectoryError, read_recipe

    try:
        return read_recipe(config.init_from)
    except RunDirectoryError as error:
        raise DataError(f"{setting_key('init_from')}: {error}") from None


def start_arguments(config):
    """`build_decoder`'s arguments of the model `init_from` names, with the
    run's `dropout_rate` when one is given (else the checkpoint's own)."""
    if is_run_directory(config.init_from):
        arguments = dict(_run_recipe(config)["build_decoder"])
        if config.dropout_rate is None:
            return arguments
        arguments.pop("attention_dropout", None)
        return {**arguments, "dropout_rate": config.dropout_rate}
    from tfnorm.models.decoder.hf import hf_decoder_arguments

    return hf_decoder_arguments(
        config.init_from,
        max_len=config.max_len,
        norm=config.norm,
        dropout_rate=config.dropout_rate,
    )[0]


def _run_tokenizer(config):
    """The tokenizer of a tfnorm run (None: bytes), its model checked."""
    where, recipe = config.init_from, _run_recipe(config)
    if config.norm is not None or recipe["build_decoder"]["max_len"] < config.max_len:
        key = "norm" if config.norm is not None else "max_len"
        why = (
            "a tfnorm run keeps its own norms"
            if key == "norm"
            else f"its model takes {recipe['build_decoder']['max_len']} tokens"
        )
        raise DataError(
            f"{setting_key(key)} cannot be {getattr(config, key)!r} when "
            f"starting from the run {where}: {why}. "
            f"Received: {key}={getattr(config, key)!r}"
        )
    if recipe.get("tokenizer", "bytes") == "bytes":
        return None
    return _loaded(os.path.join(where, TOKENIZER_DIR))


def checked_tokenizer(config):
    """The tokenizer of `config.init_from`, checked against its model.

    Raises:
        DataError: naming the setting: no tokenizer, no end-of-text id, more
            ids than the model's vocabulary, or a context longer than the
            model's positions.
    """
    from tfnorm.checkpoints import CheckpointError, load_tokenizer
    from tfnorm.models.decoder.hf import hf_decoder_arguments

    where = config.init_from
    if is_run_directory(where):
        return _run_tokenizer(config)
    try:
        arguments, _ = hf_decoder_arguments(where, max_len=config.max_len)
        tokenizer = load_tokenizer(where)
    except CheckpointError as error:
        received = (
            "" if "Received:" in str(error) else f" Received: init_from={where!r}"
        )
        raise DataError(f"{setting_key('init_from')}: {error}{received}") from None
    if tokenizer.eos_id is None or tokenizer.vocab_size > arguments["vocab_size"]:
        raise DataError(
            f"{setting_key('init_from')}: the tokenizer of {where} "
            + (
                "has no end-of-text id (eos_token), which ends each file"
                if tokenizer.eos_id is None
                else f"has {tokenizer.vocab_size} ids, more than the model's "
                f"vocab_size {arguments['vocab_size']}"
            )
            + f". Received: init_from={where!r}"
        )
    return tokenizer


def starting_model(config, log):
    """The checkpoint's decoder (its norms `config.norm` when given), saying
    in one line what a norm swap did."""
    from tfnorm.models.decoder.hf import decoder_from_hf

    if is_run_directory(config.init_from):
        return _run_model(config, log)
    model = decoder_from_hf(
        config.init_from,
        max_len=config.max_len,
        norm=config.norm,
        dropout_rate=config.dropout_rate,
    )
    if config.norm is not None:
        norm = type(model.blocks[0].attention_norm).__name__
        log.line(
            f"norm={config.norm}: the checkpoint's norms are "
            f"{norm}s now (each scale kept; a bias {norm} has no place for "
            "is left out, so training starts from a changed model)"
        )
    return model


def _run_model(config, log):
    """The model of a tfnorm run (its export, else its newest checkpoint),
    built afresh here (in the run's strategy) with those weights."""
    from tfnorm.inference.text_generation import TextGenerator
    from tfnorm.models import build_decoder
    from tfnorm.training.rundir.reading import RunDirectoryError

    try:
        source = TextGenerator(config.init_from)
    except RunDirectoryError as error:
        raise DataError(f"{setting_key('init_from')}: {error}") from None
    model = build_decoder(**start_arguments(config))
    model.set_weights(source.model.get_weights())
    model.max_len = config.max_len
    log.line(f"starting from the weights of {source.source}")
    return model


def save_tokenizer(tokenizer, logdir):
    """Writes `tokenizer` into the run directory; returns its folder name."""
    tokenizer.save(os.path.join(logdir, TOKENIZER_DIR))
    return TOKENIZER_DIR


def bpe_size(spec):
    """N of a `bpe:N` tokenizer setting, else None."""
    return int(spec[4:]) if spec.startswith("bpe:") else None


def tokenizer_vocab_size(config):
    """The model's vocabulary for the run's `tokenizer` setting (not bytes)."""
    size = bpe_size(config.tokenizer)
    if size is not None:
        return size
    return _loaded(config.tokenizer).vocab_size


def _loaded(spec):
    from tfnorm.checkpoints import CheckpointError, load_tokenizer

    try:
        tokenizer = load_tokenizer(spec)
    except CheckpointError as error:
        raise DataError(f"{setting_key('tokenizer')}: {error}") from None
    if tokenizer.eos_id is None:
        raise DataError(
            f"{setting_key('tokenizer')}: the tokenizer has no end-of-text id "
            f"(eos_token), which ends each file. Received: tokenizer={spec!r}"
        )
    return tokenizer


def run_tokenizer(config, has_checkpoint):
    """The run's tokenizer, or a function of the training documents that
    fits one (`bpe:N`), or None for bytes. A resumed `bpe:N` run reads the
    one it saved."""
    if config.init_from is not None:
        return checked_tokenizer(config)
    if config.tokenizer == "bytes":
        return None
    size = bpe_size(config.tokenizer)
    if size is None:
        return _loaded(config.tokenizer)
    saved = os.path.join(config.logdir, TOKENIZER_DIR)
    if has_checkpoint and os.path.isfile(os.path.join(saved, "tokenizer.json")):
        return _loaded(saved)
    from tfnorm.training.data.bpe_training import train_byte_bpe

    return lambda texts: train_byte_bpe(texts, size)


def tokenizer_sha256(tokenizer):
    """The SHA-256 of a tokenizer's whole definition (vocabulary, merges)."""
    import hashlib

    return hashlib.sha256(tokenizer.tokenizer.to_str().encode("utf-8")).hexdigest()


def tokenizer_identity(tokenizer):
    """What `run_config.json` records of the run's tokenizer (none: bytes)."""
    if tokenizer is None:
        return {}
    return {"tokenizer_sha256": tokenizer_sha256(tokenizer)}


def check_same_tokenizer(saved, tokenizer):
    """Refuses to resume checkpoints trained on other token ids."""
    from tfnorm.settings.config_error import ConfigError
    from tfnorm.training.rundir.run_identity import IDENTITY_KEY

    identity = (saved or {}).get(IDENTITY_KEY) or {}
    recorded = identity.get("tokenizer_sha256") if isinstance(identity, dict) else None
    now = tokenizer_sha256(tokenizer) if tokenizer is not None else None
    if recorded != now:
        raise ConfigError(
            "tokenizer",
            "the checkpoints were trained with another tokenizer "
            f"({(recorded or 'bytes')[:12]}... then, {(now or 'bytes')[:12]}... "
            "now); resuming would read other ids. Start a new "
            f"{setting_key('logdir')}, or give the tokenizer of the run.",
        )
