"""`tfnorm.training.workloads.user_code`: finding and calling `--model-fn` / `--data-fn`."""

from __future__ import annotations

import os

import pytest

from tfnorm.settings.config_error import ConfigError
from tfnorm.training.workloads.user_code import (
    UserCodeError,
    call,
    describe,
    load_function,
)

MODULE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "user_module.py")


def test_a_module_name_and_a_file_path_both_resolve():
    by_name = load_function("model_fn", "tests.training.user_module:compiled_model")
    by_path = load_function("model_fn", f"{MODULE}:compiled_model")
    assert by_name.__name__ == by_path.__name__ == "compiled_model"


def test_a_module_in_the_current_directory_is_found(tmp_path, monkeypatch):
    (tmp_path / "my_model_module.py").write_text("def build():\n    return 3\n")
    monkeypatch.chdir(tmp_path)
    function = load_function("model_fn", "my_model_module:build")
    assert function() == 3


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("no_colon", "must be MODULE:FUNCTION"),
        ("module:", "must be MODULE:FUNCTION"),
        (
            "surely_no_such_module_here:build",
            "no module named 'surely_no_such_module_here'",
        ),
        ("/nowhere/model.py:build", "no such file"),
        ("tests.training.user_module:missing", "has no function 'missing'"),
        ("tests.training.user_module:NOT_A_FUNCTION", "is a int, not a function"),
    ],
)
def test_a_name_that_does_not_resolve_is_a_setting_error(spec, expected):
    with pytest.raises(ConfigError, match=expected) as error:
        load_function("model_fn", spec)
    assert error.value.key == "model_fn"
    assert not isinstance(error.value, UserCodeError)


def test_missing_function_lists_what_the_module_has():
    with pytest.raises(ConfigError, match="its functions: .*compiled_model"):
        load_function("data_fn", "tests.training.user_module:missing")


def test_a_module_that_fails_to_import_keeps_the_users_traceback(tmp_path):
    path = tmp_path / "broken_import.py"
    path.write_text(
        "import json\n\nraise ImportError('no module named fancy_layers')\n"
    )
    with pytest.raises(UserCodeError, match="importing .* raised ImportError") as error:
        load_function("model_fn", f"{path}:build")
    assert 'broken_import.py", line 3' in error.value.details
    assert "importlib" not in error.value.details


def test_a_raising_function_becomes_one_error_naming_it_with_its_traceback():
    function = load_function("model_fn", "tests.training.user_module:raising_model")
    with pytest.raises(UserCodeError) as error:
        call("model_fn", "mod:raising_model", function)
    message = str(error.value)
    assert message.startswith("model_fn mod:raising_model raised RuntimeError")
    assert "\n" not in message
    assert "user_module.py" in error.value.details
    assert "tfnorm/training" not in error.value.details


def test_describe_names_a_callable_by_module_and_qualname():
    from tests.training import user_module

    assert describe(user_module.array_data) == "tests.training.user_module:array_data"


def test_a_tfnorm_py_in_the_current_directory_is_refused_naming_it(
    tmp_path, monkeypatch
):
    (tmp_path / "shadowed_model_module.py").write_text("def build():\n    return 3\n")
    (tmp_path / "tfnorm.py").write_text("")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ConfigError, match="tfnorm.py shadows the tfnorm package"
    ) as error:
        load_function("model_fn", "shadowed_model_module:build")
    assert error.value.key == "model_fn"
    assert str(tmp_path / "tfnorm.py") in str(error.value)
