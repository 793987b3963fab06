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
    COMPARE_STATISTICS,
    COMPARE_TASKS,
    DECODER_FEED_FORWARDS,
    DECODER_PRESET_NORMS,
    TEXT_UNITS,
    norms_help,
)
from tfnorm.experiments import claim_settings as claims
from tfnorm.experiments import compare_readers as readers
from tfnorm.experiments.compare_checks import (
    DEFAULT_EPSILON,
    DEFAULT_WARMUP_FRACTION,
    LM_NORMS,
    MAX_WARMUP_FRACTION,
    finish_settings,
)
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.declared import DeclaredSettings
from tfnorm.settings.readers import boolean, choice, integer, number
from tfnorm.settings.setting import setting, setting_of, unread_given

#: The settings of the decoder experiment only (`Setting.workloads`: the tasks).
LM = ("lm",)
TASK = "task"
MODEL = "model"
TRAINING = "training"
MEASUREMENT = "measurement"
SWEEP = f"depth sweep (off unless {setting_key('depths')} is given)"
RUNTIME = "runtime"

POSITIVE = integer(1)
NON_NEGATIVE = integer(0)


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
        workloads=("mlm",),
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
        workloads=LM,
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
    preset: str = setting(
        "llama", MODEL, "the decoders' architecture (lm only): llama (RMSNorm's place, rotary "
        "positions, SwiGLU, no biases) or gpt2 (learned positions, GELU, biases, tied head); "
        f"{setting_key('norm')} and the settings below override it", choice(tuple(DECODER_PRESET_NORMS)),
        workloads=LM,
    )  # fmt: skip
    feed_forward: str | None = setting(
        None, MODEL, "the decoders' feed-forward network (lm only): swiglu, gelu, gelu_tanh or relu",
        choice(DECODER_FEED_FORWARDS), optional=True, default_text="its preset's", workloads=LM,
    )  # fmt: skip
    bias: bool | None = setting(
        None, MODEL, "biases in the decoders' attention and feed-forward layers (lm only; true or false)",
        boolean, optional=True, metavar="{true,false}", default_text="its preset's", workloads=LM,
    )  # fmt: skip
    init_std: float | None = setting(
        None, MODEL, "draw the decoders' kernels and embeddings from N(0, INIT_STD), the kernels "
        "writing into the residual stream scaled by 1/sqrt(2 * num_layers), as GPT-2 (0.02; lm only)",
        number(maximum=1.0, above=0.0), optional=True, metavar="INIT_STD",
        default_text="glorot_uniform kernels, N(0, 0.02) embeddings", workloads=LM,
    )  # fmt: skip
    embedding_std: float | None = claims.EMBEDDING_STD
    position_offset: float | None = claims.POSITION_OFFSET
    deep_epsilon: float | None = claims.DEEP_EPSILON
    batchnorm_padding: str | None = claims.BATCHNORM_PADDING_SETTING
    batchnorm_momentum: float | None = claims.BATCHNORM_MOMENTUM
    variable_length: bool = setting(
        False,
        TASK,
        "give the reverse task's sequences random lengths (1 to "
        f"{setting_key('seq_len')}), padded at the end; padding is masked in the "
        "loss, the attention and a batch norm's statistics",
        boolean,
        flags=("--variable-length",),
        action="store_true",
        workloads=("reverse",),
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
    beta1: float = setting(
        0.9, TRAINING, "Adam's decay rate of the gradient mean", number(0.0, below=1.0)
    )  # fmt: skip
    beta2: float = setting(
        0.98, TRAINING, "Adam's decay rate of the squared gradient (the calibrated "
        "Transformer setting; language models often use 0.95 or 0.99)", number(0.0, below=1.0),
    )  # fmt: skip
    adam_epsilon: float = setting(
        1e-9, TRAINING, "Adam's stabiliser added to the root of the squared gradient",
        number(maximum=FLOAT32_MAX, above=0.0),
    )  # fmt: skip
    clipnorm: float | None = claims.CLIPNORM
    clip_groups: str = claims.CLIP_GROUPS
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
    gradient_variance_batches: int | None = claims.GRADIENT_VARIANCE_BATCHES
    gradient_variance_loss: float | None = claims.GRADIENT_VARIANCE_LOSS
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
        given = dict(values)
        finish_settings(values)
        # Each task is a workload: a setting its task does not read is
        # refused (the checks above say more for the older ones).
        field = unread_given(type(self), given, given["task"])
        if field is not None:
            tasks = " or ".join(repr(t) for t in setting_of(field).workloads)
            raise ConfigError(
                field.name,
                f"`{field.name}` applies to task {tasks} only. Received: "
                f"{field.name}={given[field.name]!r} with task={given['task']!r}",
            )


#: The default of every setting, by name (what `--help` shows).
DEFAULTS = {field.name: field.default for field in dataclasses.fields(CompareConfig)}
