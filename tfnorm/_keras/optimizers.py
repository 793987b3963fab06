"""Optimizer machinery that differs between Keras generations.

tfnorm's optimizers (`tfnorm.optim.optimizers`) subclass the bases here:
`GlobalClipping` makes clipping act on the all-reduced gradient in every
Keras, and `AdamWBase` is Keras's AdamW where it has one and an Adam with
decoupled weight decay where it has not (Keras 2.9). Both AdamW bases decay
only the variables their subclass's `decays_variable(variable)` accepts.
"""

from __future__ import annotations

import re

from tfnorm._keras.runtime import IS_KERAS_3, keras, tf


def variable_path(variable) -> str:
    """A variable's scoped name without ":0" or a replica suffix.

    Keras 3 keeps the layer path in `variable.path` ("block/ln_1/gamma");
    Keras 2 in the name ("block/ln_1/gamma:0", or ".../gamma/replica_1:0" for
    a MirroredStrategy component).
    """
    path = getattr(variable, "path", None) or variable.name
    path = re.sub(r":\d+$", "", str(path))
    return re.sub(r"/replica_\d+$", "", path)


def optimizer_variables(optimizer):
    """`optimizer`'s variables as a list (Keras 2 has a method, Keras 3 a property)."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


#: Keras 3's optimizers clip gradients (clipnorm/global_clipnorm/clipvalue)
#: inside each replica *before* the cross-replica all-reduce, so under
#: MirroredStrategy they clip each replica's partial gradient instead of the
#: global one. Keras 2 and tf_keras aggregate first. `GlobalClipping`
#: corrects for it where this is True.
CLIPS_BEFORE_ALL_REDUCE = IS_KERAS_3


class _ClipAfterAllReduce:
    """Makes Keras 3 clip the all-reduced gradient, not each replica's share.

    Keras 3 clips inside each replica before summing the replicas' gradients,
    so under MirroredStrategy `global_clipnorm` bounds every partial gradient
    rather than the global one and the trajectory differs from one device.
    Here the gradients are all-reduced first, clipped, then divided by the
    replica count, so Keras's own all-reduce that follows restores the clipped
    sum exactly.
    """

    def _clip_gradients(self, grads):
        context = tf.distribute.get_replica_context()
        clips = self.clipnorm or self.global_clipnorm or self.clipvalue
        if not clips or context is None or context.num_replicas_in_sync == 1:
            return super()._clip_gradients(grads)
        present = [g for g in grads if g is not None]
        summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present))
        grads = [None if g is None else next(summed) for g in grads]
        replicas = float(context.num_replicas_in_sync)
        return [
            None if g is None else g / replicas for g in super()._clip_gradients(grads)
        ]


class _AggregatesBeforeClipping:
    """Keras 2 and tf_keras all-reduce before clipping: nothing to correct."""


#: Mixin, before the Keras optimizer in the bases: clipping acts on the
#: global (all-reduced) gradient in every Keras.
GlobalClipping = (
    _ClipAfterAllReduce if CLIPS_BEFORE_ALL_REDUCE else _AggregatesBeforeClipping
)

# Keras 3 and tf_keras ship AdamW with a per-variable exclusion list; Keras 2.9
# has none (only Adam), so there the decoupled decay is added to Adam below.
_CoreAdamW = getattr(keras.optimizers, "AdamW", None)


if _CoreAdamW is not None:

    class _KerasAdamW(GlobalClipping, _CoreAdamW):
        """Keras's AdamW, skipping the variables `decays_variable` rejects."""

        def build(self, var_list):
            if not (getattr(self, "_built", False) or getattr(self, "built", False)):
                skipped = [v for v in var_list if not self.decays_variable(v)]
                # The public hook of Keras's AdamW; it must run before build.
                _CoreAdamW.exclude_from_weight_decay(self, var_list=skipped)
            super().build(var_list)


