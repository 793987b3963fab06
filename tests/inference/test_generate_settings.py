"""`GenerateSettings`: `tfnorm generate`'s settings, declared once and read
the same from a flag's text and a Python value."""

from __future__ import annotations

import dataclasses

import pytest

from tfnorm.inference.generate_settings import GenerateSettings
from tfnorm.settings.config_error import ConfigError


def resolved(**values):
    return GenerateSettings.from_dict(values).resolve()


def test_text_and_python_values_read_alike():
    from_text = resolved(temperature="0.5", top_k="3", num_samples="2", stop=["\n"])
    from_python = resolved(temperature=0.5, top_k=3, num_samples=2, stop=("\n",))
    assert from_text == from_python
    assert (from_text.top_k, from_text.stop) == (3, ("\n",))


@pytest.mark.parametrize(
    "values, key, message",
    [
        ({"top_k": 0}, "top_k", "top_k must be an integer >= 1. Received: top_k=0"),
        ({"top_k": "2.5"}, "top_k", "top_k must be an integer >= 1. Received: top_k=2.5"),
        ({"temperature": float("nan")}, "temperature", "Received: temperature=nan"),
        ({"top_p": 0}, "top_p", "top_p must be a number in (0, 1]. Received: top_p=0"),
        ({"max_new_tokens": True}, "max_new_tokens", "max_new_tokens must be at least 1"),
        ({"top_k": 2, "top_p": 0.5}, "top_k", "top_k and top_p choose two different samplers"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_naming_the_setting_twice(values, key, message):
    with pytest.raises(ConfigError) as info:
        resolved(**values)
    assert info.value.key == key and message in str(info.value)


def test_every_setting_is_declared_with_help():
    for field in dataclasses.fields(GenerateSettings):
        assert field.metadata["setting"].help, field.name
