"""`CompareConfig`: every setting of the `tfnorm compare` experiment, declared once.

Each field carries a `tfnorm.settings.setting.Setting` (help, group, how a
value is read and checked), the same declarations `tfnorm train`'s
`TrainConfig` uses: `tfnorm compare`'s flags are generated from them
(`tfnorm.cli.flags`), and a flag's string and a notebook's Python value go
through the same `Setting.parse`, so `--steps 2.7` and `steps=2.7` get the
same error.

Kept apart from the experiment, which imports TensorFlow, so that `tfnorm
compare --help` answers at once.
"""

from __future__ import annotations

import dataclasses

from tfnorm._checks import FLOAT32_MAX
from tfnorm._errors import setting_key
from tfnorm.choices import (
    COMPARE_CONTROL_NORMS,
    COMPARE_STATISTICS,
    COMPARE_TASKS,
    NORMS,
    TEXT_UNITS,
    norms_help,
)
from tfnorm.experiments import compare_readers as readers
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.declared import DeclaredSettings
from tfnorm.settings.readers import boolean, choice, integer, number
from tfnorm.settings.setting import setting

TASK = "task"
MODEL = "model"
TRAINING = "training"
MEASUREMENT = "measurement"
SWEEP = f"depth sweep (off unless {setting_key('depths')} is given)"
RUNTIME = "runtime"

POSITIVE = integer(1)
NON_NEGATIVE = integer(0)

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