class _AdamWBackport(keras.optimizers.Adam):
    """Adam with decoupled weight decay, for Keras versions without AdamW.

    Before each Adam update the variable is shrunk as Keras's AdamW does,
    `var -= learning_rate * weight_decay * var`, except for the variables
    `decays_variable` rejects. Written against OptimizerV2's hyperparameter
    and per-variable update hooks, which only Keras 2 has.
    """

    def __init__(
        self,
        learning_rate=0.001,
        weight_decay=0.004,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-7,
        amsgrad=False,
        name="AdamW",
        **kwargs,
    ):
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            amsgrad=amsgrad,
            name=name,
            **kwargs,
        )
        self._set_hyper("weight_decay", weight_decay)

    @property
    def weight_decay(self):
        return self._get_hyper("weight_decay")

    def _decay(self, var, apply_state):
        if not self.decays_variable(var):
            return []
        var_device, var_dtype = var.device, var.dtype.base_dtype
        coefficients = (apply_state or {}).get(
            (var_device, var_dtype)
        ) or self._fallback_apply_state(var_device, var_dtype)
        weight_decay = self._get_hyper("weight_decay", var_dtype)
        return [var.assign_sub(var * weight_decay * coefficients["lr_t"])]

    def _resource_apply_dense(self, grad, var, apply_state=None):
        with tf.control_dependencies(self._decay(var, apply_state)):
            return super()._resource_apply_dense(grad, var, apply_state)

    def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
        with tf.control_dependencies(self._decay(var, apply_state)):
            return super()._resource_apply_sparse(grad, var, indices, apply_state)

    def get_config(self):
        config = super().get_config()
        config["weight_decay"] = self._serialize_hyperparameter("weight_decay")
        return config


#: Base of tfnorm's AdamW; its subclass provides `decays_variable(variable)`.
AdamWBase = _KerasAdamW if _CoreAdamW is not None else _AdamWBackport


def rebind_optimizer_variables(optimizer, pairs):
    """Makes `optimizer` update each `new` variable of `pairs` (old, new)
    where it updated `old`, with `old`'s slots (moments, accumulators).

    Every optimizer files its state under a key of the model variable:
    Keras 3 an index by `_var_key` (and the variable list it was built
    with), tf_keras's optimizers an `_index_dict`, Keras 2's OptimizerV2 a
    `_slots` dict. A loss-scale wrapper's inner optimizer is rebound too.
    Returns the number of variables rebound.
    """
    inner = getattr(optimizer, "inner_optimizer", None)
    rebound = 0 if inner is None else rebind_optimizer_variables(inner, pairs)
    for old, new in pairs:
        rebound += _rebind_one(optimizer, old, new)
    return rebound


def _rebind_one(optimizer, old, new):
    indices = getattr(optimizer, "_trainable_variables_indices", None)
    if IS_KERAS_3 and isinstance(indices, dict):
        old_key, new_key = optimizer._var_key(old), optimizer._var_key(new)
        if old_key not in indices:
            return 0
        index = indices.pop(old_key)
        indices[new_key] = index
        optimizer._trainable_variables[index] = new
        excluded = getattr(optimizer, "_exclude_from_weight_decay", None)
        if isinstance(excluded, set) and old_key in excluded:
            excluded.discard(old_key)
            excluded.add(new_key)
        getattr(optimizer, "_exclude_from_weight_decay_cache", {}).clear()
        return 1
    index_dict = getattr(optimizer, "_index_dict", None)
    if isinstance(index_dict, dict):
        old_key, new_key = optimizer._var_key(old), optimizer._var_key(new)
        if old_key not in index_dict:
            return 0
        index_dict[new_key] = index_dict.pop(old_key)
        excluded = getattr(optimizer, "_exclude_from_weight_decay", None)
        if isinstance(excluded, list):
            excluded[:] = [new_key if key == old_key else key for key in excluded]
        return 1
    slots = getattr(optimizer, "_slots", None)
    if isinstance(slots, dict):
        old_key, new_key = _slot_key(old), _slot_key(new)
        if old_key not in slots:
            return 0
        slots[new_key] = slots.pop(old_key)
        return 1
    return 0


def _slot_key(variable):
    # The key Keras 2's OptimizerV2 files a variable's slots under.
    if hasattr(variable, "_distributed_container"):
        variable = variable._distributed_container()
    return variable._unique_id
