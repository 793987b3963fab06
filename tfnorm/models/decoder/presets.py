"""The decoder presets: the architecture each `preset` of `build_decoder`
selects. A new preset is one entry here (and its norm in
`tfnorm.choices.DECODER_PRESET_NORMS`, which the CLI reads without
TensorFlow; a test keeps the two equal)."""

from __future__ import annotations

#: The architecture each `preset` of `build_decoder` selects.
DECODER_PRESETS = {
    "llama": {
        "norm": "rms",
        "epsilon": 1e-6,
        "norm_position": "pre",
        "position_embedding": "rotary",
        "rope_max_wavelength": 10000.0,
        "feed_forward": "swiglu",
        "use_bias": False,
        "tie_embeddings": False,
        "final_norm": None,
        "dropout_rate": 0.0,
    },
    "gpt2": {
        "norm": "layer",
        "epsilon": 1e-5,
        "norm_position": "pre",
        "position_embedding": "learned",
        "rope_max_wavelength": 10000.0,
        "feed_forward": "gelu_tanh",
        "use_bias": True,
        "tie_embeddings": True,
        "final_norm": None,
        "dropout_rate": 0.1,
    },
}
