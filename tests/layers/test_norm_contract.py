"""The contract every norm of the family keeps (`tests/layers/norm_family.py`):
build, call against its float64 reference, config round trip, masking,
graph/XLA, mixed precision and a saved reload, through `run_layer_test`."""

from __future__ import annotations

import os

import pytest

from tests.conftest import REPO
from tests.layers.norm_family import FAMILY, named_weights
from tests.testing import run_layer_test
from tfnorm.choices import NORMS
from tfnorm.layers.registry import registered_norms

CASES = [
    pytest.param(cls, kwargs, shape, reload, id=f"{cls.__name__}-{case_id}")
    for cls, entry in FAMILY.items()
    for case_id, kwargs, shape, reload in entry.contract_cases
]


def test_every_registered_norm_has_a_test_entry():
    assert set(registered_norms().values()) == set(FAMILY)


def test_the_api_page_lists_every_norm():
    with open(os.path.join(REPO, "docs", "api.md"), encoding="utf-8") as file:
        readme = file.read()
    for name, choice in NORMS.items():
        assert f"| `tfnorm.{choice.class_name}` |" in readme
        assert f'`"{name}"`' in readme


@pytest.mark.parametrize("cls, kwargs, shape, check_reload", CASES)
def test_layer_contract(cls, kwargs, shape, check_reload):
    twin = cls(**kwargs)
    twin.build(shape)
    roles = list(named_weights(twin))

    def reference(x, weights):
        return FAMILY[cls].numpy(twin, x, dict(zip(roles, weights)))

    run_layer_test(
        cls,
        kwargs,
        shape,
        expected_num_trainable_weights=len(twin.weights),
        reference=reference,
        check_reload=check_reload,
    )


def test_weight_roles_follow_the_layers_weight_order():
    # `named_weights` must list weights in `get_weights` order for the
    # reference above to pair them correctly.
    for cls in FAMILY:
        layer = cls()
        layer.build((2, 4))
        assert [w.name for w in layer.weights] == [
            w.name for w in named_weights(layer).values()
        ]
