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


def dense_gradients(gradients):
    """`gradients` with every `tf.IndexedSlices` made a dense tensor.

    An embedding's gradient arrives as slices, one row per token of the
    batch, so a token seen twice has two rows. Keras 3's
    `LossScaleOptimizer.check_finite` scatters a finiteness flag per row
    into a table (`ops.isfinite` of slices, `tensor_scatter_nd_update`),
    where the last row of a token overwrites the earlier ones: a NaN row
    followed by a finite one of the same token passes as finite, and the
    step is applied with the NaN (Keras 3.15.1; tf_keras and Keras 2.9
    convert to a dense tensor, which sums the rows, and see it). Dense
    gradients are checked right in every runtime, and their norm is the
    norm of the gradient the optimizer applies.
    """
    return [
        tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
        for g in gradients
    ]


def apply_gradients_and_report(optimizer, gradients, variables):
    """Applies `gradients` and returns what the optimizer did with them.

    `gradients` are what `unscale_gradients` returns (under Keras 3's
    `LossScaleOptimizer` they still carry the loss scale, which the
    optimizer divides out inside `apply_gradients`). Whether the step was
    applied is the optimizer's own decision, read from its state before and
    after: a `LossScaleOptimizer` (either Keras) that applies a step counts
    it (`step_counter` / `dynamic_counter` + 1) or, at the end of a growth
    period, doubles its scale; one that skips resets the counter and halves
    the scale (never below 1 in Keras 2). A plain optimizer applies every
    step and counts it in `iterations`. (Keras 2's wrapper counts a skipped
    step in `iterations` too, so that counter cannot tell.)

    Args:
        optimizer: a Keras optimizer, loss-scaled or not.
        gradients: one gradient (or None) per variable; `tf.IndexedSlices`
            are made dense first (`dense_gradients` says why).
        variables: the variables, in the same order.

    Returns:
        `(applied, norm, unscaled)`: a boolean scalar tensor; the global L2
        norm (float32) of `unscaled`, the gradients as the optimizer applies
        them (without the loss scale; non-finite when the optimizer saw a
        non-finite gradient); and `unscaled` itself (None kept).
    """
    gradients = dense_gradients(gradients)
    scale = gradient_scale(optimizer)
    before = _decision_state(optimizer)
    optimizer.apply_gradients(zip(gradients, variables))
    after = _decision_state(optimizer)
    if len(before) == 1:
        applied = after[0] > before[0]
    else:
        applied = tf.logical_or(
            tf.equal(after[0], before[0] + 1), tf.greater(after[1], before[1])
        )
    unscaled = [
        None if g is None else tf.cast(g, tf.float32) / tf.cast(scale, tf.float32)
        for g in gradients
    ]
    return applied, global_norm(unscaled), unscaled


def loss_scale_value(optimizer):
    """The loss scale `scale_loss` multiplies by now, as a float32 tensor
    (1 for an optimizer without loss scaling). Keras 3's
    `LossScaleOptimizer` keeps it in `dynamic_scale`, Keras 2's in
    `loss_scale`."""
    if not is_loss_scaled(optimizer):
        return tf.constant(1.0)
    value = optimizer.dynamic_scale if IS_KERAS_3 else optimizer.loss_scale
    return tf.cast(_read(value), tf.float32)


def _decision_state(optimizer):
    """`(counter, scale)` of a loss-scaled optimizer, `(iterations,)` of
    another, read as tensors at this point of the step."""
    if not is_loss_scaled(optimizer):
        return (_read(optimizer.iterations),)
    if IS_KERAS_3:
        return _read(optimizer.step_counter), _read(optimizer.dynamic_scale)
    return _read(optimizer.dynamic_counter), _read(optimizer.loss_scale)


def _read(value):
    # A copy now: the variable changes inside `apply_gradients`.
    return tf.identity(tf.convert_to_tensor(value))


def global_norm(tensors):
    """The L2 norm of all `tensors` together (None skipped), in float32,
    without overflowing: finite values whose squares pass float32's range
    (|g| above ~1e19) give their finite norm, not Inf; a non-finite value
    gives Inf or NaN as `tf.linalg.global_norm` does."""
    tensors = [tf.cast(t, tf.float32) for t in tensors if t is not None]
    if not tensors:
        return tf.constant(0.0)
    plain = tf.linalg.global_norm(tensors)
    all_finite = tf.reduce_all(
        tf.stack([tf.reduce_all(tf.math.is_finite(t)) for t in tensors])
    )
    # Only finite values whose squares overflowed: divide by the largest.
    largest = tf.reduce_max(tf.stack([tf.reduce_max(tf.abs(t)) for t in tensors]))
    divisor = tf.where(largest > 0, largest, 1.0)
    rescaled = divisor * tf.linalg.global_norm([t / divisor for t in tensors])
    return tf.where(all_finite & ~tf.math.is_finite(plain), rescaled, plain)
