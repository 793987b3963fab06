"""Finding and calling the user's `model_fn` and `data_fn`.

`tfnorm train --model-fn MODULE:FUNCTION` names a function the way `python
-m` and WSGI servers name one: MODULE is an importable module (the current
directory is searched first, as `python -m` does) or a `path/to/file.py`.

The user's code is theirs to debug, so when it fails the error says which
function failed and keeps the user's own traceback (`UserCodeError`), while
a name that does not resolve is a plain setting error. Both are raised
before the run creates anything on disk. Code that ends the process
(`sys.exit`) is reported as a failure of its function, never passed on as
the run's exit status, whose values have meanings of their own. A module
named `tfnorm` where the user's code would import it first is refused.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import sys
import traceback

from tfnorm._errors import one_line
from tfnorm.settings.config_error import ConfigError


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


def absolute_paths(config):
    """`config` with every path of an own-model run made absolute.

    The user's code may change the working directory (`os.chdir` at import
    or in `model_fn`/`data_fn`); the run's files, and a second module named
    by path, stay where the command line meant them. A run without user
    code gets `config` itself.
    """
    if config.model_fn is None:
        return config
    changed = {}
    for key in ("logdir", "checkpoint_dir", "log_file"):
        value = getattr(config, key)
        if isinstance(value, str) and value and not os.path.isabs(value):
            changed[key] = os.path.abspath(value)
    for key in ("model_fn", "data_fn"):
        value = getattr(config, key)
        path, colon, function = str(value).rpartition(":")
        if isinstance(value, str) and _is_path(path) and not os.path.isabs(path):
            changed[key] = os.path.abspath(path) + colon + function
    return dataclasses.replace(config, **changed) if changed else config


def _is_path(module_name):
    return module_name.endswith(".py") or os.sep in module_name or "/" in module_name


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
    module_name = module_name.strip()
    for directory in dict.fromkeys((os.getcwd(), _search_directory(module_name))):
        _refuse_shadowing(key, spec, directory)
    module = _import(key, spec, module_name)
    _refuse_shadowing(key, spec, os.path.dirname(getattr(module, "__file__", "") or ""))
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
    except SystemExit as error:
        raise UserCodeError(key, _exited(f"{key} {spec}", error), "") from None
    except Exception as error:  # the user's code: any failure is theirs to read
        raise UserCodeError(
            key,
            f"{key} {spec} raised {type(error).__name__}: "
            f"{one_line(error, limit=500, with_type=False)} (its traceback follows)",
            _user_traceback(error),
        ) from error


def _import(key, spec, module_name):
    is_path = _is_path(module_name)
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
    except SystemExit as error:
        what = f"importing {module_name} for {key}"
        raise UserCodeError(key, _exited(what, error), "") from None
    except Exception as error:
        raise UserCodeError(
            key,
            f"importing {module_name} for {key} raised {type(error).__name__}: "
            f"{one_line(error, limit=500, with_type=False)} (its traceback follows)",
            _user_traceback(error),
        ) from error


def _exited(what, error):
    """One line for user code that raised `SystemExit`, with where it did."""
    stdlib = os.path.dirname(os.path.abspath(os.__file__))
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(frame.filename).startswith(stdlib)
    ]
    where = f" at {frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
    return (
        f"{what} called sys.exit({error.code!r}){where}, ending the run before "
        "it started: return a value, or raise an exception saying what is wrong"
    )


def _search_directory(module_name):
    """The directory the user's module is searched in first."""
    if _is_path(module_name):
        return os.path.dirname(os.path.abspath(module_name))
    return os.getcwd()


def _refuse_shadowing(key, spec, directory):
    """A `tfnorm.py` (or a `tfnorm` package other than this one) in
    `directory` is what `import tfnorm` finds first there."""
    if not directory:
        return
    package = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    for candidate in ("tfnorm.py", os.path.join("tfnorm", "__init__.py")):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path) and not _same(os.path.dirname(path), package):
            raise ConfigError(
                key,
                f"{path} shadows the tfnorm package: `import tfnorm` in the "
                f"user's code (or a `python` started in {directory}) reads it "
                f"instead. Rename it. Received: {key}={spec!r}",
            )


def _same(first, second):
    try:
        return os.path.samefile(first, second)
    except OSError:
        return False


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
