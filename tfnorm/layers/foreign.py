"""Norm layers tfnorm did not write: keras-hub's own RMS norms, recognised by class.

keras-hub gives most of its models their own RMS norm class (Llama's
`LlamaLayerNorm`, Gemma's `RMSNormalization`, T5's `T5LayerNorm`, ...), each a
plain `keras.layers.Layer` with an `epsilon` and one scale weight over the last
axis. They are recognised here by module and class name, so keras-hub is never
imported (it need not be installed). What a recognised layer computes is
written down per class below; `replace_norms` also checks it numerically
before it swaps one, so a class whose formula changes upstream is refused, not
silently converted.
"""

from __future__ import annotations

import collections
import re

#: What a recognised norm computes. `kind` is `"rms"` (y = x / rms(x) * scale
#: over the last axis); `zero_centered` means the scale is `1 + w` (Gemma);
#: `weight` is the attribute holding `w`; `epsilon` the attribute holding
#: epsilon, or a number when the class hard-codes it.
ForeignNorm = collections.namedtuple(
    "ForeignNorm", ["kind", "zero_centered", "weight", "epsilon"]
)

_RMS = ForeignNorm("rms", False, "scale", "epsilon")

#: keras-hub's norm classes by (module prefix, class name), read from
#: keras-hub 0.32's sources.
_KERAS_HUB_NORMS = {
    ("keras_hub.src.models.llama.", "LlamaLayerNorm"): _RMS,
    ("keras_hub.src.models.mistral.", "MistralLayerNormalization"): _RMS,
    ("keras_hub.src.models.mixtral.", "MixtralLayerNormalization"): _RMS,
    ("keras_hub.src.models.qwen.", "QwenLayerNorm"): _RMS,
    ("keras_hub.src.models.qwen_moe.", "QwenMoeLayerNorm"): _RMS,
    ("keras_hub.src.models.qwen3.", "Qwen3LayerNorm"): _RMS,
    ("keras_hub.src.models.qwen3_moe.", "Qwen3MoeLayerNorm"): _RMS,
    ("keras_hub.src.models.phi3.", "Phi3LayerNorm"): _RMS,
    ("keras_hub.src.models.gpt_oss.", "GptOssLayerNormalization"): _RMS,
    ("keras_hub.src.models.t5.", "T5LayerNorm"): ForeignNorm(
        "rms", False, "weight", "epsilon"
    ),
    ("keras_hub.src.models.gemma.", "RMSNormalization"): ForeignNorm(
        "rms", True, "scale", "epsilon"
    ),
    ("keras_hub.src.models.gemma3.", "RMSNormalization"): ForeignNorm(
        "rms", True, "scale", "epsilon"
    ),
    ("keras_hub.src.layers.modeling.rms_normalization", "RMSNormalization"): (
        ForeignNorm("rms", False, "scale", 1e-6)
    ),
}

# Other layers whose class name says "RMS norm" and which hold an epsilon
# and one scale weight: found for monitoring, converted only if the numeric
# check agrees with y = x / rms(x) * scale.
_RMS_NAME = re.compile(r"rms_?norm", re.IGNORECASE)


def foreign_norm(layer):
    """What the norm layer `layer` computes, if tfnorm recognises its class.

    Returns a `ForeignNorm` for keras-hub's RMS norm classes (and, by duck
    typing, for other layers named like an RMS norm that hold a float
    `epsilon` and a `scale` weight), None for anything else, including
    Keras's and tfnorm's own norms.
    """
    cls = type(layer)
    module = cls.__module__
    for (prefix, name), spec in _KERAS_HUB_NORMS.items():
        if cls.__name__ == name and module.startswith(prefix):
            return spec
    if module.startswith(("keras.", "tf_keras.", "tfnorm.")):
        return None
    if _RMS_NAME.search(cls.__name__) and isinstance(
        getattr(layer, "epsilon", None), float
    ):
        if getattr(layer, "scale", None) is not None and hasattr(layer.scale, "shape"):
            return _RMS
    return None


def foreign_epsilon(layer, spec):
    """The epsilon of a recognised foreign norm `layer` (its attribute, or
    the constant its class hard-codes)."""
    if isinstance(spec.epsilon, str):
        return float(getattr(layer, spec.epsilon))
    return float(spec.epsilon)
