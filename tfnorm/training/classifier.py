"""The workload of `tfnorm train` without `--model-fn`: tfnorm's classifier.

A workload is what `train` trains; the run around it (checkpoints, resume,
the lock, actions, summary) is the same for every workload (`trainer.py`).
Each one provides, in the order a run needs them:

* `load(saved, has_checkpoint)`: reads the data (every data problem
  surfaces here, before anything is created); sets `data_summary` and
  `source`, and `len(workload)` is the training examples;
* `steps_per_epoch(batch_size)`;
* `build(total_steps)`: the `build.Training` (model, optimizer, checkpoint);
* `identity()`: what `run_config.json` records to recognise the run;
  `write_files(paths)`: files saved beside the checkpoints (a vocabulary),
  `paths` being the run's `RunPaths`;
* `step_fn(training)`: the function `run_loop` calls once per step;
* `probe_batch`: a batch of inputs for the norm probes (NaN guard,
  histograms); `evaluate_fn(training)`: validation metrics, or None;
* `export(model, directory)`: the final model's `export.Export`.

This one trains `build_classifier` on a synthetic task or a text file.
"""

from __future__ import annotations

import math

from tfnorm.training import data as data_lib
from tfnorm.training import run_files, steps
from tfnorm.training.build import build_training


class ClassifierWorkload:
    """tfnorm's Transformer classifier on a synthetic task or a text file."""

    def __init__(self, config, log):
        self.config = config
        self.log = log
        self.vocabulary = self.data_sha256 = None
        self.train_set = self.val_set = None

    def __len__(self):
        return len(self.train_set)

    @property
    def source(self):
        return self.train_set.source

    def load(self, saved, has_checkpoint):
        """The training and validation sets; every data problem surfaces here."""
        config = self.config
        if config.data:
            try:
                self.data_sha256 = run_files.file_sha256(config.data)
            except OSError as error:
                raise data_lib.DataError(
                    f"{config.data}: cannot be read ({error.strerror or error})."
                ) from None
        if has_checkpoint:
            run_files.check_same_run(config, saved, self.data_sha256, self.log)
        if config.task:
            self.train_set, self.val_set = data_lib.make_synthetic(
                config.task,
                num_examples=config.num_examples,
                max_len=config.max_len,
                seed=config.seed,
                vocab_size=config.vocab_size,
                num_classes=config.num_classes,
            )
        else:
            self._load_files(has_checkpoint)
        self.data_summary = run_files.data_summary(
            self.train_set, self.val_set, self.data_sha256
        )

    def _load_files(self, has_checkpoint):
        config = self.config
        vocabulary, note = run_files.saved_vocabulary(
            config.checkpoint_dir, has_checkpoint
        )
        if note:
            self.log.line(note)
        self.train_set, self.val_set, self.vocabulary = data_lib.load_text_data(
            config.data,
            config.val_data,
            max_len=config.max_len,
            max_tokens=config.vocab_size or 20000,
            vocabulary=vocabulary,
            num_classes=config.num_classes,
            val_split=config.val_split,
            seed=config.seed,
            label_names=run_files.saved_label_names(
                config.checkpoint_dir, has_checkpoint
            ),
        )
        for note in self.train_set.notes:
            self.log.line(note)

    def steps_per_epoch(self, batch_size):
        return math.ceil(len(self.train_set) / batch_size)

    def build(self, total_steps):
        return build_training(self.config, self.train_set, total_steps)

    def identity(self):
        return {
            "data_sha256": self.data_sha256,
            "vocab_size": self.train_set.vocab_size,
            "num_classes": self.train_set.num_classes,
        }

    def write_files(self, paths):
        if self.vocabulary is not None:
            run_files.save_vocabularies(
                self.vocabulary, paths, self.train_set.label_names
            )

    def step_fn(self, training):
        return steps.classifier_step_fn(
            training, self.train_set, self.config.batch_size, self.config.seed
        )

    @property
    def probe_batch(self):
        return self.train_set.ids[: min(len(self.train_set), 64)]

    def evaluate_fn(self, training):
        if self.val_set is None:
            return None
        eval_step = steps.make_eval_step(training.model, self.config.max_len)
        return lambda: steps.evaluate(eval_step, self.val_set, self.config.batch_size)

    def export(self, model, directory):
        return run_files.export_model(
            model, directory, self.probe_batch, rebuild=self._rebuild_line()
        )

    def _rebuild_line(self):
        """Python building this run's classifier again (for its weights)."""
        config = self.config
        settings = ("num_layers", "d_model", "num_heads", "dff", "norm")
        settings += ("norm_position", "pooling", "dropout_rate", "epsilon")
        arguments = ", ".join(f"{k}={getattr(config, k)!r}" for k in settings)
        return (
            "import tfnorm; model = tfnorm.models.build_classifier("
            f"{self.train_set.vocab_size}, {config.max_len}, "
            f"{self.train_set.num_classes}, {arguments})"
        )
