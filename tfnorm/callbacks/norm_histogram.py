"""TensorBoard histograms and scalars of every norm layer's activations."""

from __future__ import annotations

import warnings

from tfnorm._checks import check_positive_int
from tfnorm.callbacks.base import SummaryCallback
from tfnorm.callbacks.layers import check_layer_selection, select_layers
from tfnorm.callbacks.probe import (
    RECORDABLE,
    SCALARS,
    NormProbe,
    as_batches,
    check_probe_data,
)


class NormHistogramCallback(SummaryCallback):
    """Writes histograms of norm layers' outputs (and inputs) to TensorBoard.

    Keras's `TensorBoard(histogram_freq=...)` records weights only. This
    callback records activations: every `every_n_steps` training steps and
    at the end of every epoch it runs the model on the probe batch `data`
    (with `training=False`, in a separate function, so training is
    unchanged), and writes for each norm layer, under a tag built from the
    layer's path in the model:

    ```
    encoder/block_3/attention_norm/outputs                       histogram
    encoder/block_3/attention_norm/outputs/mean                  scalar
    encoder/block_3/attention_norm/outputs/std                   scalar
    encoder/block_3/attention_norm/outputs/min                   scalar
    encoder/block_3/attention_norm/outputs/max                   scalar
    encoder/block_3/attention_norm/outputs/nonfinite_fraction    scalar
    ```

    and the same under `.../inputs` when `record` includes `"inputs"`. The
    histogram holds the finite values (NaN/Inf would make its buckets
    meaningless); their share is in `nonfinite_fraction`; mean, std, min and
    max are over finite values. Norm layers are found at any depth: inside
    nested models, Sequential models and composite layers such as encoder
    blocks, tfnorm's norms as well as Keras's own `LayerNormalization` and
    `RMSNormalization`.

    Example:

    ```python
    probe = x_train[:32]
    model.fit(
        x_train, y_train, epochs=3,
        callbacks=[tfnorm.callbacks.NormHistogramCallback("logs/norms", probe)],
    )
    # tensorboard --logdir logs
    ```

    Every argument is checked here, and against the model when `fit`
    starts (the probe runs once then, so data the model cannot take fails
    before training, naming `data`). In a custom training loop, call
    `set_model(model)` once and `log(step)` whenever a record is wanted.

    Args:
        log_dir: str, the directory the event files are written to.
        data: the probe batch: inputs `x`, a tuple `(x, y)` /
            `(x, y, sample_weight)` (only `x` is used), or a small
            `tf.data.Dataset` of such batches (read once, all batches used).
        every_n_steps: int >= 1, record every this many training steps.
            Defaults to `100`.
        layers: `"norms"` for every norm layer, or a list of layer paths
            (`"encoder/block_0/ffn_norm"`), layer names or layer objects
            (any layer type) to record. Defaults to `"norms"`.
        record: tuple of `"outputs"` and/or `"inputs"`. Defaults to
            `("outputs",)`.
        max_values: int or None, at most this many values per tensor go
            into a histogram (an evenly strided sample); the scalars use all
            values. Defaults to `10000`.
        buckets: int >= 1, histogram buckets. Defaults to `30`.
    """

    def __init__(
        self,
        log_dir,
        data,
        every_n_steps=100,
        layers="norms",
        record=("outputs",),
        max_values=10000,
        buckets=30,
    ):
        if isinstance(record, str):
            record = (record,)
        record = tuple(record)
        unknown = [r for r in record if r not in RECORDABLE]
        if not record or unknown:
            raise ValueError(
                f"`record` must be a non-empty subset of {RECORDABLE}. "
                f"Received: record={record!r}"
            )
        if max_values is not None:
            check_positive_int("max_values", max_values)
        buckets = check_positive_int("buckets", buckets)
        check_layer_selection(layers)
        super().__init__(log_dir, every_n_steps, buckets=buckets)
        self.batches = as_batches(data)
        self.layers = layers
        self.record = record
        self.max_values = None if max_values is None else int(max_values)
        self.buckets = int(buckets)
        self.probe = None

    def _forget_model(self):
        self.probe = None

    def _prepare(self, model):
        entries = select_layers(model, self.layers)
        if not entries:
            warnings.warn(
                f"NormHistogramCallback found no norm layer in model "
                f"{model.name!r}: nothing will be recorded.",
                stacklevel=2,
            )
        self.probe = NormProbe(model, entries, self.record, max_values=self.max_values)
        check_probe_data(model, lambda: self.probe.run(self.batches), self.batches)

    def log(self, step):
        """Probes the model and writes the summaries at `step`.

        Returns:
            `{path: {"outputs": stats, ...}}` with, per recorded tensor, the
            scalars written (`mean`, `std`, `min`, `max`,
            `nonfinite_fraction`), the value count and the histogram sample.
        """
        self._prepare_once()
        results = self.probe.run(self.batches)
        histograms = {}
        scalars = {}
        for path, recorded in results.items():
            for kind in self.record:
                stats = recorded[kind]
                tag = f"{path}/{kind}"
                histograms[tag] = stats["values"]
                for name in SCALARS:
                    scalars[f"{tag}/{name}"] = stats[name]
        self.writer.write(step, histograms, scalars)
        return results
