"""`select_workload`: the workload a run's settings ask for."""

from __future__ import annotations

from tfnorm.choices import LANGUAGE_MODEL_TASK


def select_workload(config, log, model_fn=None, data_fn=None):
    """The `Workload` of a resolved config: the language model of `task`
    "lm", the user's `model_fn` model, or tfnorm's classifier."""
    if config.task == LANGUAGE_MODEL_TASK:
        from tfnorm.training.workloads.language_model import LanguageModelWorkload

        return LanguageModelWorkload(config, log)
    if config.model_fn is not None:
        from tfnorm.training.workloads.own_model import OwnModelWorkload

        return OwnModelWorkload(config, log, model_fn=model_fn, data_fn=data_fn)
    from tfnorm.training.workloads.classifier import ClassifierWorkload

    return ClassifierWorkload(config, log)
