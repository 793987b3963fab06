"""A run's identity and what may change when it resumes.

`checkpoint_dir/run_config.json` holds the settings and the run's identity
(SHA-256 of the training file, vocabulary size, class count), so that a
rerun resumes only the run it belongs to: a vocabulary applied to other data
turns every token into `[UNK]` without any error.
"""

from __future__ import annotations

import json
import os

from tfnorm._errors import setting_key
from tfnorm._safe_io import atomic_write_json, refuse_links
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.config.train_config import CHANGEABLE_KEYS, resume_keys
from tfnorm.training.config.train_defaults import default_vocab_size

RUN_CONFIG_FILE = "run_config.json"
IDENTITY_KEY = "run_identity"


def read_run_config(checkpoint_dir):
    """The saved `run_config.json` as a dict, or None when there is none."""
    path = os.path.join(checkpoint_dir, RUN_CONFIG_FILE)
    try:
        refuse_links([path])
    except OSError as error:
        raise ConfigError(
            "checkpoint_dir", f"{error}. Received: checkpoint_dir={checkpoint_dir!r}"
        ) from None
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            saved = json.load(handle)
    except (OSError, ValueError) as error:
        raise ConfigError(
            "checkpoint_dir",
            f"{path} cannot be read ({error}); it says which run the "
            "checkpoints belong to. Restore or remove it. Received: "
            f"checkpoint_dir={checkpoint_dir!r}",
        ) from None
    if not isinstance(saved, dict):
        # An earlier release could leave `[]`; read as "no settings", it let
        # any run resume these checkpoints unchecked.
        raise ConfigError(
            "checkpoint_dir",
            f"{path} holds a JSON {type(saved).__name__}, not the mapping of "
            "settings that says which run the checkpoints belong to; restore "
            f"it, or use another {setting_key('checkpoint_dir')} to start a new run. Received: "
            f"checkpoint_dir={checkpoint_dir!r}",
        )
    return saved


def write_run_config(paths, config, identity):
    """Writes the settings and `identity` to `run_config.json` in the run's
    checkpoint directory (`paths`, a `RunPaths`)."""
    values = dict(config.to_dict(), **{IDENTITY_KEY: identity})
    atomic_write_json(os.path.join(paths.checkpoint_dir, RUN_CONFIG_FILE), values)


def check_same_run(config, saved, data_sha256, log=None):
    """Refuses to resume checkpoints of a run with other settings or data.

    Values are compared as resolved: `./A.csv` is `A.csv`, a norm alias is
    its class, and a default given explicitly (`--vocab-size 20000` with a
    file) equals the default left out. The data path is not compared when
    the recorded SHA-256 of the file matches: the file is the same, however
    it is spelled.

    Args:
        config: the resolved `TrainConfig` of this run.
        saved: the saved run config (from `read_run_config`), or None when
            checkpoints have no `run_config.json` beside them.
        data_sha256: the training file's hash now (None for synthetic data).
        log: a `ProgressLog` for the one line naming the settings that
            changed and may (`CHANGEABLE_KEYS`); None logs nothing.

    Raises:
        ConfigError: naming the differing settings, or the changed file, or
            a text-data run whose checkpoints record no hash of their data.
    """
    saved = saved or {}
    current = config.to_dict()
    identity = saved.get(IDENTITY_KEY)
    identity = identity if isinstance(identity, dict) else {}
    saved_sha = identity.get("data_sha256")
    same_file = bool(data_sha256 and saved_sha == data_sha256)
    differences = [
        f"{key}: checkpoint {saved.get(key)!r}, now {current[key]!r}"
        for key in resume_keys(config)
        if key in saved
        and not (key == "data" and same_file)
        and _resolved(key, saved.get(key), saved, identity)
        != _resolved(key, current[key], current, identity)
    ]
    _check_vocab_size_setting(config, saved, identity, differences)
    if differences:
        raise ConfigError(
            "checkpoint_dir",
            f"{config.checkpoint_dir} holds checkpoints of a run with other "
            f"settings ({'; '.join(differences)}). Use another "
            f"{setting_key('checkpoint_dir')} or the original settings. Received: "
            f"checkpoint_dir={config.checkpoint_dir!r}",
        )
    if data_sha256 and saved_sha and saved_sha != data_sha256 and config.model_fn:
        raise ConfigError(
            "data_fn",
            f"data_fn {config.data_fn} returned other arrays than the ones the "
            f"checkpoints in {config.checkpoint_dir} were trained on (SHA-256 "
            f"{saved_sha[:12]}... then, {data_sha256[:12]}... now): if it draws "
            "or shuffles them at random, give it a fixed seed "
            "(np.random.default_rng(0)); resuming would go on with other data. "
            f"Or start a new run with another {setting_key('checkpoint_dir')}. "
            f"Received: data_fn={config.data_fn!r}",
        )
    if data_sha256 and saved_sha and saved_sha != data_sha256:
        raise ConfigError(
            "data",
            f"{config.data} changed since the checkpoints in "
            f"{config.checkpoint_dir} were made (SHA-256 {saved_sha[:12]}... "
            f"then, {data_sha256[:12]}... now); resuming would train on other "
            "data with the old vocabulary. Restore the file, or start a new "
            f"run with another {setting_key('checkpoint_dir')}. Received: data={config.data!r}",
        )
    if config.data and data_sha256 and not saved_sha:
        # Checkpoints of an earlier release (or without run_config.json): the
        # file they were trained on is unknown, and another file would be
        # read through their vocabulary as unknown tokens, without an error.
        path = os.path.join(config.checkpoint_dir, RUN_CONFIG_FILE)
        raise ConfigError(
            "data",
            f"the checkpoints in {config.checkpoint_dir} record no SHA-256 of "
            f"their training file ({path} has no {IDENTITY_KEY}), so it cannot "
            f"be confirmed that {config.data} is the file they were trained on. "
            f"Start a new run with another {setting_key('checkpoint_dir')}; or, only if the "
            "file is unchanged since, add "
            f'"{IDENTITY_KEY}": {{"data_sha256": "{data_sha256}"}} to {path} and '
            f"rerun. Received: data={config.data!r}",
        )
    changed = [
        f"{key} {saved[key]!r} -> {current[key]!r}"
        for key in CHANGEABLE_KEYS
        if key in saved and saved[key] != current[key]
    ]
    if changed and log is not None:
        log.line(
            f"resuming with changed settings: {', '.join(changed)} (the "
            "checkpoint's weights are kept; these apply from here on)"
        )


