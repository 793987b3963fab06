"""Each setting names the workloads that read it; the scope check, the
workload a run builds and the settings a resume compares follow from that."""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

from tests.conftest import REPO
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import setting_of
from tfnorm.training.config.train_config import TrainConfig, resume_keys
from tfnorm.training.config.workload_scope import (
    CLASSIFIER,
    EVERY_WORKLOAD,
    LANGUAGE_MODEL,
    OWN_MODEL,
    workload_of,
)

FIELDS = {field.name: setting_of(field) for field in dataclasses.fields(TrainConfig)}


def test_every_setting_names_the_workloads_that_read_it():
    for key, setting in FIELDS.items():
        workloads = setting.workloads
        assert workloads and set(workloads) <= set(EVERY_WORKLOAD), key


# The modules of each workload: a setting one of them reads must be declared
# as read by that workload, or the scope check would refuse it there.
WORKLOAD_MODULES = {
    CLASSIFIER: "classifier.py",
    LANGUAGE_MODEL: "language_model.py",
    OWN_MODEL: "own_model.py",
}


@pytest.mark.parametrize("workload", sorted(WORKLOAD_MODULES))
def test_the_settings_a_workload_reads_are_declared_as_read_by_it(workload):
    path = os.path.join(
        REPO, "tfnorm", "training", "workloads", WORKLOAD_MODULES[workload]
    )
    with open(path, encoding="utf-8") as handle:
        read = set(re.findall(r"config\.(\w+)", handle.read())) & set(FIELDS)
    assert read, path
    undeclared = sorted(k for k in read if workload not in FIELDS[k].workloads)
    assert undeclared == []


def lm_data(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("some text to model. " * 20, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "values, key, message",
    [
        ({"task": "sorted", "windows": "random"}, "windows",
         r"^windows applies to the language model of task=lm only; tfnorm's "
         r"classifier does not read it\. Received: windows='random'$"),
        ({"task": "lm", "pooling": "cls"}, "pooling",
         r"^pooling applies to tfnorm's classifier only; the language model of "
         r"task=lm does not read it\. Received: pooling='cls'$"),
        ({"model_fn": "m:build", "data_fn": "m:load", "num_layers": 4}, "num_layers",
         r"^num_layers applies to tfnorm's classifier and the language model of "
         r"task=lm only; a model_fn model does not read it: leave it out"),
        ({"model_fn": "m:build", "data_fn": "m:load", "norm": "rms"}, "norm",
         r"^norm applies to tfnorm's classifier and the language model"),
        ({"task": "sorted", "loss": "mse"}, "loss",
         r"^loss applies to a model_fn model only; tfnorm's classifier does not"),
    ],
)  # fmt: skip
def test_a_setting_its_workload_does_not_read_is_refused_naming_both(
    tmp_path, values, key, message
):
    if values.get("task") == "lm":
        values = dict(values, data=lm_data(tmp_path))
    with pytest.raises(ConfigError, match=message) as info:
        TrainConfig.from_dict(values).resolve()
    assert info.value.key == key


def test_the_language_model_takes_the_model_settings_it_reads(tmp_path):
    config = TrainConfig(
        task="lm", data=lm_data(tmp_path), max_len=8, norm="rms", epsilon=1e-5,
        d_model=32, dropout_rate=0.0, jit_compile=True,
    ).resolve()  # fmt: skip
    assert (config.norm, config.epsilon, config.d_model) == ("rms", 1e-5, 32)


def test_the_workload_and_the_resume_comparison_follow_the_declaration(tmp_path):
    assert workload_of("sorted", None) == CLASSIFIER
    assert workload_of("lm", None) == LANGUAGE_MODEL
    assert workload_of(None, "m:build") == OWN_MODEL
    own = TrainConfig(model_fn="m:build", data_fn="m:load").resolve()
    language_model = TrainConfig(task="lm", data=lm_data(tmp_path)).resolve()
    classifier = TrainConfig(task="sorted").resolve()
    assert "batch_size" in resume_keys(own) and "num_layers" not in resume_keys(own)
    assert {"preset", "num_layers"} <= set(resume_keys(language_model))
    assert "pooling" not in resume_keys(language_model)
    assert "pooling" in resume_keys(classifier) and "preset" not in resume_keys(
        classifier
    )
    for config in (own, language_model, classifier):
        workload = workload_of(config.task, config.model_fn)
        assert all(workload in FIELDS[k].workloads for k in resume_keys(config))
