"""Which workload a run's settings select, and which settings each reads.

A run trains one of three workloads: tfnorm's classifier (a synthetic task
or a text file), tfnorm's language model (`task` "lm") or the user's own
`model_fn` model. Each `TrainConfig` setting names the workloads that read
it (`Setting.workloads`, from the names below); from that one declaration
come the scope check (a setting given to a workload that does not read it
is refused, naming both), the workload `train` builds
(`tfnorm.training.workloads.selection`) and the settings a resumed run
compares with its checkpoint (`train_config.resume_keys`).

No TensorFlow at import time.
"""

from __future__ import annotations

from tfnorm._errors import setting_key
from tfnorm.choices import LANGUAGE_MODEL_TASK
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import setting_of, unread_given

CLASSIFIER = "classifier"
LANGUAGE_MODEL = "language_model"
OWN_MODEL = "own_model"
#: For the settings every workload reads.
EVERY_WORKLOAD = (CLASSIFIER, LANGUAGE_MODEL, OWN_MODEL)
#: For the settings of the models tfnorm builds.
TFNORM_MODELS = (CLASSIFIER, LANGUAGE_MODEL)

#: How a message names each workload.
DESCRIPTIONS = {
    CLASSIFIER: "tfnorm's classifier",
    LANGUAGE_MODEL: f"the language model of {setting_key('task', LANGUAGE_MODEL_TASK)}",
    OWN_MODEL: "a model_fn model",
}
#: What the message of a refused setting adds for each workload.
_ADVICE = {OWN_MODEL: ": leave it out or build it into your model"}


def workload_of(task, model_fn):
    """The workload that the settings `task` and `model_fn` select (one of
    `EVERY_WORKLOAD`)."""
    if task == LANGUAGE_MODEL_TASK:
        return LANGUAGE_MODEL
    return OWN_MODEL if model_fn is not None else CLASSIFIER


def check_scope(values, config_class):
    """Refuses a setting given a value other than its default when the
    selected workload does not read it: it would be silently ignored.

    Raises:
        ConfigError: naming the setting, the workloads that read it and the
            one selected.
    """
    workload = workload_of(values["task"], values["model_fn"])
    field = unread_given(config_class, values, workload)
    if field is None:
        return
    key, readers = field.name, setting_of(field).workloads
    raise ConfigError(
        key,
        f"{key} applies to {' and '.join(DESCRIPTIONS[w] for w in readers)} "
        f"only; {DESCRIPTIONS[workload]} does not read it"
        f"{_ADVICE.get(workload, '')}. Received: {key}={values[key]!r}",
    )
