"""The workload of `tfnorm train --model-fn ... --data-fn ...`: the user's model.

`model_fn()` returns a Keras model (functional, Sequential or subclassed); it
is called under the run's distribution strategy scope and dtype policy. A
compiled model keeps its optimizer, loss and metrics; an uncompiled one is
compiled with the run's optimizer settings (learning rate, warm-up, AdamW
without decay on norms and biases, clipping) and the loss the run names.

`data_fn()` returns the training data, or `(train, validation)`, or a dict
with `"train"` and `"validation"`; each part is a `tf.data.Dataset` of
`(x, y)` or `(x, y, sample_weight)` batches, or a tuple of NumPy arrays
`(x, y)` / `(x, y, sample_weight)` (`x` may be a dict or list of arrays).

Exact resume after `kill -9`: arrays are batched by the run in an order
fixed by `--seed` (the checkpoint keeps the position); a dataset's iterator
is saved in every checkpoint (so a shuffle buffer is saved too: keep it
modest), and the dataset itself must be deterministic (seeded shuffles: a
shuffle without a seed is warned about at start, see `_keras.shuffles`).
A dataset that runs Python code (`Dataset.from_generator`) has a position
TensorFlow cannot save: its checkpoints leave it out, a warning says so,
and a resume starts its data over.
The dropout generators' state is saved with the model.

The training step is the model's own `train_step` (so a model that
overrides it trains as under `fit`); the logs are the model's metrics.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tfnorm import _keras
from tfnorm._errors import one_line, setting_key
from tfnorm._keras import keras, tf
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.data import DataError
from tfnorm.training.data.user_data import (
    ArrayData,
    DatasetData,
    describe_shapes,
    split_user_data,
)
from tfnorm.training.rundir import export, run_identity
from tfnorm.training.workloads import label_checks, steps, user_code
from tfnorm.training.workloads.base import Workload
from tfnorm.training.workloads.build import (
    assemble,
    prepare_runtime,
    run_optimizer,
    run_schedule,
)
from tfnorm.training.workloads.weight_records import (
    model_signature,
    weight_difference,
    weight_entries,
)

UNSAVED_ITERATOR = (
    "warning: data_fn's training dataset runs Python code "
    "(Dataset.from_generator or py_function), whose position TensorFlow cannot "
    "save: checkpoints leave it out, so a resume starts the data over from its "
    "beginning and does not continue exactly"
)

#: Examples of a batch the norm probes (NaN guard, histograms) look at.
PROBE_EXAMPLES = 64


class OwnModelWorkload(Workload):
    """The user's `model_fn` model trained on the user's `data_fn` data."""

    def __init__(self, config, log, model_fn=None, data_fn=None):
        super().__init__(config, log)
        self.model_spec = config.model_fn or user_code.describe(model_fn)
        self.data_spec = config.data_fn or user_code.describe(data_fn)
        self.model_fn = model_fn or user_code.load_function("model_fn", config.model_fn)
        self.data_fn = data_fn or user_code.load_function("data_fn", config.data_fn)
        self.saved = None
        self.data_sha256 = self.signature = self.weight_count = None
        self.weights = self.compiled_by_user = self.last_nonfinite = None

    @property
    def source(self):
        return self.data_spec

    def load(self, saved, has_checkpoint):
        """Calls `data_fn`; checks the data's form (not yet against the model)."""
        result = user_code.call("data_fn", self.data_spec, self.data_fn)
        self.train, self.val = split_user_data(result)
        if isinstance(self.train, ArrayData):
            self.data_sha256 = self.train.sha256()
        elif _keras.unseeded_shuffles(self.train.dataset):
            self.log.line(
                "warning: data_fn's training dataset shuffles without a seed, so "
                "a resumed run trains on other batches than an uninterrupted one "
                "would; give each shuffle a seed (shuffle(n, seed=1))"
            )
        if has_checkpoint:
            self.saved = saved
            run_identity.check_same_run(self.config, saved, self.data_sha256, self.log)
        self.data_summary = {
            "source": self.data_spec,
            "train": self.train.describe(),
            "validation": self.val.describe() if self.val is not None else None,
            "sha256": self.data_sha256,
        }

    def __len__(self):
        return len(self.train) if isinstance(self.train, ArrayData) else 0

    def steps_per_epoch(self, batch_size):
        if isinstance(self.train, ArrayData):
            return math.ceil(len(self.train) / batch_size)
        if self.train.batches > 0:
            return self.train.batches
        raise ConfigError(
            "steps_per_epoch",
            "data_fn's training dataset has no known length (it repeats, or "
            "tf.data cannot count it, as for Dataset.from_generator or after "
            "filter()): give "
            f"{setting_key('steps_per_epoch')}. "
            f"Received: steps_per_epoch={self.config.steps_per_epoch!r}",
        )

    # ------------------------------------------------------------------ build

    def build(self, total_steps):
        config = self.config
        strategy, policy = prepare_runtime(config)
        probe = self._probe_batch()
        self.probe_batch = probe[0]
        with strategy.scope(), _keras.checkpointable_random_state():
            model = self._call_model_fn()
            _run(model, probe, "data_fn's batches cannot be fed to model_fn's model")
            schedule = None
            self.compiled_by_user = _keras.is_compiled(model)
            if not self.compiled_by_user:
                schedule = self._compile(model, total_steps)
            self._check_loss(model, strategy, probe)
            self._check_labels(model, strategy)
            self._check_signature(model)
            optimizer = model.optimizer
            _keras.build_optimizer(optimizer, model.trainable_variables)
            iterator = saved_iterator = None
            if isinstance(self.train, DatasetData):
                # A plain iterator: TensorFlow can checkpoint it, not a
                # distributed one; batches are split over replicas instead.
                iterator, can_save = self.train.iterator()
                saved_iterator = iterator if can_save else None
                if not can_save:
                    self.log.line(UNSAVED_ITERATOR)
            setup = assemble(
                strategy, policy, model, schedule, optimizer, saved_iterator
            )
            return dataclasses.replace(setup, data_iterator=iterator)

    def _call_model_fn(self):
        model = user_code.call("model_fn", self.model_spec, self.model_fn)
        if not isinstance(model, keras.Model):
            raise ConfigError(
                "model_fn",
                f"model_fn {self.model_spec} returned {type(model).__name__}, not "
                f"a Keras model of this runtime ({_runtime_name()}: build it "
                "with tf.keras). "
                f"Received: model_fn={self.model_spec!r}",
            )
        return model

    def _compile(self, model, total_steps):
        config = self.config
        if config.loss is None:
            raise ConfigError(
                "loss",
                f"model_fn {self.model_spec} returned a model that is not "
                f"compiled: compile it in model_fn, or name its loss ({setting_key('loss')}, "
                "e.g. sparse_categorical_crossentropy). Received: loss=None",
            )
        schedule = run_schedule(config, total_steps)
        loss = _loss(config.loss, config.from_logits)
        metrics = ["accuracy"] if "categorical" in config.loss.lower() else []
        model.compile(
            optimizer=run_optimizer(config, model, schedule), loss=loss, metrics=metrics
        )
        return schedule

    def _check_loss(self, model, strategy, probe):
        """One evaluation step on the probe batch: labels that do not fit the
        model's outputs fail here, naming data_fn, before anything is saved."""
        _run(
            model,
            probe,
            "data_fn's labels do not fit model_fn's outputs and loss",
            lambda: strategy.run(model.test_step, args=(probe,)),
        )
        model.reset_metrics()

    def _check_labels(self, model, strategy):
        """Every NumPy label and a dataset's first batch, before step 0 (see
        `label_checks`)."""

        def evaluate(batch):
            strategy.run(model.test_step, args=(batch,))

        for data, role in ((self.train, "training"), (self.val, "validation")):
            if isinstance(data, ArrayData):
                indices = np.asarray(label_checks.extreme_examples(data.parts))
                if not indices.size:
                    continue
                batch = tf.nest.map_structure(tf.convert_to_tensor, data.take(indices))
                label_checks.check_batch(evaluate, batch, role, data.parts[1])
            elif isinstance(data, DatasetData):
                for batch in data.dataset.take(1):  # none if it is empty
                    label_checks.check_batch(evaluate, tuple(batch), role)
        model.reset_metrics()

    def _check_signature(self, model):
        self.weights = weight_entries(model)
        self.signature = model_signature(model)
        self.weight_count = len(model.weights)
        saved = (self.saved or {}).get(run_identity.IDENTITY_KEY) or {}
        before = saved.get("model_signature")
        if before and before != self.signature:
            raise ConfigError(
                "model_fn",
                f"the model model_fn {self.model_spec} builds now has other "
                f"weights ({weight_difference(self.weights, saved)}) than the "
                "one the checkpoints in "
                f"{self.config.checkpoint_dir} were made with; nothing was "
                "restored. Restore the code, or start over with another "
                f"{setting_key('checkpoint_dir')}. Received: model_fn={self.model_spec!r}",
            )

    def _probe_batch(self):
        if isinstance(self.train, ArrayData):
            count = min(len(self.train), PROBE_EXAMPLES)
            # Tensors: Keras 2.9's `test_step` reads `.shape.rank`.
            return tf.nest.map_structure(
                tf.convert_to_tensor, self.train.take(np.arange(count))
            )
        batch = self.train.first_batch()
        return tf.nest.map_structure(lambda t: t[:PROBE_EXAMPLES], tuple(batch))

    # ------------------------------------------------------------------ run

    def identity(self):
        return {
            "data_sha256": self.data_sha256,
            "model_signature": self.signature,
            "model_weights": self.weight_count,
            "model_weight_shapes": self.weights,
        }

    def write_files(self, paths):
        """Nothing beside the checkpoints: the user's code is the model's recipe."""

    def step_fn(self, setup):
        train_step = steps.make_model_train_step(setup.model, setup.strategy)

        def on_nonfinite(mask):
            self.last_nonfinite = mask

        if setup.data_iterator is not None:
            step_fn = steps.dataset_step_fn(setup, train_step, on_nonfinite)
        else:
            config = self.config
            step_fn = steps.array_step_fn(
                setup,
                train_step,
                self.train,
                config.batch_size,
                config.seed,
                on_nonfinite,
            )
        return label_checks.guarded_step(step_fn, self.log, setup.step)

    def explain_nan(self, step, norm_report):
        """The batch's own NaN/Inf when it has some, else what applies to
        the user's model (never tfnorm's classifier settings)."""
        parts = steps.nonfinite_parts(self.last_nonfinite)
        if parts:
            return (
                f"The training batch of step {step} holds NaN or Inf in its "
                f"{' and '.join(parts)}: the data is at fault, not the learning "
                f"rate. {norm_report}Check what data_fn {self.data_spec} "
                "returns (np.isfinite) and drop or fix those examples."
            )
        if self.compiled_by_user:
            tuning = (
                f"Try a lower learning rate or clipnorm in the optimizer model_fn "
                f"{self.model_spec} compiles with (the run's optimizer settings "
                "do not apply to a compiled model)"
            )
        else:
            tuning = "Try a lower learning_rate, a warmup_steps warm-up or clipnorm"
        return (
            f"{norm_report}{tuning}; or look in the model for what can overflow: "
            "a norm's epsilon, a division, log or exp, float16 layers."
        )

    def reset_window(self, setup):
        """The logs are running means since the last reset (as under `fit`)."""
        return setup.model.reset_metrics

    def evaluate_fn(self, setup):
        """The model's metrics over the validation data, as `evaluate` gives
        them, from the model's own `test_step` under the run's strategy.

        With several replicas, each batch is split evenly over them: the
        last batch's few examples beyond a multiple of the replica count are
        left out.
        """
        if self.val is None:
            return None
        model, strategy = setup.model, setup.strategy
        test_step = steps.make_model_test_step(model, strategy)
        batch_size = self.config.batch_size

        def batches():
            if isinstance(self.val, ArrayData):
                for start in range(0, len(self.val), batch_size):
                    yield self.val.take(slice(start, start + batch_size))
            else:
                yield from self.val.dataset

        def evaluate():
            model.reset_metrics()
            logs = {}
            for batch in batches():
                if tf.nest.flatten(batch)[0].shape[0] >= strategy.num_replicas_in_sync:
                    logs = test_step(steps.to_replicas(strategy, *batch))
            model.reset_metrics()
            return {f"val_{name}": value for name, value in steps.scalar_logs(logs)}

        return label_checks.guarded_evaluation(evaluate, self.log)

    def export(self, model, directory):
        """The saved model, checked by reloading it, or its weights with the
        line that rebuilds it with `model_fn` (see `export.export_model`)."""
        rebuild = export.own_model_rebuild(self.model_spec, self.probe_batch)
        imports = export.own_model_imports(self.model_spec)
        result = export.export_model(
            model, directory, self.probe_batch, rebuild, imports
        )
        if result.kind == "weights":
            result.reason = f"{result.reason}; {export.OWN_CLASSES_ADVICE}"
        return result


def _run(model, probe, what, call=None):
    """`call()` (default: the model on the probe inputs); a failure becomes a
    `DataError` saying `what`, with the shapes involved."""
    try:
        if call is None:
            model(probe[0], training=False)
        else:
            call()
    except (TypeError, ValueError, tf.errors.OpError) as error:
        raise DataError(
            f"{what} ({one_line(error, with_type=False)}). The first training batch: "
            f"{describe_shapes(probe)}"
        ) from None


def _loss(name, from_logits):
    if from_logits:
        config = {"class_name": _class_name(name), "config": {"from_logits": True}}
        try:
            return keras.losses.get(config)
        except (TypeError, ValueError) as error:
            raise ConfigError(
                "from_logits", f"loss {name!r} takes no from_logits ({error})"
            ) from None
    try:
        return keras.losses.get(name)
    except (TypeError, ValueError):
        raise ConfigError(
            "loss", f"unknown Keras loss. Received: loss={name!r}"
        ) from None


def _class_name(name):
    if "_" not in name and name[:1].isupper():
        return name
    return "".join(part.capitalize() for part in name.split("_"))


def _runtime_name():
    runtime = _keras.describe()
    return f"{runtime['keras_flavour']} {runtime['keras']}"