def _resolved(key, value, values, identity):
    """`value` of `key` as the run uses it, for comparing two spellings."""
    if key == "data" and isinstance(value, str):
        return os.path.normpath(os.path.abspath(value))
    if key in ("model_fn", "data_fn") and isinstance(value, str):
        path, colon, function = value.rpartition(":")
        if path.endswith(".py"):  # else a module name, spelled one way
            return os.path.normpath(os.path.abspath(path)) + colon + function
    if key == "norm" and isinstance(value, str):
        from tfnorm.layers.factory import norm_from_spec

        try:
            return type(norm_from_spec(value, "norm")).__name__
        except ValueError:
            return value
    if (
        key == "vocab_size"
        and value is None
        and (values.get("data") or values.get("task"))
    ):
        return default_vocab_size(values.get("data"), values["max_len"])
    if key == "num_classes" and value is None and values.get("data"):
        # Inferred from the labels: what they gave is recorded in the identity.
        return identity.get("num_classes", value)
    return value


def _check_vocab_size_setting(config, saved, identity, differences):
    """Names `vocab_size` and both vocabulary sizes when it is the setting
    that differs: the checkpoint's embedding has one row per token, so the
    restore would otherwise fail naming only the checkpoint."""
    trained = identity.get("vocab_size")
    if not isinstance(trained, int) or not any(
        entry.startswith("vocab_size:") for entry in differences
    ):
        return
    spelled = saved.get("vocab_size")
    how = (
        f"vocab_size {spelled}"
        if spelled is not None
        else "vocab_size left out, "
        + ("the vocabulary built from the data" if saved.get("data") else "the default")
    )
    if len(differences) == 1:
        raise ConfigError(
            "vocab_size",
            f"the checkpoints in {config.checkpoint_dir} were trained with a "
            f"vocabulary of {trained} tokens ({how}), this run's is "
            f"vocab_size={config.vocab_size}; resume "
            + (
                f"without {setting_key('vocab_size')}"
                if spelled is None
                else f"with {setting_key('vocab_size', spelled)}"
            )
            + ", or start a new run with another "
            f"{setting_key('checkpoint_dir')}. Received: "
            f"vocab_size={config.vocab_size!r}",
        )
    for index, entry in enumerate(differences):
        if entry.startswith("vocab_size:"):
            differences[index] = (
                f"{entry} (the checkpoints' vocabulary: {trained} tokens)"
            )


def check_vocabulary_size(config, saved, vocab_size, path):
    """Refuses a saved vocabulary (`path`, read back on resume) whose size,
    `vocab_size` with padding and `[UNK]`, is not the one the checkpoints
    were trained with (`run_config.json`'s identity): it was edited or
    replaced, and its token ids no longer match the embedding's rows."""
    identity = (saved or {}).get(IDENTITY_KEY)
    trained = identity.get("vocab_size") if isinstance(identity, dict) else None
    if not isinstance(trained, int) or trained == vocab_size:
        return
    raise ConfigError(
        "checkpoint_dir",
        f"{path} gives a vocabulary of {vocab_size} tokens (with padding and "
        f"[UNK]), but the checkpoints beside it were trained with {trained}: "
        "it was edited or replaced, and its token ids no longer match the "
        "checkpoints' embedding. Restore it, or start a new run with another "
        f"{setting_key('checkpoint_dir')}. Received: "
        f"checkpoint_dir={config.checkpoint_dir!r}",
    )
