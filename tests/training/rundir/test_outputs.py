"""`tfnorm.training.rundir.outputs`: saved vocabulary, summary, exit statuses."""

from __future__ import annotations

import json
import os

import pytest

from tfnorm.settings.config_error import ConfigError
from tfnorm.training.rundir import outputs
from tfnorm.training.rundir.paths import RunPaths


def test_a_vocabulary_counts_only_together_with_a_checkpoint(tmp_path):
    from tfnorm.training.data import save_vocabulary

    save_vocabulary(["good", "day"], str(tmp_path))
    assert outputs.saved_vocabulary(str(tmp_path), True) == (["good", "day"], None)
    vocabulary, note = outputs.saved_vocabulary(str(tmp_path), False)
    assert vocabulary is None and "no checkpoint goes with it" in note


def test_summary_is_written_atomically_as_json(tmp_path):
    paths = RunPaths(str(tmp_path), str(tmp_path / "checkpoints"))
    path = outputs.write_summary(paths, {"status": "completed", "n": 1})
    assert json.loads(open(path).read()) == {"status": "completed", "n": 1}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_every_status_has_an_exit_status():
    assert outputs.EXIT_STATUS["completed"] == 0
    assert len(set(outputs.EXIT_STATUS.values())) == len(outputs.EXIT_STATUS)
    # 2 is the CLI's "bad input": a run stops with it only on bad data.
    assert [s for s, code in outputs.EXIT_STATUS.items() if code == 2] == ["bad_data"]


def test_the_hangup_status_exits_129():
    assert outputs.EXIT_STATUS["hangup"] == 129


@pytest.mark.parametrize(
    "content", [b'["good", ', b"{}", b"[1, 2]", b"\xff\xfe", b""], ids=repr
)
def test_a_damaged_vocabulary_beside_a_checkpoint_is_a_clear_error(tmp_path, content):
    (tmp_path / "vocabulary.json").write_bytes(content)
    with pytest.raises(ConfigError, match=r"vocabulary\.json cannot be read") as info:
        outputs.saved_vocabulary(str(tmp_path), True)
    assert info.value.key == "checkpoint_dir"
    # Without a checkpoint it would not be used anyway: a note, no error.
    vocabulary, note = outputs.saved_vocabulary(str(tmp_path), False)
    assert vocabulary is None and "vocabulary.json" in note
