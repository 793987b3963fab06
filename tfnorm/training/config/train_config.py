"""`TrainConfig`: every setting of a `tfnorm train` run, declared once.

Each field carries its own `settings.Setting` (help, group, reader, resume
class, scope); the command line's flags are generated from them
(`tfnorm.cli.flags`), and values from flags, config files and notebooks all
go through the same `Setting.parse` in `resolve()`. Field names are the
config-file keys. No TensorFlow at import time: `--help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm._checks import FLOAT32_MAX, MAX_SEED
from tfnorm._errors import setting_key
from tfnorm.choices import (
    DECAY_TARGETS,
    DECAYS,
    DECODER_FEED_FORWARDS,
    DECODER_PRESET_NORMS,
    LANGUAGE_MODEL_TASK,
    NORM_POSITIONS,
    OPTIMIZERS,
    POOLINGS,
    PRECISION_MODES,
    STRATEGIES,
    TRAIN_TASKS,
    WINDOW_ORDERS,
    norms_help,
)
from tfnorm.training.config import checks
from tfnorm.training.config.checks import check_combinations
from tfnorm.training.config.declared import DeclaredSettings
from tfnorm.training.config.model_checks import check_init_from
from tfnorm.training.config.settings import (
    ANY_MODEL,
    CLASSIFIER,
    FIXED,
    FREE,
    LANGUAGE_MODEL,
    LOGGED,
    MODEL_FN_ONLY,
    boolean,
    choice,
    creatable,
    data_paths,
    device_list,
    existing_file,
    function_spec,
    hf_checkpoint,
    integer,
    keys_declared,
    loss_name,
    norm_spec,
    number,
    precision,
    setting,
    tokenizer_spec,
)
from tfnorm.training.config.train_defaults import (
    DATA,
    DEFAULT_VAL_SPLIT,
    MAX_SYNTHETIC_EXAMPLES,
    MIN_MAX_LEN,
    MODEL,
    NON_NEGATIVE,
    OPTIMISATION,
    OUTPUTS,
    OWN_MODEL,
    POSITIVE,
    RUNTIME,
    fill_derived_defaults,
    sized,
)


@dataclasses.dataclass
class TrainConfig(DeclaredSettings):
    """Settings of one training run (see `tfnorm train --help` for each).

    Build one from keywords or a dict (`TrainConfig.from_dict`); `resolve()`
    returns a copy with every value checked and the derived defaults filled
    in (`dff`, `checkpoint_dir`, `num_classes` of the synthetic tasks,
    `val_split` of a data file without a validation file), and the resolved
    copy itself when asked again.
    """

    # The user's own model and data.
    model_fn: str | None = setting(
        None, OWN_MODEL, "MODULE:FUNCTION returning a Keras model (MODULE a "
        "module name or path/to/file.py); called under the distribution "
        "strategy's scope. A compiled model keeps its optimizer, loss and "
        f"metrics; an uncompiled one gets the optimisation settings and {setting_key('loss')}",
        function_spec, optional=True, metavar="MODULE:FUNCTION", resume=FIXED, scope=ANY_MODEL,
    )  # fmt: skip
    data_fn: str | None = setting(
        None, OWN_MODEL, "MODULE:FUNCTION returning the training data or "
        "(train, validation): tf.data.Datasets of (x, y) batches or NumPy "
        f"arrays (x, y), which the run batches by {setting_key('batch_size')}",
        function_spec, optional=True, metavar="MODULE:FUNCTION", resume=FIXED, scope=ANY_MODEL,
    )  # fmt: skip
    loss: str | None = setting(
        None, OWN_MODEL, f"Keras loss of an uncompiled {setting_key('model_fn')} model, e.g. "
        "sparse_categorical_crossentropy", loss_name, optional=True,
        metavar="NAME", resume=FIXED, scope=MODEL_FN_ONLY,
    )  # fmt: skip
    from_logits: bool = setting(
        False, OWN_MODEL, f"the {setting_key('loss')} takes logits (the model has no softmax)",
        boolean, flags=("--from-logits",), action="store_true", resume=FIXED, scope=MODEL_FN_ONLY,
    )  # fmt: skip
    # Data: a synthetic task or files.
    task: str | None = setting(
        None, DATA, "synthetic task: sorted (is the sequence sorted), duplicate (does a "
        "token occur twice), majority (most frequent token class); or lm, a "
        f"causal language model of the text in {setting_key('data')}",
        choice(TRAIN_TASKS), optional=True, resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    data: str | None = setting(
        None, DATA, "training file (CSV, TSV or JSONL); with "
        f"{setting_key('task', LANGUAGE_MODEL_TASK)}: UTF-8 text files, or a directory of .txt files",
        data_paths, optional=True, metavar="PATH", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    val_data: str | None = setting(
        None, DATA, f"validation file (same formats as {setting_key('data')})", existing_file,
        optional=True, metavar="PATH", resume=LOGGED, scope=CLASSIFIER,
    )  # fmt: skip
    val_split: float | None = setting(
        None, DATA, f"without {setting_key('val_data')}, the share of {setting_key('data')} held out for "
        f"validation, split by {setting_key('seed')}; 0 for none (a file of fewer than 10 "
        f"examples is not split); with {setting_key('task', LANGUAGE_MODEL_TASK)}: the end of the text", number(0.0, below=1.0), optional=True,
        metavar="SHARE", default_text=f"{DEFAULT_VAL_SPLIT} with {setting_key('data')} alone", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    num_examples: int = setting(
        2048, DATA, "synthetic training examples",
        integer(1, MAX_SYNTHETIC_EXAMPLES), resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    vocab_size: int | None = setting(
        None, DATA, "synthetic: token ids; files: vocabulary limit (counting "
        "padding and the unknown token, so at least 3)", sized("vocab_size", 3),
        optional=True, default_text="max(16, 2*max_len+1) for tasks, 20000 for files", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    num_classes: int | None = setting(
        None, DATA, f"classes of {setting_key('task', 'majority')}, or of a data file: its id "
        "labels must then be 0..num_classes-1, its name labels that many",
        integer(2), optional=True,
        default_text="3; files: max label + 1, or the number of names", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    max_len: int = setting(
        16, DATA, f"tokens per example; with {setting_key('task', LANGUAGE_MODEL_TASK)}: the context, in bytes",
        sized("max_len", MIN_MAX_LEN), resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    windows: str = setting(
        "sequential", DATA, f"with {setting_key('task', LANGUAGE_MODEL_TASK)}: sequential (the text cut into "
        "windows one after the other, visited in a seeded order) or random (each window starts at a seeded "
        "random byte, so the model sees every offset)", choice(WINDOW_ORDERS), resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    # Model.
    num_layers: int = setting(
        2, MODEL, "encoder blocks (decoder blocks of a language model)", sized("num_layers"),
        resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    d_model: int = setting(
        64, MODEL, "width", sized("d_model"), resume=FIXED, scope=CLASSIFIER
    )
    num_heads: int = setting(
        4, MODEL, f"attention heads, must divide {setting_key('d_model')}", sized("num_heads"),
        resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    dff: int | None = setting(
        None, MODEL, "feed-forward width", sized("dff"),
        optional=True, default_text="4 * d_model", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    norm: str | None = setting(
        None, MODEL, f"normalisation: {norms_help()}", norm_spec, optional=True,
        default_text="layer; a language model: its preset's", resume=FIXED, scope=CLASSIFIER,
    )  # fmt: skip
    preset: str = setting(
        "llama", MODEL, "the language model's architecture: llama (RMSNorm, "
        "rotary positions, SwiGLU, no biases) or gpt2 (LayerNorm, learned "
        "positions, GELU, biases, head tied to the embedding); the model "
        "settings given override it", choice(tuple(DECODER_PRESET_NORMS)),
        resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    feed_forward: str | None = setting(
        None, MODEL, "the language model's feed-forward network: swiglu (gated, SiLU), gelu, gelu_tanh (GPT-2's) or relu",
        choice(DECODER_FEED_FORWARDS), optional=True, default_text="its preset's", resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    bias: bool | None = setting(
        None, MODEL, "biases in the language model's attention and feed-forward layers (true or false)",
        boolean, optional=True, metavar="{true,false}", default_text="its preset's", resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    init_std: float | None = setting(
        None, MODEL, "draw the language model's kernels and embeddings from N(0, INIT_STD), the kernels "
        "writing into the residual stream scaled by 1/sqrt(2 * num_layers), as GPT-2 (0.02)",
        number(maximum=1.0, above=0.0), optional=True, metavar="INIT_STD",
        default_text="glorot_uniform kernels, N(0, 0.02) embeddings", resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    tokenizer: str = setting(
        "bytes", MODEL, "the language model's tokens: bytes (UTF-8, no "
        "vocabulary), bpe:N (a byte-level BPE of N ids fitted to the training "
        "split and saved in the run), or a tokenizer.json or a directory with "
        "one", tokenizer_spec, metavar="bytes|bpe:N|PATH",
        resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    init_from: str | None = setting(
        None, MODEL, "a Hugging Face checkpoint directory (Llama, Mistral, Qwen2, GPT-2) or a tfnorm "
        "language-model run to start from, with its tokenizer; its config sets the model ("
        f"{setting_key('norm')} may replace its norms, {setting_key('dropout_rate')} its dropout)", hf_checkpoint,
        optional=True, metavar="DIR", resume=FIXED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    norm_position: str = setting(
        "pre", MODEL, "where the norms sit", choice(NORM_POSITIONS), resume=FIXED, scope=CLASSIFIER
    )  # fmt: skip
    pooling: str = setting(
        "mean", MODEL, "token pooling", choice(POOLINGS), resume=FIXED, scope=CLASSIFIER
    )
    dropout_rate: float = setting(
        0.1, MODEL, "dropout in [0, 1)", number(0.0, below=1.0),
        flags=("--dropout-rate", "--dropout"), resume=LOGGED, scope=CLASSIFIER,
    )  # fmt: skip
    epsilon: float | None = setting(
        None, MODEL, "norm epsilon", number(above=0.0),
        optional=True, default_text="the norm's own", resume=LOGGED, scope=CLASSIFIER,
    )  # fmt: skip
    # Optimisation.
    optimizer: str = setting(
        "adamw", OPTIMISATION, "optimizer", choice(OPTIMIZERS), resume=FIXED, scope=ANY_MODEL
    )  # fmt: skip
    learning_rate: float = setting(
        1e-3, OPTIMISATION, "peak learning rate", number(maximum=FLOAT32_MAX, above=0.0),
        resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    warmup_steps: int = setting(
        0, OPTIMISATION, "linear warm-up steps, 0 for none", NON_NEGATIVE,
        resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    decay: str = setting(
        "cosine", OPTIMISATION, "learning-rate decay after warm-up", choice(DECAYS),
        resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    weight_decay: float = setting(
        0.01, OPTIMISATION, "decoupled weight decay of adamw, on the variables "
        f"{setting_key('weight_decay_on')} names", number(0.0), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    min_learning_rate: float = setting(
        0.0, OPTIMISATION, f"the floor the {setting_key('decay')} decays towards "
        f"(cosine and linear end there; at most {setting_key('learning_rate')})",
        number(0.0, FLOAT32_MAX), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    beta1: float = setting(
        0.9, OPTIMISATION, "Adam's decay rate of the gradient mean (adam, adamw)",
        number(0.0, below=1.0), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    beta2: float = setting(
        0.999, OPTIMISATION, "Adam's decay rate of the squared gradient (adam, adamw; language models often use 0.95)",
        number(0.0, below=1.0), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    adam_epsilon: float = setting(
        1e-8, OPTIMISATION, "Adam's stabiliser added to the root of the squared gradient (adam, adamw)",
        number(maximum=FLOAT32_MAX, above=0.0), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    weight_decay_on: str = setting(
        "matrices", OPTIMISATION, f"the variables {setting_key('weight_decay')} shrinks: matrices (dense "
        "kernels and embeddings), kernels (dense kernels only, not embeddings), matrices_and_biases, or all "
        "(the norms' gamma/beta too); norms and biases are skipped unless named",
        choice(DECAY_TARGETS), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    clipnorm: float | None = setting(
        1.0, OPTIMISATION, "global gradient-norm clipping, 'none' or 0 to disable",
        number(maximum=FLOAT32_MAX, above=0.0), optional=True, off=("off", "false", "0", 0, False), resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    epochs: int | None = setting(
        None, OPTIMISATION, f"passes over the data; with {setting_key('max_steps')}, "
        "whichever ends first", POSITIVE, optional=True,
        default_text=f"1, or as many as {setting_key('max_steps')} takes",
        resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    max_steps: int | None = setting(
        None, OPTIMISATION, "the step the run ends at (the learning-rate decay "
        "ends there too)", POSITIVE, optional=True,
        default_text=f"{setting_key('epochs')} passes", resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    steps_per_epoch: int | None = setting(
        None, OPTIMISATION, "steps per epoch", POSITIVE,
        optional=True, default_text="one pass over the training set", resume=LOGGED, scope=ANY_MODEL,
    )  # fmt: skip
    batch_size: int = setting(
        32, OPTIMISATION, "global batch size, split over the replicas",
        integer(1, 2**20), resume=FIXED, scope=ANY_MODEL,
    )  # fmt: skip
    seed: int = setting(
        0, OPTIMISATION, f"seed of the data, weights and order (0..{MAX_SEED})",
        integer(0, MAX_SEED), resume=FIXED, scope=ANY_MODEL,
    )  # fmt: skip
    eval_every: int | None = setting(
        None, OPTIMISATION, "steps between validation evaluations, plus one at step 0 and at the last step",
        POSITIVE, optional=True, default_text="each epoch end and the last step (a language model: step 0 too)",
        resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    eval_batches: int | None = setting(
        None, OPTIMISATION, "estimate the validation loss between evaluations from this many fixed batches "
        "of the held-out text; the evaluation at the last step reads all of it", POSITIVE, optional=True,
        default_text="all of the held-out text", resume=LOGGED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    keep_best: bool = setting(
        False, OUTPUTS, "also keep the checkpoint of the lowest validation loss in CHECKPOINT_DIR/best",
        boolean, flags=("--keep-best",), action="store_true", resume=LOGGED, scope=LANGUAGE_MODEL,
    )  # fmt: skip
    # Runtime.
    strategy: str = setting(
        "auto", RUNTIME, "distribution: auto picks multi_worker from a "
        "multi-worker TF_CONFIG, mirrored for 2+ GPUs, one_device for 1 GPU, "
        "else default", choice(STRATEGIES), resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    devices: list | None = setting(
        None, RUNTIME, f"comma-separated devices for {setting_key('strategy')} "
        "mirrored/one_device (e.g. /gpu:0,/gpu:1)", device_list,
        optional=True, metavar="LIST", default_text="all visible", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    jit_compile: bool = setting(
        False, RUNTIME, "XLA-compile the training step of tfnorm's models "
        "(one replica only)", boolean, flags=("--jit-compile",),
        action="store_true", resume=LOGGED, scope=CLASSIFIER,
    )  # fmt: skip
    mixed_precision: str = setting(
        "float32", RUNTIME, "float16 (with loss scaling) or bfloat16 compute",
        precision, metavar="{" + ",".join(PRECISION_MODES) + "}", resume=FIXED, scope=ANY_MODEL,
    )  # fmt: skip
    # Outputs.
    logdir: str = setting(
        "runs/tfnorm", OUTPUTS, "TensorBoard logs, summary.json and the "
        "exported model; one run at a time (a second run on it is refused, "
        f"even with its own {setting_key('checkpoint_dir')})", creatable("directory"),
        metavar="DIR", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    checkpoint_dir: str | None = setting(
        None, OUTPUTS, "checkpoints; rerunning with the same one resumes",
        creatable("directory"), optional=True, metavar="DIR",
        default_text="LOGDIR/checkpoints", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    checkpoint_every: int = setting(
        100, OUTPUTS, "steps between checkpoints, plus one at the last step",
        POSITIVE, resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    epoch_checkpoints: bool = setting(
        False, OUTPUTS, "also save a checkpoint at each epoch end",
        boolean, flags=("--epoch-checkpoints",), action="store_true", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    keep_checkpoints: int = setting(
        3, OUTPUTS, "checkpoints kept", POSITIVE, resume=FREE, scope=ANY_MODEL
    )
    log_every: int = setting(
        10, OUTPUTS, "steps between progress lines, plus one at the last step",
        POSITIVE, resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    histogram_every: int = setting(
        100, OUTPUTS, "steps between norm histograms in LOGDIR/norms (plus "
        "step 0 and the last step), 0 for none",
        NON_NEGATIVE, resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    log_file: str | None = setting(
        None, OUTPUTS, "also append the progress lines to this file "
        "(line-buffered; not a symbolic link, not a data file)",
        creatable("file"), optional=True, metavar="PATH", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip
    export: bool = setting(
        True, OUTPUTS, "do not export the final model (checkpoints and logs "
        "only)", boolean, flags=("--no-export",), action="store_false", resume=FREE, scope=ANY_MODEL,
    )  # fmt: skip

    SETTING_NOUN = "training setting"

    def _check_given(self):
        checks.check_one_source(self.task, self.data, self.model_fn, self.data_fn)

    def _finish(self, values):
        checks.check_scope(values, type(self))
        check_init_from(values, type(self))
        if values["epochs"] is None and values["max_steps"] is None:
            values["epochs"] = 1
        if values["norm"] is None and values["model_fn"] is None:
            if values["task"] != LANGUAGE_MODEL_TASK:  # its preset's norm
                values["norm"] = "layer"
        check_combinations(values)
        fill_derived_defaults(values)

    def validate(self):
        """The same as `resolve()`, under the name a notebook may look for."""
        return self.resolve()


#: Settings a resumed run must share with its checkpoint: they fix the shapes
#: of the checkpointed variables or the meaning of the saved data position.
RESUME_KEYS = keys_declared(TrainConfig, resume=FIXED)
#: Settings that may change on resume; a change is logged, so a resumed run's
#: log says what it trains with.
CHANGEABLE_KEYS = keys_declared(TrainConfig, resume=LOGGED)
#: Settings of tfnorm's classifier, refused with `model_fn`.
CLASSIFIER_KEYS = keys_declared(TrainConfig, scope=CLASSIFIER)
