"""`select_workload`: the workload a run's settings ask for."""

from __future__ import annotations

from tfnorm.training.config.workload_scope import (
    LANGUAGE_MODEL,
    OWN_MODEL,
    workload_of,
)


def select_workload(config, log, model_fn=None, data_fn=None):
    """The `Workload` of a resolved config: the one `workload_of` names for
    its `task` and `model_fn` (the language model of `task` "lm", the
    user's `model_fn` model, or tfnorm's classifier), the same name its
    settings are checked against."""
    workload = workload_of(config.task, config.model_fn)
    if workload == LANGUAGE_MODEL:
        from tfnorm.training.workloads.language_model import LanguageModelWorkload

        return LanguageModelWorkload(config, log)
    if workload == OWN_MODEL:
        from tfnorm.training.workloads.own_model import OwnModelWorkload

        return OwnModelWorkload(config, log, model_fn=model_fn, data_fn=data_fn)
    from tfnorm.training.workloads.classifier import ClassifierWorkload

    return ClassifierWorkload(config, log)
