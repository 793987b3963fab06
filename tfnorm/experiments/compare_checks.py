"""The checks of `CompareConfig.resolve` that involve several settings,
and the per-task values of the settings left unset.

Each setting reads and checks its own value (`compare_readers`,
`tfnorm.settings.readers`); these are the rules no single value decides.
No TensorFlow at import time.
"""

from __future__ import annotations

from tfnorm.choices import COMPARE_CONTROL_NORMS, NORMS
from tfnorm.experiments import claim_settings as claims
from tfnorm.experiments import compare_readers as readers
from tfnorm.settings.config_error import ConfigError

#: The longest warm-up, as a fraction of the run: the peak rate must be
#: trained at for most of the run, or "warm-up helps" cannot be told apart
#: from "a lower learning rate helps".
MAX_WARMUP_FRACTION = 0.3

#: The warm-up length when `warmup_steps` is unset, as a fraction of the run.
DEFAULT_WARMUP_FRACTION = 0.2
#: The norms' epsilon: the Transformer setting (PyTorch and keras-hub use it too).
DEFAULT_EPSILON = 1e-5

#: Per-task values of the settings left unset (None).
TASK_SIZES = {
    "reverse": {"vocab_size": 10, "seq_len": 12, "batch_size": 32, "eval_size": 512},
    "mlm-char": {"vocab_size": 48, "seq_len": 64, "batch_size": 32, "eval_size": 512},
    "mlm-word": {"vocab_size": 1000, "seq_len": 32, "batch_size": 32, "eval_size": 512},
    "lm": {"seq_len": 64, "batch_size": 16, "eval_size": 64},
}
#: The norms the decoder experiment compares at Pre-LN when `norms` is unset.
LM_NORMS = ("layer", "rms", "dyt")
#: The longest context of the decoder experiment.
MAX_LM_SEQ_LEN = 4096


def finish_settings(values):
    """Checks the read `values` of a `CompareConfig` together and fills the
    per-task sizes, the warm-up and the epsilon left unset, in place."""
    sizes = values["task"]
    if sizes == "mlm":
        values["text_unit"] = values["text_unit"] or "char"
        sizes = f"mlm-{values['text_unit']}"
    elif values["text_unit"] is not None:
        # Only mlm reads text in units; the others would ignore it.
        raise ConfigError(
            "text_unit",
            "`text_unit` chooses the units of task 'mlm' only (lm reads "
            "bytes, reverse makes symbols). Received: "
            f"text_unit={values['text_unit']!r} with task={values['task']!r}",
        )
    for key, size in TASK_SIZES[sizes].items():
        if values[key] is None:
            values[key] = size
    readers.check_controls(values)
    if sizes == "lm":
        _finish_lm(values)
    elif values["norms"] is not None:
        raise ConfigError(
            "norms",
            "`norms` compares norms in the decoder experiment (task 'lm') "
            f"only. Received: norms={list(values['norms'])!r} with "
            f"task={values['task']!r}",
        )
    _finish_epsilon(values)
    claims.check_claim_settings(values)
    if values["warmup_steps"] is None:
        values["warmup_steps"] = max(1, int(DEFAULT_WARMUP_FRACTION * values["steps"]))
    longest = max(1, int(MAX_WARMUP_FRACTION * values["steps"]))
    if values["warmup_steps"] > longest:
        raise ConfigError(
            "warmup_steps",
            f"`warmup_steps` must be at most {MAX_WARMUP_FRACTION:.0%} of "
            f"`steps` ({longest}), so that the warm-up ends well before the "
            f"run does. Received: warmup_steps={values['warmup_steps']!r} "
            f"with steps={values['steps']!r}",
        )
    too_long = [v for v in values["variants"] or () if v[1] >= values["steps"]]
    if too_long:
        raise ConfigError(
            "variants",
            "A variant's warm-up must be shorter than `steps` "
            f"({values['steps']}). Received: variants={too_long!r}",
        )
    if values["d_model"] % values["num_heads"]:
        raise ConfigError(
            "num_heads",
            "`d_model` must be divisible by `num_heads`. Received: "
            f"d_model={values['d_model']}, num_heads={values['num_heads']}",
        )


def _finish_epsilon(values):
    """The default epsilon where the norm divides by a statistic; a control's
    (Keras's own layer) is not checked against tfnorm's range."""
    control = values["norm"] in COMPARE_CONTROL_NORMS
    takes_epsilon = control or NORMS[values["norm"]].takes_epsilon
    if values["epsilon"] is None and takes_epsilon:
        values["epsilon"] = DEFAULT_EPSILON
    elif values["epsilon"] is not None and not takes_epsilon:
        raise ConfigError(
            "epsilon",
            f"`norm` {values['norm']!r} divides by no statistic, so it takes "
            f"no `epsilon`. Received: epsilon={values['epsilon']!r}",
        )
    if takes_epsilon and not control:
        _check_epsilon(values["norm"], values["epsilon"])


def _finish_lm(values):
    from tfnorm.training.data.byte_text import VOCAB_SIZE

    if values["vocab_size"] not in (None, VOCAB_SIZE):
        raise ConfigError(
            "vocab_size",
            f"task 'lm' reads bytes: its vocabulary is {VOCAB_SIZE} tokens "
            "(256 bytes and end-of-text) and takes no `vocab_size`. Received: "
            f"vocab_size={values['vocab_size']!r} with task='lm'",
        )
    values["vocab_size"] = VOCAB_SIZE
    if values["seq_len"] > MAX_LM_SEQ_LEN:
        raise ConfigError(
            "seq_len",
            f"`seq_len` must be at most {MAX_LM_SEQ_LEN} for task 'lm', so that "
            "the held-out text (about 46,000 bytes) holds several windows. "
            f"Received: seq_len={values['seq_len']!r}",
        )
    if values["norms"] is None:
        # The LayerNorm control replaces every norm: no other norm to compare.
        compute = values["statistics"] == "compute"
        values["norms"] = ("layer",) if compute else LM_NORMS


def _check_epsilon(norm, epsilon):
    """The norm's own range for `epsilon` (float32 statistics), checked by
    building the norm now rather than when the first variant's model is."""
    from tfnorm.layers.factory import norm_from_spec

    try:
        norm_from_spec(norm, "norm", epsilon=epsilon)
    except ValueError as error:  # a `NormSpecError`, naming the one at fault
        raise ConfigError(error.argument, str(error)) from None
