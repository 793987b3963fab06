"""`DeclaredSettings`: what every dataclass of declared settings shares.

`TrainConfig` and `tfnorm.experiments`' `CompareConfig` declare each field
with `settings.setting(...)`; this base reads them from a dict, checks every
value with its own reader, and leaves the checks across settings and the
derived defaults to the subclass (`_finish`).
"""

from __future__ import annotations

import dataclasses

from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import setting_of


class DeclaredSettings:
    """Base of a settings dataclass: `from_dict`, `to_dict`, `resolve`."""

    #: How an unknown key's error names the settings ("training setting").
    SETTING_NOUN = "setting"

    @classmethod
    def from_dict(cls, values):
        """A config from a dict such as a parsed YAML/JSON file; unknown keys fail.

        Keys may use `-` for `_` (`learning-rate`); values are checked by
        `resolve()`, not here.
        """
        if not isinstance(values, dict):
            raise ConfigError(
                None,
                f"A {cls.__name__} must be built from a mapping of settings. "
                f"Received: {type(values).__name__}",
            )
        known = {field.name for field in dataclasses.fields(cls)}
        settings = {}
        for key, value in values.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ConfigError(
                    key,
                    f"Unknown {cls.SETTING_NOUN} {key!r}; known settings: "
                    f"{', '.join(sorted(known))}. Received: {key}={value!r}",
                )
            settings[name] = value
        return cls(**settings)

    def to_dict(self):
        return dataclasses.asdict(self)

    def resolve(self):
        """A copy with every value checked and the derived defaults set.

        A config `resolve()` returned comes back as it is while its values
        stay unchanged, so the checks (which may look at the file system)
        run once, whoever asks first.

        Raises:
            ConfigError: the first bad setting; `error.key` names it and the
                message gives the received value.
        """
        if self.is_resolved():
            return self
        self._check_given()
        values = {
            field.name: setting_of(field).parse(field.name, getattr(self, field.name))
            for field in dataclasses.fields(self)
        }
        self._finish(values)
        resolved = dataclasses.replace(self, **values)
        # Not a field: `replace`, `to_dict` and `==` leave it out, so a copy
        # with other values is checked again. The repr, unlike `==`, tells a
        # value set to True from 1, or 2.0 from 2, after resolving.
        resolved._resolved_repr = repr(resolved)
        return resolved

    def is_resolved(self):
        """Whether `resolve()` returned this config and no value changed since."""
        return self.__dict__.get("_resolved_repr") == repr(self)

    def _check_given(self):
        """Checks on the values as given, before any is read; none by default."""

    def _finish(self, values):
        """Checks `values` (each already read by its setting) together and
        fills the derived defaults in place; nothing by default."""
