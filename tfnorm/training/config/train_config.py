"""`TrainConfig`: every setting of a `tfnorm train` run, declared once.

Each field carries its own `tfnorm.settings.setting.Setting` (help, group, reader, resume
class, the workloads that read it); the command line's flags are generated from them
(`tfnorm.cli.flags`), and values from flags, config files and notebooks all
go through the same `Setting.parse` in `resolve()`. Field names are the
config-file keys. No TensorFlow at import time: `--help` is built from here.
"""

from __future__ import annotations

import dataclasses

from tfnorm.choices import LANGUAGE_MODEL_TASK
from tfnorm.settings.declared import DeclaredSettings
from tfnorm.settings.setting import FIXED, LOGGED, keys_declared, keys_read_by
from tfnorm.training.config import checks
from tfnorm.training.config.checks import check_combinations
from tfnorm.training.config.data_settings import DataSettings
from tfnorm.training.config.model_checks import check_init_from
from tfnorm.training.config.model_settings import ModelSettings
from tfnorm.training.config.run_settings import RunSettings
from tfnorm.training.config.train_defaults import fill_derived_defaults
from tfnorm.training.config.workload_scope import check_scope, workload_of


@dataclasses.dataclass
class TrainConfig(DeclaredSettings, RunSettings, ModelSettings, DataSettings):
    """Settings of one training run (see `tfnorm train --help` for each).

    Build one from keywords or a dict (`TrainConfig.from_dict`); `resolve()`
    returns a copy with every value checked and the derived defaults filled
    in (`dff`, `checkpoint_dir`, `num_classes` of the synthetic tasks,
    `val_split` of a data file without a validation file), and the resolved
    copy itself when asked again.

    The fields are declared by part, in the order `--help` shows them:
    `DataSettings` (the user's model and data, or a task or files),
    `ModelSettings`, `RunSettings` (optimisation, runtime, outputs).
    """

    SETTING_NOUN = "training setting"

    def _check_given(self):
        checks.check_one_source(self.task, self.data, self.model_fn, self.data_fn)

    def _finish(self, values):
        check_scope(values, type(self))
        check_init_from(values, type(self))
        if values["epochs"] is None and values["max_steps"] is None:
            values["epochs"] = 1
        if values["norm"] is None and values["model_fn"] is None:
            if values["task"] != LANGUAGE_MODEL_TASK:  # its preset's norm
                values["norm"] = "layer"
        check_combinations(values)
        fill_derived_defaults(values)

    def validate(self):
        """The same as `resolve()`, under the name a notebook may look for."""
        return self.resolve()


#: Settings a resumed run must share with its checkpoint (those its workload
#: reads: `resume_keys`): they fix the shapes of the checkpointed variables or
#: the meaning of the saved data position.
RESUME_KEYS = keys_declared(TrainConfig, resume=FIXED)
#: Settings that may change on resume; a change is logged, so a resumed run's
#: log says what it trains with.
CHANGEABLE_KEYS = keys_declared(TrainConfig, resume=LOGGED)


def resume_keys(config):
    """The settings a resumed run of `config` (a resolved `TrainConfig`) must
    share with its checkpoint: the `RESUME_KEYS` its workload reads."""
    workload = workload_of(config.task, config.model_fn)
    return keys_read_by(TrainConfig, workload, resume=FIXED)
