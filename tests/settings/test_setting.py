"""`Setting.parse`: one declaration reads a value from any source."""

from __future__ import annotations

import pytest

from tfnorm.settings import readers
from tfnorm.settings.config_error import ConfigError
from tfnorm.settings.setting import Setting


def test_optional_settings_take_none_and_their_off_values():
    clip = Setting(
        "g", "h", readers.number(above=0.0), optional=True, off=("off", 0, False)
    )
    for off in (None, "none", "None", "off", 0, 0.0, False):
        assert clip.parse("clipnorm", off) is None, off
    assert clip.parse("clipnorm", "2") == 2.0
    with pytest.raises(ConfigError, match="clipnorm=True"):
        clip.parse("clipnorm", True)


def test_required_settings_refuse_none():
    with pytest.raises(ConfigError) as info:
        Setting("g", "h", readers.integer(1)).parse("d_model", "none")
    assert info.value.key == "d_model" and "d_model=None" in str(info.value)


def test_the_workloads_a_setting_names_decide_what_each_reads():
    import dataclasses

    from tfnorm.settings.setting import FIXED, keys_read_by, setting, unread_given

    @dataclasses.dataclass
    class Two:
        shared: int = setting(1, "g", "h", readers.integer(1), resume=FIXED)
        only_a: int = setting(1, "g", "h", readers.integer(1), workloads=("a",))
        both: int = setting(
            1, "g", "h", readers.integer(1), resume=FIXED, workloads=("a", "b")
        )

    assert keys_read_by(Two, "b") == ("shared", "both")
    assert keys_read_by(Two, "a", resume=FIXED) == ("shared", "both")
    values = {"shared": 2, "only_a": 2, "both": 2}
    assert unread_given(Two, values, "a") is None
    assert unread_given(Two, values, "b").name == "only_a"
    assert unread_given(Two, dict(values, only_a=1), "b") is None
