"""Finding and calling the user's `model_fn` and `data_fn`.

`tfnorm train --model-fn MODULE:FUNCTION` names a function the way `python
-m` and WSGI servers name one: MODULE is an importable module (the current
directory is searched first, as `python -m` does) or a `path/to/file.py`.

The user's code is theirs to debug, so when it fails the error says which
function failed and keeps the user's own traceback (`UserCodeError`), while
a name that does not resolve is a plain setting error. Both are raised
before the run creates anything on disk.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback

from tfnorm._errors import one_line
from tfnorm.training.config.settings import ConfigError


class UserCodeError(ConfigError):
    """The user's module or function raised; `details` is their traceback."""

    def __init__(self, key, message, details):
        super().__init__(key, message)
        self.details = details


def describe(function):
    """`MODULE:FUNCTION` for a callable, as a run's identity records it."""
    module = getattr(function, "__module__", None) or "?"
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}:{name}"


def load_function(key, spec):
    """The function `spec` (`MODULE:FUNCTION` or `path/file.py:FUNCTION`) names.

    Raises:
        ConfigError: the spec is malformed, the module or the function does
            not exist, or it is not callable.
        UserCodeError: importing the module raised.
    """
    module_name, sep, function_name = str(spec).rpartition(":")
    if not sep or not module_name.strip() or not function_name.isidentifier():
        raise ConfigError(
            key,
            f"{key} must be MODULE:FUNCTION, with MODULE a module name or a "
            f"path/to/file.py, e.g. my_model:build_model. Received: {key}={spec!r}",
        )
    module = _import(key, spec, module_name.strip())
    function = getattr(module, function_name, None)
    if function is None:
        public = sorted(
            name
            for name, value in vars(module).items()
            if callable(value) and not name.startswith("_")
        )
        raise ConfigError(
            key,
            f"{module_name} has no function {function_name!r} (its functions: "
            f"{', '.join(public) or 'none'}). Received: {key}={spec!r}",
        )
    if not callable(function):
        raise ConfigError(
            key,
            f"{module_name}.{function_name} is a {type(function).__name__}, "
            f"not a function. Received: {key}={spec!r}",
        )
    return function


def call(key, spec, function):
    """`function()`; what it raises becomes a `UserCodeError` naming `spec`."""
    try:
        return function()
    except Exception as error:  # the user's code: any failure is theirs to read
        raise UserCodeError(
            key,
            f"{key} {spec} raised {type(error).__name__}: "
            f"{one_line(error, limit=500, with_type=False)} (its traceback follows)",
            _user_traceback(error),
        ) from error


def _import(key, spec, module_name):
    is_path = module_name.endswith(".py") or os.sep in module_name or "/" in module_name
    try:
        if is_path:
            return _import_file(key, spec, module_name)
        # `tfnorm` runs from its console script, whose directory is on
        # sys.path instead of the user's; `python -m` semantics expected.
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is not None and module_name.startswith(error.name):
                raise ConfigError(
                    key,
                    f"no module named {module_name!r} (searched the current "
                    f"directory {os.getcwd()} and sys.path; a file can be given "
                    f"as path/to/file.py:FUNCTION). Received: {key}={spec!r}",
                ) from None
            raise
    except ConfigError:
        raise
    except Exception as error:
        raise UserCodeError(
            key,
            f"importing {module_name} for {key} raised {type(error).__name__}: "
            f"{one_line(error, limit=500, with_type=False)} (its traceback follows)",
            _user_traceback(error),
        ) from error


def _import_file(key, spec, path):
    if not os.path.isfile(path):
        raise ConfigError(key, f"no such file {path!r}. Received: {key}={spec!r}")
    path = os.path.abspath(path)
    name = os.path.splitext(os.path.basename(path))[0]
    if not name.isidentifier():
        raise ConfigError(
            key,
            f"{os.path.basename(path)} is not a valid Python module name "
            f"(letters, digits and _ only). Received: {key}={spec!r}",
        )
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "")) == path:
        return loaded
    # Its own directory first, so that it imports its sibling modules as
    # `python path/to/file.py` would let it.
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    # Registered before running it: Keras finds custom classes by module.
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _user_traceback(error):
    """The traceback from the first frame outside tfnorm on."""
    frames = traceback.extract_tb(error.__traceback__)
    tfnorm_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    importlib_dir = os.path.dirname(os.path.abspath(importlib.__file__))
    user = [
        frame
        for frame in frames
        if not frame.filename.startswith("<frozen")
        and not os.path.abspath(frame.filename).startswith((tfnorm_dir, importlib_dir))
    ]
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(user or frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines)