@dataclasses.dataclass
class CompareConfig(DeclaredSettings):
    """The settings of `tfnorm.experiments.compare_experiment.run_comparison` and `tfnorm compare`.

    Build one with `CompareConfig.from_dict({...}).resolve()`: `resolve`
    checks every value (the same readers as `tfnorm train`'s) and fills the
    per-task sizes left unset.
    """

    task: str = setting(
        "reverse",
        TASK,
        "reverse: synthetic token reversal (target = input reversed); mlm: "
        "BERT-style masked-language modelling on real English text, the Python "
        "language reference's prose that ships with CPython "
        "(pydoc_data.topics.topics), no download; lm: causal decoders "
        "(tfnorm.build_decoder) predicting the next byte of that text",
        choice(COMPARE_TASKS),
    )
    text_unit: str | None = setting(
        None,
        TASK,
        "the units mlm masks and predicts: characters or words (mlm only)",
        choice(TEXT_UNITS),
        optional=True,
        default_text="char for mlm",
    )
    vocab_size: int | None = setting(
        None,
        TASK,
        "token vocabulary: symbols of the reverse task, or the most frequent "
        "characters or words of the text for mlm (plus [MASK] and [UNK]); "
        "lm reads bytes (257 tokens with end-of-text) and takes none",
        POSITIVE,
        optional=True,
        default_text="10 for reverse; for mlm 48 characters or 1000 words",
    )
    seq_len: int | None = setting(
        None,
        TASK,
        "sequence length (characters or words for mlm)",
        integer(2),
        optional=True,
        default_text="12 for reverse; for mlm 64 characters or 32 words; 64 bytes for lm",
    )
    num_layers: int = setting(6, MODEL, "encoder blocks", POSITIVE)
    d_model: int = setting(32, MODEL, "model width", POSITIVE)
    num_heads: int = setting(4, MODEL, "attention heads", POSITIVE)
    dff: int = setting(128, MODEL, "feed-forward width", POSITIVE)
    norm: str = setting(
        "layer",
        MODEL,
        f"norm for every block: {norms_help()}; or the control batch (Keras's "
        "BatchNormalization, padding masked where Keras can; not a tfnorm norm)",
        readers.norm_name,
    )
    statistics: str = setting(
        "float32",
        MODEL,
        "where the norms compute mean and variance: float32 (tfnorm's norms, "
        "always), or compute: a LayerNorm control computing them in the compute "
        f"dtype ({setting_key('mixed_precision')}), as a plain-op LayerNorm does",
        choice(COMPARE_STATISTICS),
    )
    norms: tuple | None = setting(
        None,
        MODEL,
        "lm only: the norms also compared at Pre-LN with warm-up, one run each",
        readers.norm_names,
        optional=True,
        metavar="NORM",
        default_text=" ".join(LM_NORMS) + " for lm (layer with statistics compute)",
    )
    epsilon: float | None = setting(
        None,
        MODEL,
        "the norms' epsilon",
        number(above=0.0),
        optional=True,
        default_text=f"{DEFAULT_EPSILON:g}; none for a norm without a statistic (dyt)",
    )
    gamma_init: float = setting(
        1.0,
        MODEL,
        "every norm's scale starts at this times its usual value (gamma 1; "
        "ScaleNorm's g sqrt(d_model))",
        number(above=0.0, maximum=100.0),
    )
    input_offset: float = setting(
        0.0,
        MODEL,
        "a constant added to every feature of the embeddings, a large shared "
        "offset LayerNorm's mean-centring removes and RMSNorm keeps",
        number(-1e4, 1e4),
    )
    variable_length: bool = setting(
        False,
        TASK,
        "give the reverse task's sequences random lengths (1 to "
        f"{setting_key('seq_len')}), padded at the end; padding is masked in the "
        "loss, the attention and a batch norm's statistics",
        boolean,
        flags=("--variable-length",),
        action="store_true",
    )
    batch_size: int | None = setting(
        None,
        TRAINING,
        "batch size",
        POSITIVE,
        optional=True,
        default_text="32; 16 for lm",
    )
    steps: int = setting(300, TRAINING, "training steps per run", POSITIVE)
    learning_rate: float = setting(
        1e-2,
        TRAINING,
        "peak learning rate (Adam)",
        number(maximum=FLOAT32_MAX, above=0.0),
    )
    warmup_steps: int | None = setting(
        None,
        TRAINING,
        "linear warm-up of the warm-up runs, then the peak rate held; at most "
        f"{MAX_WARMUP_FRACTION:.0%} of {setting_key('steps')}. A Post-LN control without warm-up "
        "trains at the warm-up run's mean rate",
        POSITIVE,
        optional=True,
        default_text=f"{DEFAULT_WARMUP_FRACTION:.0%} of {setting_key('steps')}, 60 at 300",
    )
    seeds: tuple = setting(
        (0, 1, 2),
        TRAINING,
        "seeds to run each variant with",
        readers.seeds,
        metavar="SEED",
    )
    variants: tuple | None = setting(
        None,
        TRAINING,
        "train only these variants, as POSITION[:WARMUP_STEPS[:PEAK_RATE]] "
        "(e.g. post:60 pre)",
        readers.variants,
        optional=True,
        metavar="VARIANT",
        default_text="Post-LN and Pre-LN with and without warm-up, and the "
        "Post-LN control at the warm-up run's mean rate",
    )
    eval_size: int | None = setting(
        None,
        MEASUREMENT,
        "sequences in the fixed evaluation set (lm: held-out windows of the "
        "curves; the final bits per byte read the whole held-out text)",
        POSITIVE,
        optional=True,
        default_text="512; 64 for lm",
    )
    eval_every: int = setting(10, MEASUREMENT, "evaluate every N steps", POSITIVE)
    histogram_every: int = setting(
        50,
        MEASUREMENT,
        "write TensorBoard histograms of every norm layer's outputs every N "
        "steps (0: none)",
        NON_NEGATIVE,
    )
    depths: tuple | None = setting(
        None,
        SWEEP,
        "also run the depth sweep at these depths (e.g. 6 12 18): Post-LN with "
        f"each {setting_key('sweep_warmups')} fraction, Pre-LN without warm-up",
        readers.depths,
        optional=True,
        metavar="LAYERS",
    )
    sweep_warmups: tuple = setting(
        (0.0, 0.1, 0.2, 0.3),
        SWEEP,
        f"warm-up lengths of the sweep's Post-LN runs, as fractions of {setting_key('steps')}",
        readers.fractions(MAX_WARMUP_FRACTION),
        metavar="FRACTION",
    )
    sweep_seeds: tuple = setting(
        (0,), SWEEP, "seeds of the sweep's runs", readers.seeds, metavar="SEED"
    )
    jit_compile: bool = setting(
        True,
        RUNTIME,
        "do not XLA-compile the training step",
        boolean,
        flags=("--no-jit",),
        action="store_false",
    )
    mixed_precision: str = setting(
        "float32",
        RUNTIME,
        "float16: the mixed_float16 policy (float16 compute, float32 "
        "variables, dynamic loss scaling)",
        choice(("float32", "float16")),
    )
    deterministic: bool = setting(
        True,
        RUNTIME,
        "do not turn on TensorFlow's deterministic ops (they make the same "
        "command give the same table on the same runtime)",
        boolean,
        flags=("--no-determinism",),
        action="store_false",
    )

    SETTING_NOUN = "comparison setting"

    def _finish(self, values):
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
            if values["input_offset"]:
                raise ConfigError(
                    "input_offset",
                    "`input_offset` is added to the encoder tasks' embeddings "
                    f"(reverse, mlm) only. Received: input_offset="
                    f"{values['input_offset']!r} with task='lm'",
                )
        elif values["norms"] is not None:
            raise ConfigError(
                "norms",
                "`norms` compares norms in the decoder experiment (task 'lm') "
                f"only. Received: norms={list(values['norms'])!r} with "
                f"task={values['task']!r}",
            )
        _finish_epsilon(values)
        if values["warmup_steps"] is None:
            values["warmup_steps"] = max(
                1, int(DEFAULT_WARMUP_FRACTION * values["steps"])
            )
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


#: The default of every setting, by name (what `--help` shows).
DEFAULTS = {field.name: field.default for field in dataclasses.fields(CompareConfig)}


def _check_epsilon(norm, epsilon):
    """The norm's own range for `epsilon` (float32 statistics), checked by
    building the norm now rather than when the first variant's model is."""
    from tfnorm.layers.factory import norm_from_spec

    try:
        norm_from_spec(norm, "norm", epsilon=epsilon)
    except ValueError as error:  # a `NormSpecError`, naming the one at fault
        raise ConfigError(error.argument, str(error)) from None
