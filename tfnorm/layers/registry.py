"""The norm family: each of tfnorm's norms registers its class by name.

`tfnorm.choices.NORMS` declares the names (importable without TensorFlow, for
the command line's help); `register_norm` ties a name to its class, so the
factory, the help text and the checks all read one table.
"""

from __future__ import annotations

from tfnorm.choices import NORMS, norm_choice

_CLASSES = {}
_NAME_DEFAULTS = {}


def register_norm(name, **name_defaults):
    """Class decorator: the norm `name` of `tfnorm.choices.NORMS` is this class.

    Args:
        name: the norm's short name, declared in `tfnorm.choices.NORMS` with
            this class's name.
        **name_defaults: constructor arguments a norm picked by *name* gets
            when the caller does not set them (e.g. `epsilon=1e-5` where the
            class keeps Keras's default).
    """

    def register(cls):
        declared = NORMS.get(name)
        if declared is None or declared.class_name != cls.__name__:
            raise ValueError(
                f"Norm {cls.__name__} registers as {name!r}, but "
                f"tfnorm.choices.NORMS declares {name!r} as "
                f"{declared.class_name if declared else 'nothing'}: declare it there."
            )
        if declared.takes_epsilon != cls.has_row_statistic:
            raise ValueError(
                f"tfnorm.choices.NORMS says {name!r} takes_epsilon="
                f"{declared.takes_epsilon}, but {cls.__name__}.has_row_statistic "
                f"is {cls.has_row_statistic}: the two must agree."
            )
        _CLASSES[name] = cls
        _NAME_DEFAULTS[name] = dict(name_defaults)
        return cls

    return register


def registered_norms():
    """`{name: class}` of every registered norm, in the order of `NORMS`."""
    return {name: _CLASSES[name] for name in NORMS if name in _CLASSES}


def norm_by_name(name):
    """`(class, name_defaults)` for a short name, alias (case-insensitive) or
    class name; None when no registered norm has it."""
    short = norm_choice(name) or next(
        (short for short, c in NORMS.items() if c.class_name == name), None
    )
    if short not in _CLASSES:
        return None
    return _CLASSES[short], _NAME_DEFAULTS[short]


def check_registrations():
    """Raises unless every norm `NORMS` declares has registered a class."""
    missing = [name for name in NORMS if name not in _CLASSES]
    if missing:
        raise ImportError(
            f"tfnorm.choices.NORMS declares {missing} but no layer registered "
            "under that name (a module missing from tfnorm.layers' imports?)"
        )
