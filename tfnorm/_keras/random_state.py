"""The random state of dropout, as checkpointable variables.

A run that resumes after `kill -9` must draw the same dropout masks from the
step it resumes at as an uninterrupted run would. That needs the generators'
state in the checkpoint, and the runtimes keep it differently:

* Keras 3 gives every random layer a `SeedGenerator` whose state is a
  variable listed in `model.variables` (not in `model.weights`), but
  `tf.train.Checkpoint(model=...)` does not save it;
* Keras 2 (TF 2.9, tf_keras) draws dropout masks from stateful random ops
  whose state lives in the op kernels, out of reach of any checkpoint,
  unless `tf.random.Generator` is switched on before the layers are built;
  then each layer holds a generator, which a functional model does not
  track (it tracks only layers with weights).

`checkpointable_random_state()` is entered while a run builds its model;
`random_state_variables(model)` lists the variables to put in the
checkpoint beside the model.
"""

from __future__ import annotations

import contextlib

from tfnorm._keras.runtime import IS_KERAS_3, keras
from tfnorm._keras.surgery import sublayers


@contextlib.contextmanager
def checkpointable_random_state():
    """Layers built inside the block keep their random state in variables.

    Keras 3 always does. Keras 2 does once `tf.random.Generator` is enabled;
    the previous setting is restored on exit, so a notebook's later models
    are built as before.
    """
    if IS_KERAS_3:
        yield
        return
    experimental = keras.backend.experimental
    was_enabled = experimental.is_tf_random_generator_enabled()
    experimental.enable_tf_random_generator()
    try:
        yield
    finally:
        if not was_enabled:
            experimental.disable_tf_random_generator()


def random_state_variables(model):
    """The variables holding `model`'s random state, for a checkpoint.

    Call it under the strategy scope the model was built in.
    """
    if IS_KERAS_3:
        weights = {id(weight) for weight in model.weights}
        return [v for v in model.variables if id(v) not in weights]
    states = []
    # `model.submodules` trips over a compiled Keras 2.9 model's internals.
    for module in [model] + sublayers(model):
        # Keras 2 keeps it private: `BaseRandomLayer._random_generator`, a
        # `backend.RandomGenerator` that creates its `tf.random.Generator`
        # on first use (None unless enabled). Creating it now, under the
        # caller's strategy scope, puts it in the first checkpoint too.
        holder = getattr(module, "_random_generator", None)
        if holder is None or not hasattr(holder, "_maybe_init"):
            continue
        holder._maybe_init()
        generator = getattr(holder, "_generator", None)
        if generator is not None and all(generator.state is not s for s in states):
            states.append(generator.state)
    return states


def random_state_checkpoint(model):
    """A trackable dict of `random_state_variables(model)`, keyed by order."""
    return {str(index): v for index, v in enumerate(random_state_variables(model))}
