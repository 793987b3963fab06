"""The one place in tfnorm that knows which Keras it is running on.

`tf.keras` resolves to one of three things, and tfnorm must subclass the same
`Layer` class the user's `tf.keras` gives so that our layers mix with theirs:

* TensorFlow 2.9 to 2.15: Keras 2 (`keras` 2.x, shipped with TensorFlow).
* TensorFlow >= 2.16 with `TF_USE_LEGACY_KERAS=1` and `tf_keras` installed:
  `tf_keras`, which keeps the Keras 2 API.
* TensorFlow >= 2.16 otherwise: Keras 3.

Every other module imports `keras` and the helpers below from here
(`from tfnorm._keras import keras, tf`) instead of testing versions itself.
The helpers are grouped by what they touch: `runtime` (versions, flavour,
save formats), `layers` (building layers: weights, sublayers, attention,
masks), `surgery` (finding sublayers and swapping one layer for another),
`serialization` (registration, portable configs, saving), `optimizers`
(the bases of tfnorm's optimizers: clipping, AdamW, variable paths),
`training` (mixed precision, optimizers and callbacks in custom loops),
`hub` (keras-hub's encoder internals) and `xla`.

No module outside this package reads private Keras attributes, overrides
private Keras methods or tests versions; tests/_keras/test_boundary.py fails
when one does.
"""

from __future__ import annotations

from tfnorm._keras.checkpoint_graph import variables_under as checkpoint_variables_under
from tfnorm._keras.determinism import deterministic_ops, op_determinism_enabled
from tfnorm._keras.einsum import EinsumDense
from tfnorm._keras.hub import hub_encoder_sublayers, hub_encoder_width
from tfnorm._keras.layers import (
    BATCH_NORM_TAKES_MASK,
    add_weight,
    assign_slice,
    attention_projections,
    build_attention,
    build_sublayer,
    built_input_shape,
    call_batch_norm,
    get_keras_mask,
    keep_input_dtype,
    keras_norm_classes,
    keras_rms_normalization,
    keras_weight_dims,
    padding_mask_like,
    plain_axis,
    record_built_shape,
    without_keras_mask,
)
from tfnorm._keras.optimizers import (
    CLIPS_BEFORE_ALL_REDUCE,
    AdamWBase,
    GlobalClipping,
    optimizer_variables,
    rebind_optimizer_variables,
    variable_path,
)
from tfnorm._keras.random_state import (
    checkpointable_random_state,
    random_state_checkpoint,
    random_state_variables,
)
from tfnorm._keras.runtime import (
    FLAVOUR,
    IS_KERAS_3,
    KERAS_VERSION,
    NATIVE_FORMAT,
    SAVE_FORMATS,
    TF_RELEASE,
    Layer,
    describe,
    keras,
    tf,
)
from tfnorm._keras.serialization import (
    model_path,
    portable_layer_config,
    register_model_class,
    register_serializable,
    save_model,
    serialized_class_name,
    single_input_build_config,
)
from tfnorm._keras.shuffles import unseeded_shuffles
from tfnorm._keras.surgery import (
    holders,
    is_functional_subclass,
    is_graph_model,
    rebind_attributes,
    replace_graph_layer,
    replace_sublayer,
    shadow_call,
    sublayers,
    unshadow_call,
)
from tfnorm._keras.training import (
    accept_tensor_logs,
    apply_gradients_and_report,
    build_optimizer,
    checkpointable_optimizer,
    dense_gradients,
    global_norm,
    global_policy_name,
    gradient_scale,
    is_compiled,
    is_loss_scaled,
    loss_scale_optimizer,
    loss_scale_value,
    model_jit_compile,
    reset_step_functions,
    scale_loss,
    set_global_policy,
    unscale_gradients,
)
from tfnorm._keras.xla import (
    in_xla_context,
)

__all__ = [
    "checkpoint_variables_under",
    "AdamWBase",
    "BATCH_NORM_TAKES_MASK",
    "CLIPS_BEFORE_ALL_REDUCE",
    "FLAVOUR",
    "IS_KERAS_3",
    "KERAS_VERSION",
    "NATIVE_FORMAT",
    "SAVE_FORMATS",
    "TF_RELEASE",
    "accept_tensor_logs",
    "add_weight",
    "assign_slice",
    "attention_projections",
    "build_attention",
    "build_optimizer",
    "build_sublayer",
    "built_input_shape",
    "call_batch_norm",
    "checkpointable_optimizer",
    "checkpointable_random_state",
    "describe",
    "EinsumDense",
    "get_keras_mask",
    "GlobalClipping",
    "global_policy_name",
    "apply_gradients_and_report",
    "dense_gradients",
    "global_norm",
    "gradient_scale",
    "holders",
    "hub_encoder_sublayers",
    "hub_encoder_width",
    "in_xla_context",
    "is_compiled",
    "is_functional_subclass",
    "is_graph_model",
    "is_loss_scaled",
    "keep_input_dtype",
    "keras",
    "keras_norm_classes",
    "keras_rms_normalization",
    "keras_weight_dims",
    "Layer",
    "loss_scale_optimizer",
    "loss_scale_value",
    "model_jit_compile",
    "model_path",
    "optimizer_variables",
    "padding_mask_like",
    "plain_axis",
    "portable_layer_config",
    "random_state_checkpoint",
    "random_state_variables",
    "register_model_class",
    "rebind_attributes",
    "rebind_optimizer_variables",
    "record_built_shape",
    "register_serializable",
    "replace_graph_layer",
    "replace_sublayer",
    "reset_step_functions",
    "save_model",
    "scale_loss",
    "serialized_class_name",
    "set_global_policy",
    "shadow_call",
    "single_input_build_config",
    "sublayers",
    "tf",
    "unscale_gradients",
    "unshadow_call",
    "variable_path",
    "without_keras_mask",
    "unseeded_shuffles",
    "deterministic_ops",
    "op_determinism_enabled",
]
