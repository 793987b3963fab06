"""Names a package exports but imports only on first use.

`tfnorm.training` and `tfnorm.inference` re-export classes whose modules
import TensorFlow; importing them lazily lets `tfnorm train --help` and the
settings be read in a second or two, without TensorFlow.
"""

from __future__ import annotations

import importlib


def lazy_exports(package_globals, exports):
    """The module-level `__getattr__` and `__dir__` (PEP 562) of a package
    whose names in `exports` (name -> module path) are imported on first use
    and then kept in `package_globals`."""

    def __getattr__(name):
        if name not in exports:
            raise AttributeError(
                f"module {package_globals['__name__']!r} has no attribute {name!r}"
            )
        value = getattr(importlib.import_module(exports[name]), name)
        package_globals[name] = value
        return value

    def __dir__():
        return sorted(set(package_globals) | set(exports))

    return __getattr__, __dir__
