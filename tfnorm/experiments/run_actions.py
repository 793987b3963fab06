"""The actions of one run of `tfnorm compare` (`compare_runs.train_run`).

Each is a `tfnorm.training.loop.driver.Action` called after every step:
`Record` keeps the curves, `Evaluate` measures the held-out set, `Histograms`
writes the norms' output histograms to TensorBoard.
"""

from __future__ import annotations

from tfnorm._keras import tf
from tfnorm.training.loop.driver import Action


class Record(Action):
    """Keeps every step's loss, gradient norm and time (and the per-block
    gradient norms when the step gives them), and writes them with the rate."""

    def __init__(self):
        self.losses, self.gradient_norms, self.step_seconds = [], [], []
        self.block_steps, self.block_norms = [], []

    def on_step_end(self, step, logs):
        self.losses.append(logs["loss"])
        self.gradient_norms.append(logs["gradient_norm"])
        self.step_seconds.append(logs["step_seconds"])
        if "layer_gradient_norms" in logs:
            self.block_steps.append(step)
            self.block_norms.append(logs["layer_gradient_norms"])
        # TensorBoard steps count from 0 here, as in the published runs.
        tf.summary.scalar("loss", logs["loss"], step=step - 1)
        tf.summary.scalar("gradient_norm", logs["gradient_norm"], step=step - 1)
        tf.summary.scalar("learning_rate", logs["learning_rate"], step=step - 1)


class Evaluate(Action):
    """Accuracy and loss on the held-out data every `every` steps and at the end."""

    def __init__(self, evaluate, eval_data, every, total_steps):
        self.evaluate = evaluate
        self.eval_data = tuple(tf.constant(part) for part in eval_data)
        self.every, self.total_steps = every, total_steps
        self.evals = []

    def on_step_end(self, step, logs):
        if step % self.every == 0 or step == self.total_steps:
            accuracy, loss = (float(v) for v in self.evaluate(*self.eval_data))
            self.evals.append((step, accuracy, loss))
            tf.summary.scalar("eval_token_accuracy", accuracy, step=step - 1)
            tf.summary.scalar("eval_loss", loss, step=step - 1)


class Histograms(Action):
    """Histograms of every norm layer's outputs on a probe batch, every `every` steps.

    Written by `tfnorm.callbacks.NormHistogramCallback` into `log_dir`
    (`<run>/norms`), at step 0 (the initialisation) and then every `every`
    steps, with the same step numbering as the scalars.
    """

    def __init__(self, model, probe, log_dir, every):
        from tfnorm.callbacks import NormHistogramCallback

        self.every = every
        self.callback = NormHistogramCallback(log_dir, probe, every_n_steps=every)
        self.callback.set_model(model)
        self.callback.log(0)

    def on_step_end(self, step, logs):
        if step % self.every == 0:
            self.callback.log(step)

    def close(self):
        self.callback.close()
