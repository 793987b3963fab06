"""`Workload`: what `train` asks of the thing it trains.

The run around a workload (checkpoints, resume, the lock, the actions
between steps, the summary) is the same for every workload (`trainer.py`);
a workload says where its data comes from, builds what is trained and makes
the functions the loop calls. The methods are listed in the order a run
calls them.
"""

from __future__ import annotations

import abc


class Workload(abc.ABC):
    """What is trained, as the run sees it.

    After `load`, `data_summary` (a JSON-ready dict for `summary.json`) and
    `source` (a short text for the progress log) describe the data, and
    `len(workload)` is the number of training examples (0 when unknown).
    After `build`, `probe_batch` holds a batch of model inputs for the norm
    probes (the NaN guard, the histograms).
    """

    data_summary = None
    probe_batch = None
    #: Tokens in one training example, for the tokens/s of progress lines
    #: (None when the examples are not token windows).
    tokens_per_example = None
    #: Whether a fresh run evaluates before its first step.
    evaluates_at_start = False

    def __init__(self, config, log):
        self.config = config
        self.log = log

    @property
    @abc.abstractmethod
    def source(self):
        """Where the training data comes from, as the progress log names it."""

    @abc.abstractmethod
    def load(self, saved, has_checkpoint):
        """Reads the data; every data problem must surface here, before the
        run creates anything on disk.

        Args:
            saved: the `run_config.json` of the checkpoints, or None.
            has_checkpoint: whether a checkpoint will be resumed; then the
                data must be the data the run started with.
        """

    @abc.abstractmethod
    def __len__(self):
        """The number of training examples, 0 when the data cannot tell."""

    @abc.abstractmethod
    def steps_per_epoch(self, batch_size):
        """Steps in one pass over the data (when the settings give none)."""

    @abc.abstractmethod
    def build(self, total_steps):
        """Builds the model and what trains it; returns a `build.ModelSetup`."""

    @abc.abstractmethod
    def identity(self):
        """What `run_config.json` records so that a rerun resumes only this
        run (a JSON-ready dict)."""

    def write_files(self, paths):
        """Writes the files kept beside the checkpoints (`paths`, the run's
        `RunPaths`); none by default."""
        return None

    @abc.abstractmethod
    def step_fn(self, setup):
        """The function `run_loop` calls once per step, for `setup` (the
        `ModelSetup` that `build` returned)."""

    def reset_window(self, setup):
        """A callable that restarts the running means the step logs report,
        called after each progress line; None when the logs are per step."""
        return None

    def explain_nan(self, step, norm_report):
        """What the NaN guard says after where the run stopped at `step`:
        `norm_report` (the first norm layer hit, or "") and what to try."""
        return (
            f"{norm_report}Try a lower learning_rate, a warmup_steps warm-up, "
            "clipnorm, or norm_position pre."
        )

    @abc.abstractmethod
    def evaluate_fn(self, setup):
        """A callable returning validation metrics (a dict), or None when
        there is no validation data."""

    def estimate_fn(self, setup):
        """A cheaper callable estimating the validation metrics between the
        evaluations of the whole set, or None to always use `evaluate_fn`."""
        return None

    @abc.abstractmethod
    def export(self, model, directory):
        """Saves the final model under `directory`; returns its path."""
