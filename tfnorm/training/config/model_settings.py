"""`ModelSettings`: the declared settings of the model tfnorm builds, the
classifier's or the language model's (part of `TrainConfig`).

No TensorFlow at import time: `--help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm._errors import setting_key
from tfnorm.choices import (
    DECODER_FEED_FORWARDS,
    DECODER_PRESET_NORMS,
    NORM_POSITIONS,
    POOLINGS,
    norms_help,
)
from tfnorm.settings.readers import (
    boolean,
    choice,
    number,
)
from tfnorm.settings.setting import FIXED, LOGGED, setting
from tfnorm.training.config.readers import (
    hf_checkpoint,
    norm_spec,
    tokenizer_spec,
)
from tfnorm.training.config.train_defaults import (
    DEFAULT_DROPOUT_RATE,
    MODEL,
    sized,
)
from tfnorm.training.config.workload_scope import (
    CLASSIFIER,
    LANGUAGE_MODEL,
    TFNORM_MODELS,
)


@dataclasses.dataclass
class ModelSettings:
    """The model settings of `TrainConfig` (see `tfnorm train --help`)."""

    # Model.
    num_layers: int = setting(
        2, MODEL, "encoder blocks (decoder blocks of a language model)", sized("num_layers"),
        resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    d_model: int = setting(
        64, MODEL, "width", sized("d_model"), resume=FIXED, workloads=TFNORM_MODELS
    )
    num_heads: int = setting(
        4, MODEL, f"attention heads, must divide {setting_key('d_model')}", sized("num_heads"),
        resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    dff: int | None = setting(
        None, MODEL, "feed-forward width", sized("dff"),
        optional=True, default_text="4 * d_model", resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    norm: str | None = setting(
        None, MODEL, f"normalisation: {norms_help()}", norm_spec, optional=True,
        default_text="layer; a language model: its preset's", resume=FIXED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    preset: str = setting(
        "llama", MODEL, "the language model's architecture: llama (RMSNorm, "
        "rotary positions, SwiGLU, no biases) or gpt2 (LayerNorm, learned "
        "positions, GELU, biases, head tied to the embedding); the model "
        "settings given override it", choice(tuple(DECODER_PRESET_NORMS)),
        resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    feed_forward: str | None = setting(
        None, MODEL, "the language model's feed-forward network: swiglu (gated, SiLU), gelu, gelu_tanh (GPT-2's) or relu",
        choice(DECODER_FEED_FORWARDS), optional=True, default_text="its preset's", resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    bias: bool | None = setting(
        None, MODEL, "biases in the language model's attention and feed-forward layers (true or false)",
        boolean, optional=True, metavar="{true,false}", default_text="its preset's", resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    init_std: float | None = setting(
        None, MODEL, "draw the language model's kernels and embeddings from N(0, INIT_STD), the kernels "
        "writing into the residual stream scaled by 1/sqrt(2 * num_layers), as GPT-2 (0.02)",
        number(maximum=1.0, above=0.0), optional=True, metavar="INIT_STD",
        default_text="glorot_uniform kernels, N(0, 0.02) embeddings", resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    tokenizer: str = setting(
        "bytes", MODEL, "the language model's tokens: bytes (UTF-8, no "
        "vocabulary), bpe:N (a byte-level BPE of N ids fitted to the training "
        "split and saved in the run), or a tokenizer.json or a directory with "
        "one", tokenizer_spec, metavar="bytes|bpe:N|PATH",
        resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    init_from: str | None = setting(
        None, MODEL, "a Hugging Face checkpoint directory (Llama, Mistral, Qwen2, "
        "GPT-2) or a tfnorm language-model run to start from, with its "
        f"tokenizer; its config sets the model ({setting_key('norm')} may "
        f"replace its norms, {setting_key('dropout_rate')} its dropout)", hf_checkpoint,
        optional=True, metavar="DIR", resume=FIXED, workloads=(LANGUAGE_MODEL,),
    )  # fmt: skip
    norm_position: str = setting(
        "pre", MODEL, "where the norms sit", choice(NORM_POSITIONS), resume=FIXED, workloads=TFNORM_MODELS
    )  # fmt: skip
    pooling: str = setting(
        "mean",
        MODEL,
        "token pooling",
        choice(POOLINGS),
        resume=FIXED,
        workloads=(CLASSIFIER,),
    )
    dropout_rate: float | None = setting(
        None, MODEL, "dropout in [0, 1)", number(0.0, below=1.0), optional=True,
        default_text=f"{DEFAULT_DROPOUT_RATE}; with {setting_key('init_from')}: the checkpoint's (a run's own)",
        flags=("--dropout-rate", "--dropout"), resume=LOGGED, workloads=TFNORM_MODELS,
    )  # fmt: skip
    epsilon: float | None = setting(
        None, MODEL, "norm epsilon", number(above=0.0),
        optional=True, default_text="the norm's own", resume=LOGGED, workloads=TFNORM_MODELS,
    )  # fmt: skip
