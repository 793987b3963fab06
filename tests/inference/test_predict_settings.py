"""`PredictSettings`: `tfnorm predict`'s settings, declared once."""

from __future__ import annotations

import pytest

from tfnorm.inference.predict_settings import PredictSettings
from tfnorm.settings.config_error import ConfigError


def test_batch_size_reads_text_and_refuses_what_is_not_positive():
    assert PredictSettings.from_dict({"batch_size": "8"}).resolve().batch_size == 8
    for bad in (0, "x", 2.5, True):
        with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
            PredictSettings(batch_size=bad).resolve()
