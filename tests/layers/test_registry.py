"""The norm family's registry: names declared once, classes registered by name."""

from __future__ import annotations

import pytest

import tfnorm
from tfnorm.choices import NORMS
from tfnorm.layers.registry import norm_by_name, register_norm, registered_norms


def test_every_declared_norm_is_registered_and_exported():
    assert list(registered_norms()) == list(NORMS)
    for name, choice in NORMS.items():
        cls = registered_norms()[name]
        assert getattr(tfnorm, choice.class_name) is cls
        assert getattr(tfnorm.layers, choice.class_name) is cls
        assert norm_by_name(choice.class_name)[0] is cls
        assert isinstance(tfnorm.get_norm(name), cls)
        for alias in choice.aliases:
            assert isinstance(tfnorm.get_norm(alias.upper()), cls)
        assert choice.takes_epsilon == cls.has_row_statistic


def test_a_registration_nobody_declared_is_refused():
    base = tfnorm.layers.BaseNormalization
    with pytest.raises(ValueError, match="declare it there"):
        register_norm("batch")(type("BatchNorm", (base,), {}))
    with pytest.raises(ValueError, match="declares 'rms' as RMSNorm"):
        register_norm("rms")(type("MyRMS", (base,), {}))
    # The registry is unchanged by the refusals.
    assert registered_norms()["rms"] is tfnorm.RMSNorm


def test_a_declaration_must_agree_on_epsilon():
    class DynamicTanh(tfnorm.layers.BaseNormalization):  # has_row_statistic True
        pass

    with pytest.raises(ValueError, match="takes_epsilon=False"):
        register_norm("dyt")(DynamicTanh)
    assert registered_norms()["dyt"] is tfnorm.DynamicTanh
