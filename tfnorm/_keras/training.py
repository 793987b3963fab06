"""Mixed precision, optimizers and callbacks in custom training loops."""

from __future__ import annotations

from tfnorm._keras.runtime import IS_KERAS_3, keras, tf


def accept_tensor_logs(callback):
    """Lets Keras 2 pass `callback` batch logs as tensors.

    Keras 2 converts the logs of every batch to NumPy, waiting for the
    device, unless all callbacks declare they take tensors; Keras 3 never
    converts them.
    """
    if not IS_KERAS_3:
        callback._supports_tf_logs = True


def set_global_policy(name):
    """Sets the global mixed-precision policy (e.g. "mixed_float16")."""
    keras.mixed_precision.set_global_policy(name)


def global_policy_name() -> str:
    return keras.mixed_precision.global_policy().name


def loss_scale_optimizer(optimizer):
    """Wraps `optimizer` in dynamic loss scaling (needed for float16 training)."""
    if IS_KERAS_3:
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return keras.mixed_precision.LossScaleOptimizer(optimizer)


def is_loss_scaled(optimizer):
    """Whether `optimizer` already applies loss scaling.

    Both Keras generations call the wrapped optimizer `inner_optimizer`.
    """
    return hasattr(optimizer, "inner_optimizer")


def scale_loss(optimizer, loss):
    """`loss` multiplied by `optimizer`'s loss scale (unchanged without one).

    For custom training loops: Keras 3 calls it `scale_loss`, Keras 2
    `get_scaled_loss` (only on a LossScaleOptimizer).
    """
    if IS_KERAS_3:
        return optimizer.scale_loss(loss)
    if hasattr(optimizer, "get_scaled_loss"):
        return optimizer.get_scaled_loss(loss)
    return loss


def unscale_gradients(optimizer, gradients):
    """Gradients of a scaled loss divided back by the loss scale.

    Keras 3's LossScaleOptimizer unscales inside `apply_gradients`; Keras 2's
    expects the loop to call `get_unscaled_gradients` first.
    """
    if not IS_KERAS_3 and hasattr(optimizer, "get_unscaled_gradients"):
        return optimizer.get_unscaled_gradients(gradients)
    return gradients


def build_optimizer(optimizer, variables):
    """Creates `optimizer`'s slot variables for `variables` without a step.

    A checkpoint restored before the slots exist would otherwise leave the
    optimizer state behind in some runtimes. Keras 3 and tf_keras optimizers
    have `build(var_list)`; Keras 2.9's OptimizerV2 `_create_all_weights`.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    if hasattr(optimizer, "build"):
        optimizer.build(list(variables))
    elif hasattr(optimizer, "_create_all_weights"):
        optimizer._create_all_weights(list(variables))
    elif inner is not None:
        build_optimizer(inner, variables)


def checkpointable_optimizer(optimizer):
    """What `tf.train.Checkpoint(optimizer=...)` can track for `optimizer`.

    Keras 2 and Keras >= 3.1 optimizers are trackable objects themselves.
    Keras 3.0's are not (TensorFlow 2.16's images ship Keras 3.0.5), so their
    variables (iterations, learning rate, slots, loss scale) are handed over
    in a module instead; `build_optimizer` must have created them first.
    """
    if isinstance(optimizer, tf.__internal__.tracking.Trackable):
        return optimizer
    state = tf.Module(name="optimizer_state")
    state.variables_in_order = list(optimizer.variables)
    return state


def is_compiled(model):
    """Whether `model.compile(...)` was called (Keras 3 says so publicly)."""
    if IS_KERAS_3:
        return bool(getattr(model, "compiled", False))
    return bool(getattr(model, "_is_compiled", False)) and model.optimizer is not None


def model_jit_compile(model):
    """Whether `fit` would run `model`'s train step under XLA.

    Keras 3 resolves its default ("auto") to XLA where a GPU is visible;
    Keras 2 compiles only when asked.
    """
    return bool(getattr(model, "jit_compile", False))


def reset_step_functions(model):
    """Drops `model`'s traced train, test and predict steps, so the next
    `fit`/`evaluate`/`predict` traces them again over the model's current
    variables (a traced step keeps the variables it was traced with)."""
    for name in ("train_function", "test_function", "predict_function"):
        if getattr(model, name, None) is not None:
            setattr(model, name, None)


def gradient_scale(optimizer):
    """The factor the gradients `unscale_gradients` returns still carry.

    Keras 3's `LossScaleOptimizer` unscales inside `apply_gradients`, so
    the loop's gradients carry the loss scale; Keras 2's loop unscales
    them itself. A loop reporting the gradients' size divides by this.
    """
    if IS_KERAS_3 and is_loss_scaled(optimizer):
        return optimizer.scale_loss(tf.constant(1.0))
    return tf.constant(1.0)


def checkpoint_object_graph(prefix):
    """The object graph (`TrackableObjectGraph` proto) stored in the
    checkpoint `prefix`: which object holds which, and which hold values.

    TensorFlow has no public reader for it, only the proto class under
    `tensorflow.core`, which every supported release ships.
    """
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    reader = tf.train.load_checkpoint(prefix)
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return graph
