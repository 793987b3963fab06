"""TensorBoard scalars of each layer's gradient norm on a probe batch."""

from __future__ import annotations

import numpy as np

from tfnorm._keras import keras, tf
from tfnorm.callbacks.base import SummaryCallback, require_model
from tfnorm.callbacks.layers import find_weighted_layers
from tfnorm.callbacks.probe import as_batches, check_probe_data


class GradientNormCallback(SummaryCallback):
    """Writes each trainable layer's gradient norm on a probe batch to TensorBoard.

    Every `every_n_steps` training steps and at the end of every epoch, the
    gradient of the loss on the probe batch `data` is computed with respect
    to every trainable variable, in a separate function with
    `training=False` (no dropout, no optimizer step, no change to training),
    and for each layer owning trainable variables the L2 norm of its
    gradients, `sqrt(sum_v ||dL/dv||^2)`, is written as the scalar
    `<layer path>/grad_norm` (e.g. `encoder/block_3/ffn/dense_1/grad_norm`),
    plus the global norm as `global/grad_norm`.

    Plotted by depth, this is the figure of Xiong et al. (2020): at
    initialisation, Post-LN gradients grow toward the top layers while Pre-LN
    gradients stay bounded, which is why Post-LN needs learning-rate warm-up.

    Example:

    ```python
    grads = tfnorm.callbacks.GradientNormCallback(
        "logs/grads", (x_train[:32], y_train[:32]), every_n_steps=50
    )
    model.fit(x_train, y_train, callbacks=[grads])
    ```

    Under mixed precision the gradients are computed without loss scaling,
    so very small ones may underflow to 0 in float16 layers.

    The gradients are computed once when `fit` starts, so probe data or a
    loss the model cannot take fails then, naming the argument.

    Args:
        log_dir: str, the directory the event files are written to.
        data: the probe batch `(x, y)` or `(x, y, sample_weight)`, or a small
            `tf.data.Dataset` of them (read once; norms are computed from the
            gradient of the mean loss over all its batches).
        every_n_steps: int >= 1. Defaults to `100`.
        loss: the loss to differentiate: anything `keras.losses.get` accepts.
            Defaults to `None`, the loss the model was compiled with (a
            single loss; pass `loss` for models compiled with several).
            Regularisation losses (`model.losses`) are added.

    References:
        - [Xiong et al., 2020](https://arxiv.org/abs/2002.04745), On Layer
          Normalization in the Transformer Architecture.
    """

    def __init__(self, log_dir, data, every_n_steps=100, loss=None):
        super().__init__(log_dir, every_n_steps)
        self.batches = as_batches(data)
        if any(y is None for _, y, _ in self.batches):
            raise ValueError(
                "`data` must hold targets: a tuple `(x, y)` or "
                "`(x, y, sample_weight)`, or a dataset of them. "
                f"Received: data={data!r}"
            )
        if loss is not None:
            _get_loss(loss)
        self.loss = loss
        self._entries = None
        self._gradients_fn = None
        self._squares_fn = None

    def _forget_model(self):
        self._gradients_fn = None

    def _loss_fn(self, model):
        loss = self.loss if self.loss is not None else getattr(model, "loss", None)
        if loss is None or isinstance(loss, (dict, list, tuple)):
            raise ValueError(
                "GradientNormCallback needs one loss: compile the model with a "
                "single loss or pass `loss=`. Received: "
                f"loss={self.loss!r}, model.loss={getattr(model, 'loss', None)!r}"
            )
        return _get_loss(loss)

    def _prepare(self, model):
        self._build(model)
        check_probe_data(model, self.compute, self.batches)

    def _build(self, model):
        loss_fn = self._loss_fn(model)
        self._entries = find_weighted_layers(model)
        variables = [v for _, _, owned in self._entries for v in owned]

        def gradients_fn(x, y, sample_weight):
            with tf.GradientTape() as tape:
                y_pred = model(x, training=False)
                # Half-precision logits would make the loss itself half.
                y_pred = tf.nest.map_structure(lambda t: tf.cast(t, tf.float32), y_pred)
                loss = _mean_loss(loss_fn, y, y_pred, sample_weight)
                if model.losses:
                    loss += tf.add_n([tf.cast(r, tf.float32) for r in model.losses])
            gradients = tape.gradient(loss, variables)
            return [
                _dense_float32(gradient, variable)
                for gradient, variable in zip(gradients, variables)
            ]

        def squares_fn(gradients):
            squares = []
            index = 0
            for _, _, owned in self._entries:
                owned_gradients = gradients[index : index + len(owned)]
                index += len(owned)
                squares.append(
                    tf.add_n([tf.reduce_sum(tf.square(g)) for g in owned_gradients])
                )
            return tf.stack(squares) if squares else tf.zeros([0])

        self._gradients_fn = tf.function(gradients_fn, reduce_retracing=True)
        self._squares_fn = tf.function(squares_fn)

    def compute(self):
        """`{layer path: gradient norm}` on the probe data, plus `"global"`."""
        if self._gradients_fn is None:
            self._build(require_model(self))
        summed = None
        for x, y, sample_weight in self.batches:
            gradients = _in_one_replica(
                self.model, self._gradients_fn, x, y, sample_weight
            )
            summed = (
                gradients
                if summed is None
                else [a + b for a, b in zip(summed, gradients)]
            )
        # The gradient of the mean loss over the probe batches.
        if len(self.batches) > 1:
            summed = [g / float(len(self.batches)) for g in summed]
        squares = self._squares_fn(summed).numpy()
        norms = {
            path: float(np.sqrt(square))
            for (path, _, _), square in zip(self._entries, squares)
        }
        norms["global"] = float(np.sqrt(squares.sum()))
        return norms

    def log(self, step):
        """Computes the gradient norms and writes them at `step`; returns them."""
        self._prepare_once()
        norms = self.compute()
        self.writer.write(
            step, scalars={f"{path}/grad_norm": value for path, value in norms.items()}
        )
        return norms


