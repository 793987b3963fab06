"""The workload of `tfnorm train` without `--model-fn`: `build_classifier`
on a synthetic task or a text file."""

from __future__ import annotations

import math
import os

from tfnorm._safe_io import file_sha256
from tfnorm.training import data as data_lib
from tfnorm.training.config.train_defaults import FILE_VOCAB
from tfnorm.training.rundir import export, outputs, run_identity
from tfnorm.training.workloads import steps
from tfnorm.training.workloads.base import Workload
from tfnorm.training.workloads.build import build_classifier_setup

#: Examples the norm probes (NaN guard, histograms) run on.
PROBE_EXAMPLES = 64


class ClassifierWorkload(Workload):
    """tfnorm's Transformer classifier on a synthetic task or a text file."""

    def __init__(self, config, log):
        super().__init__(config, log)
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
                self.data_sha256 = file_sha256(config.data)
            except OSError as error:
                raise data_lib.DataError(
                    f"{config.data}: cannot be read ({error.strerror or error})."
                ) from None
        if has_checkpoint:
            run_identity.check_same_run(config, saved, self.data_sha256, self.log)
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
            self._load_files(has_checkpoint, saved)
        self.data_summary = outputs.data_summary(
            self.train_set, self.val_set, self.data_sha256
        )

    def _load_files(self, has_checkpoint, saved):
        config = self.config
        vocabulary, note = outputs.saved_vocabulary(
            config.checkpoint_dir, has_checkpoint
        )
        if note:
            self.log.line(note)
        if vocabulary is not None:
            # Before anything is restored: an edited vocabulary only shows
            # as the checkpoint's embedding not fitting the model.
            run_identity.check_vocabulary_size(
                config,
                saved,
                len(vocabulary) + 2,  # with padding and [UNK]
                os.path.join(config.checkpoint_dir, data_lib.VOCABULARY_FILE),
            )
        self.train_set, self.val_set, self.vocabulary = data_lib.load_text_data(
            config.data,
            config.val_data,
            max_len=config.max_len,
            max_tokens=config.vocab_size or FILE_VOCAB,
            vocabulary=vocabulary,
            num_classes=config.num_classes,
            val_split=config.val_split,
            seed=config.seed,
            label_names=outputs.saved_label_names(
                config.checkpoint_dir, has_checkpoint
            ),
        )
        for note in self.train_set.notes:
            self.log.line(note)

    def steps_per_epoch(self, batch_size):
        return math.ceil(len(self.train_set) / batch_size)

    def build(self, total_steps):
        return build_classifier_setup(self.config, self.train_set, total_steps)

    def identity(self):
        return {
            "data_sha256": self.data_sha256,
            "vocab_size": self.train_set.vocab_size,
            "num_classes": self.train_set.num_classes,
        }

    def write_files(self, paths):
        if self.vocabulary is not None:
            outputs.save_vocabularies(
                self.vocabulary, paths, self.train_set.label_names
            )

    def step_fn(self, setup):
        config = self.config
        return steps.classifier_step_fn(
            setup, self.train_set, config.batch_size, config.seed, config.jit_compile
        )

    @property
    def probe_batch(self):
        return self.train_set.ids[: min(len(self.train_set), PROBE_EXAMPLES)]

    def evaluate_fn(self, setup):
        if self.val_set is None:
            return None
        eval_step = steps.make_eval_step(setup.model, self.config.max_len)
        return lambda: steps.evaluate(eval_step, self.val_set, self.config.batch_size)

    def export(self, model, directory):
        return export.export_model(
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
