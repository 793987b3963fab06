"""`ConfigError`: a setting has a bad value."""

from __future__ import annotations

from tfnorm._errors import KeyedMessage


class ConfigError(KeyedMessage, ValueError):
    """A setting has a bad value; `key` is the config key it belongs to.
    Other settings the message names are marked with `setting_key`."""

    def __init__(self, key, message):
        super().__init__(message)
        self.key = key