def _get_loss(loss):
    try:
        return keras.losses.get(loss)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"`loss` must be a loss that keras.losses.get accepts ({error}). "
            f"Received: loss={loss!r}"
        ) from None


def _dense_float32(gradient, variable):
    if gradient is None:  # a variable the loss does not reach
        return tf.zeros(variable.shape, tf.float32)
    # Embedding gradients arrive as IndexedSlices.
    return tf.cast(tf.convert_to_tensor(gradient), tf.float32)


def _mean_loss(loss_fn, y, y_pred, sample_weight):
    if isinstance(loss_fn, keras.losses.Loss):
        return tf.reduce_mean(loss_fn(y, y_pred, sample_weight=sample_weight))
    # A loss function returns per-sample values and takes no weights; this
    # is Keras's "sum over batch size" reduction of the weighted values.
    values = tf.cast(loss_fn(y, y_pred), tf.float32)
    if sample_weight is not None:
        weights = tf.cast(sample_weight, tf.float32)
        while weights.shape.rank > values.shape.rank:
            weights = tf.squeeze(weights, -1)
        values = values * weights
    return tf.reduce_mean(values)


def _in_one_replica(model, function, *args):
    """`function(*args)`, in a replica context when the model is distributed.

    Gradients with respect to mirrored variables can only be taken inside a
    replica. Every replica gets the same probe batch, so the first replica's
    result is the answer.
    """
    strategy = (
        getattr(model, "distribute_strategy", None) or tf.distribute.get_strategy()
    )
    with strategy.scope():
        if tf.distribute.get_replica_context() is not None:
            return function(*args)
        results = strategy.run(function, args=args)
        return tf.nest.map_structure(
            lambda value: strategy.experimental_local_results(value)[0], results
        )
