"""`RunPaths`: where a run writes and which part this process plays in it.

A run's directories, its log file and its role in a multi-worker cluster
are read once, from the resolved config and `TF_CONFIG`, when `train`
starts. The trainer, resume and the run-file writers ask this value, so
every part of the run agrees on one answer and none reads the environment
again halfway through.

Every worker of a `MultiWorkerMirroredStrategy` run takes part in each
checkpoint save and in the export (the variables are mirrored), but only the
chief keeps what it writes: a worker writes into its own scratch directory
inside the checkpoint directory, which is deleted after each save.

TensorFlow is imported (through `tfnorm.distribute`) only when a value is
built, so that importing this module stays as cheap as importing `config.py`.
"""

from __future__ import annotations

import dataclasses
import os

from tfnorm.settings.config_error import ConfigError

CHIEF = "chief"
WORKER = "worker"


@dataclasses.dataclass(frozen=True)
class RunPaths:
    """The run's locations and this process's role, resolved once.

    Build it with `RunPaths.from_config`.

    Attributes:
        logdir: TensorBoard logs, `summary.json` and the exported model.
        checkpoint_dir: checkpoints, `run_config.json` and the vocabulary.
        log_file: the progress log file, or None.
        role: `CHIEF` (the only process without a cluster) or `WORKER`.
        task_type: the `TF_CONFIG` task's type ("chief" or "worker"), or
            None without a cluster.
        task_index: the `TF_CONFIG` task's index (0 without a cluster).
        scratch_dir: a worker's directory for the copies it writes and
            deletes, inside `checkpoint_dir`; None for the chief.
    """

    logdir: str
    checkpoint_dir: str
    log_file: str | None = None
    role: str = CHIEF
    task_type: str | None = None
    task_index: int = 0
    scratch_dir: str | None = None

    @classmethod
    def from_config(cls, config, environ=None):
        """The paths of the resolved `config` for this process.

        Args:
            config: a resolved `TrainConfig` (its `checkpoint_dir` filled in).
            environ: the environment to read `TF_CONFIG` from; defaults to
                `os.environ`.

        Returns:
            A `RunPaths`.

        Raises:
            ConfigError: `TF_CONFIG` is malformed (the message names it and
                says what is wrong). Caught here, before anything is written,
                rather than where the strategy is built.
        """
        from tfnorm.distribute import is_chief, parse_tf_config

        environ = os.environ if environ is None else environ
        try:
            tf_config = parse_tf_config(environ.get("TF_CONFIG"))
        except ValueError as error:
            raise ConfigError(None, str(error)) from None
        if not tf_config:
            return cls(config.logdir, config.checkpoint_dir, config.log_file)
        task = tf_config["task"]
        task_type, task_index = task["type"], task.get("index", 0)
        chief = is_chief(tf_config)
        scratch = os.path.join(config.checkpoint_dir, f".{task_type}_{task_index}")
        return cls(
            config.logdir,
            config.checkpoint_dir,
            config.log_file,
            role=CHIEF if chief else WORKER,
            task_type=task_type,
            task_index=task_index,
            scratch_dir=None if chief else scratch,
        )

    @property
    def owns_directories(self):
        """Whether this process creates, locks and keeps the run's files.

        True for the chief only: it refuses planted links, creates and locks
        the directories, writes `run_config.json`, the vocabulary, the
        TensorBoard logs and `summary.json`, keeps its checkpoints and its
        export, and moves damaged checkpoints aside. Two processes doing any
        of this would overwrite each other's files.
        """
        return self.role == CHIEF

    @property
    def own_checkpoint_dir(self):
        """Where this process writes checkpoints: the chief's are kept, a
        worker's go to its scratch directory."""
        return self.checkpoint_dir if self.owns_directories else self.scratch_dir

    @property
    def export_dir(self):
        """Where this process saves the final model (the logdir for the chief)."""
        return self.logdir if self.owns_directories else self.scratch_dir

    @property
    def tensorboard_dir(self):
        """The logdir TensorBoard events go to, or None for a worker: its
        curves would mix with the chief's."""
        return self.logdir if self.owns_directories else None

    def directories(self):
        """`(setting, path)` of the logdir and the checkpoint directory, the
        setting's name for error messages about the path."""
        return (("logdir", self.logdir), ("checkpoint_dir", self.checkpoint_dir))
