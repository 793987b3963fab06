"""The named choices of tfnorm's settings, importable without TensorFlow.

The modules that implement each choice import its tuple from here, and so
does the command line, whose `--help` must answer without loading
TensorFlow (it takes seconds to import).
"""

from __future__ import annotations

from typing import NamedTuple


class NormChoice(NamedTuple):
    """One of tfnorm's norms as the names and help text know it."""

    #: The layer class, in `tfnorm.layers` (and `tfnorm`).
    class_name: str
    #: Other names `get_norm` and `--norm` accept (case-insensitive).
    aliases: tuple
    #: One line for help texts: what the norm divides by.
    summary: str
    #: Whether it divides by a statistic guarded by an `epsilon` (the
    #: class's `has_row_statistic`; DyT has none).
    takes_epsilon: bool = True


#: tfnorm's norms by short name: what `tfnorm.get_norm`, every `norm=`
#: argument and `--norm` take. The class registers under its name with
#: `tfnorm.layers.registry.register_norm`; importing `tfnorm.layers` fails
#: if the two disagree.
NORMS = {
    "layer": NormChoice(
        "LayerNormalization", ("layernorm",), "LayerNorm: centre, divide by the std"
    ),
    "rms": NormChoice("RMSNorm", ("rmsnorm",), "RMSNorm: divide by the RMS"),
    "scale": NormChoice(
        "ScaleNorm", ("scalenorm",), "ScaleNorm: divide by the l2 norm"
    ),
    "dyt": NormChoice(
        "DynamicTanh", ("dynamictanh",), "DyT: a learned tanh, no statistic", False
    ),
}
NORM_NAMES = tuple(NORMS)


def norm_choice(name):
    """The short name of the norm that `name` (a short name or an alias, in
    any case) names, or None."""
    for short, choice in NORMS.items():
        if name.lower() in (short,) + choice.aliases:
            return short
    return None


def norms_help():
    """`"layer (centre, ...), rms (...) or dyt (...)"` for help texts."""
    return spelled_out(f"{name} ({choice.summary})" for name, choice in NORMS.items())


def spelled_out(names, last="or"):
    """`"a, b or c"`: a list of names for a message or help text."""
    names = list(names)
    if len(names) < 2:
        return "".join(names)
    return f"{', '.join(names[:-1])} {last} {names[-1]}"


#: `norm_position` of `TransformerEncoderBlock` and the encoder builders.
NORM_POSITIONS = ("post", "pre", "sandwich", "deepnorm")

#: `pooling` of `SequencePooling` / `build_classifier`.
POOLINGS = ("mean", "cls")

#: Synthetic tasks of `tfnorm.training.data.make_synthetic`.
SYNTHETIC_TASKS = ("sorted", "duplicate", "majority")
#: The task of `tfnorm train` that trains a causal language model on text
#: (`tfnorm.training.workloads.language_model`).
LANGUAGE_MODEL_TASK = "lm"
#: `task` of `tfnorm train`.
TRAIN_TASKS = SYNTHETIC_TASKS + (LANGUAGE_MODEL_TASK,)
#: `preset` of `tfnorm.build_decoder`, with the norm each one uses (what a
#: language-model run without `norm` builds).
DECODER_PRESET_NORMS = {"llama": "rms", "gpt2": "layer"}

#: Tasks of `tfnorm compare` (`tfnorm.experiments.compare_experiment.run_comparison`).
COMPARE_TASKS = ("reverse", "mlm", "lm")
#: Norms `tfnorm compare --norm` also takes, as controls outside the family
#: (`tfnorm.experiments.controls`): `tfnorm train` refuses them.
COMPARE_CONTROL_NORMS = ("batch",)
#: How `tfnorm compare --clipnorm` groups the gradients it clips.
CLIP_GROUPS = ("global", "separate")
#: Where `tfnorm compare`'s norms compute their statistics: float32 (tfnorm's
#: norms) or the compute dtype (a LayerNorm control).
COMPARE_STATISTICS = ("float32", "compute")
#: Units of the `mlm` task (`tfnorm.experiments.tasks.text`).
TEXT_UNITS = ("char", "word")

#: Optimizer names of `tfnorm.training.make_optimizer`.
OPTIMIZERS = ("adamw", "adam", "sgd")

#: Learning-rate decays of `tfnorm.training.WarmupSchedule`.
DECAYS = ("cosine", "linear", "inverse_sqrt", "constant")

#: The decoder's feed-forward networks (`TransformerDecoderBlock`'s
#: `feed_forward`): SwiGLU (LLaMA), exact GELU, GELU's tanh approximation
#: (GPT-2) and ReLU.
DECODER_FEED_FORWARDS = ("swiglu", "gelu", "gelu_tanh", "relu")

#: How `tfnorm train --task lm` cuts its training windows from the text.
WINDOW_ORDERS = ("sequential", "random")

#: What the weight decay of `tfnorm train` shrinks (`tfnorm.optim.decay_patterns`).
DECAY_TARGETS = ("matrices", "kernels", "matrices_and_biases", "all")

#: Distribution strategies of `tfnorm.distribute.get_strategy`.
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker")

#: Precision modes and the Keras dtype policy each one selects.
PRECISION_POLICIES = {
    "float32": "float32",
    "float16": "mixed_float16",
    "bfloat16": "mixed_bfloat16",
}
PRECISION_MODES = tuple(PRECISION_POLICIES)
#: Other spellings accepted for a precision mode: none at all, or the policy names.
PRECISION_ALIASES = {
    None: "float32",
    "none": "float32",
    "off": "float32",
    "mixed_float16": "float16",
    "mixed_bfloat16": "bfloat16",
}
