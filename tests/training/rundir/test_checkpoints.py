"""`tfnorm.training.rundir.checkpoints`: scan, restore, write, prune.

A checkpoint of two plain variables stands in for a model: what is tested is
which files are trusted, kept, moved or deleted.
"""

from __future__ import annotations

import os

import pytest

from tfnorm._keras import tf
from tfnorm.training.rundir import checkpoints


def make_checkpoint(value=0.0):
    return tf.train.Checkpoint(
        weight=tf.Variable(value), step=tf.Variable(0, dtype=tf.int64)
    )


def write_steps(directory, steps, keep=10):
    checkpoint = make_checkpoint()
    writer = checkpoints.CheckpointWriter(checkpoint, str(directory), keep)
    for step in steps:
        checkpoint.weight.assign(float(step))
        checkpoint.step.assign(step)
        writer.save(step)
    return writer


def names(directory):
    return sorted(os.listdir(directory))


def test_writer_writes_state_file_that_tensorflow_reads(tmp_path):
    write_steps(tmp_path, [2, 4])
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-4")
    assert [s for s, _ in checkpoints.scan(str(tmp_path))] == [2, 4]
    listed = checkpoints.read_state_file(str(tmp_path))
    assert [os.path.basename(p) for p in listed] == ["ckpt-2", "ckpt-4"]


@pytest.mark.parametrize("content", ["garbage\n", "", 'model_checkpoint_path: "x\n'])
def test_a_damaged_state_file_reads_as_unknown(tmp_path, content):
    (tmp_path / "checkpoint").write_text(content)
    assert checkpoints.read_state_file(str(tmp_path)) is None


@pytest.mark.parametrize("content", ["garbage\n", ""])
def test_restore_ignores_a_damaged_state_file(tmp_path, content):
    write_steps(tmp_path, [10, 20, 30])
    (tmp_path / "checkpoint").write_text(content)
    checkpoint = make_checkpoint()
    latest, skipped = checkpoints.restore_newest(checkpoint, str(tmp_path))
    assert latest.endswith("ckpt-30") and skipped == []
    assert int(checkpoint.step.numpy()) == 30


def truncate_data(prefix):
    data = checkpoints.files_of(prefix)[-1]
    assert ".data-" in data
    size = os.path.getsize(data)
    with open(data, "r+b") as handle:
        handle.truncate(size // 2)


def test_a_truncated_newest_checkpoint_is_skipped_reported_and_kept(tmp_path):
    write_steps(tmp_path, [10, 20, 30])
    truncate_data(str(tmp_path / "ckpt-30"))
    checkpoint = make_checkpoint()
    latest, skipped = checkpoints.restore_newest(checkpoint, str(tmp_path))
    assert latest.endswith("ckpt-20")
    assert float(checkpoint.weight.numpy()) == 20.0
    assert [os.path.basename(s["path"]) for s in skipped] == ["ckpt-30"]
    assert skipped[0]["reason"]
    # Moved aside, not deleted: a later save of step 30 cannot overwrite it.
    damaged = tmp_path / "damaged"
    assert sorted(os.listdir(damaged)) == [
        "ckpt-30.data-00000-of-00001",
        "ckpt-30.index",
    ]
    assert not (tmp_path / "ckpt-30.index").exists()


def test_when_no_checkpoint_restores_nothing_is_moved(tmp_path):
    write_steps(tmp_path, [10])
    truncate_data(str(tmp_path / "ckpt-10"))
    before = names(tmp_path)
    latest, skipped = checkpoints.restore_newest(make_checkpoint(), str(tmp_path))
    assert latest is None and len(skipped) == 1
    assert names(tmp_path) == before


def test_an_index_without_data_counts_as_damaged(tmp_path):
    write_steps(tmp_path, [10, 20])
    os.remove(checkpoints.files_of(str(tmp_path / "ckpt-20"))[-1])
    latest, skipped = checkpoints.restore_newest(make_checkpoint(), str(tmp_path))
    assert latest.endswith("ckpt-10") and len(skipped) == 1


def test_pruning_keeps_checkpoints_the_writer_does_not_know(tmp_path):
    write_steps(tmp_path, [10, 20, 30])
    # The state file is lost: the next run knows none of the three.
    os.remove(tmp_path / "checkpoint")
    checkpoint = make_checkpoint()
    known = checkpoints.read_state_file(str(tmp_path)) or []
    writer = checkpoints.CheckpointWriter(checkpoint, str(tmp_path), 2, known=known)
    for step in (40, 50, 60):
        writer.save(step)
    steps = [s for s, _ in checkpoints.scan(str(tmp_path))]
    assert steps == [10, 20, 30, 50, 60]
    # The state file names them all, newest last.
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-60")


def test_pruning_includes_checkpoints_an_intact_state_file_listed(tmp_path):
    write_steps(tmp_path, [10, 20, 30])
    known = checkpoints.read_state_file(str(tmp_path))
    writer = checkpoints.CheckpointWriter(make_checkpoint(), str(tmp_path), 2, known)
    writer.save(40)
    assert [s for s, _ in checkpoints.scan(str(tmp_path))] == [30, 40]


def test_remove_partial_writes_removes_only_temp_files(tmp_path):
    write_steps(tmp_path, [10])
    (tmp_path / "ckpt-20_temp").mkdir()
    (tmp_path / "ckpt-20_temp" / "part-00000").write_bytes(b"x" * 100)
    checkpoints.remove_partial_writes(str(tmp_path))
    assert "ckpt-20_temp" not in names(tmp_path)
    assert "ckpt-10.index" in names(tmp_path)


def test_a_failed_write_removes_its_files_and_keeps_the_others(tmp_path, monkeypatch):
    writer = write_steps(tmp_path, [10])
    before = names(tmp_path)

    def fail(prefix, **_):
        os.makedirs(prefix + "_temp_1234")
        with open(prefix + ".index", "w") as handle:
            handle.write("partial")
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    monkeypatch.setattr(writer.checkpoint, "write", fail)
    with pytest.raises(checkpoints.CheckpointWriteError, match="No space left"):
        writer.save(20)
    assert names(tmp_path) == before


def failing_once(writer, message="No space left on device"):
    """Makes the writer's next write fail like a full disk, then work again."""
    real, calls = writer.checkpoint.write, []

    def write(prefix, **kwargs):
        calls.append(prefix)
        if len(calls) == 1:
            raise tf.errors.ResourceExhaustedError(None, None, message)
        return real(prefix, **kwargs)

    writer.checkpoint.write = write
    return calls


def test_a_full_disk_prunes_beyond_keep_minus_one_and_retries_once(tmp_path):
    # The README's advice: lower --keep-checkpoints and rerun. The old
    # checkpoints are pruned only after a save, which the full disk stops.
    old = write_steps(tmp_path, [10, 20, 30])
    writer = checkpoints.CheckpointWriter(
        old.checkpoint,
        str(tmp_path),
        keep=2,
        known=[p for _, p in checkpoints.scan(str(tmp_path))],
    )
    calls = failing_once(writer)
    writer.save(40)
    assert len(calls) == 2
    assert [step for step, _ in checkpoints.scan(str(tmp_path))] == [30, 40]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-40")


def test_the_retry_never_removes_the_last_checkpoint_and_fails_cleanly(tmp_path):
    old = write_steps(tmp_path, [10, 20])
    writer = checkpoints.CheckpointWriter(
        old.checkpoint,
        str(tmp_path),
        keep=1,
        known=[p for _, p in checkpoints.scan(str(tmp_path))],
    )
    calls = []

    def always_full(prefix, **_):
        calls.append(prefix)
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")

    writer.checkpoint.write = always_full
    with pytest.raises(checkpoints.CheckpointWriteError, match="No space left"):
        writer.save(30)
    assert len(calls) == 2  # one retry only
    assert [step for step, _ in checkpoints.scan(str(tmp_path))] == [20]


def test_other_write_errors_are_not_retried_and_prune_nothing(tmp_path):
    old = write_steps(tmp_path, [10, 20, 30])
    writer = checkpoints.CheckpointWriter(
        old.checkpoint,
        str(tmp_path),
        keep=2,
        known=[p for _, p in checkpoints.scan(str(tmp_path))],
    )
    calls = failing_once(writer, "Permission denied")
    with pytest.raises(checkpoints.CheckpointWriteError, match="Permission denied"):
        writer.save(40)
    assert len(calls) == 1
    assert [step for step, _ in checkpoints.scan(str(tmp_path))] == [10, 20, 30]


def test_a_checkpoint_of_another_model_is_not_called_damaged(tmp_path):
    # Readable, but its variables have other names or shapes: someone's
    # good checkpoint, to be reported as such and left where it is.
    other = tf.train.Checkpoint(
        weight=tf.Variable([1.0, 2.0]), step=tf.Variable(0, dtype=tf.int64)
    )
    other.write(str(tmp_path / "ckpt-10"))
    before = names(tmp_path)
    with pytest.raises(checkpoints.CheckpointMismatchError) as info:
        checkpoints.restore_newest(make_checkpoint(), str(tmp_path))
    assert info.value.prefix.endswith("ckpt-10")
    assert "incompatible tensor" in info.value.reason
    assert names(tmp_path) == before


def test_a_checkpoint_of_other_variables_is_not_called_damaged(tmp_path):
    tf.train.Checkpoint(bias=tf.Variable(1.0)).write(str(tmp_path / "ckpt-10"))
    with pytest.raises(checkpoints.CheckpointMismatchError, match="not bound"):
        checkpoints.restore_newest(make_checkpoint(), str(tmp_path))
    assert not (tmp_path / "damaged").exists()


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_file_named_damaged_is_left_and_another_folder_used(tmp_path, kind):
    write_steps(tmp_path, [10, 20])
    truncate_data(str(tmp_path / "ckpt-20"))
    if kind == "file":
        (tmp_path / "damaged").write_text("mine\n")
    else:
        (tmp_path.parent / f"{tmp_path.name}-elsewhere").mkdir()
        (tmp_path / "damaged").symlink_to(
            tmp_path.parent / f"{tmp_path.name}-elsewhere"
        )
    latest, skipped = checkpoints.restore_newest(make_checkpoint(), str(tmp_path))
    assert latest.endswith("ckpt-10")
    assert skipped[0]["moved_to"] == str(tmp_path / "damaged.1")
    assert sorted(os.listdir(tmp_path / "damaged.1")) == [
        "ckpt-20.data-00000-of-00001",
        "ckpt-20.index",
    ]
    if kind == "file":
        assert (tmp_path / "damaged").read_text() == "mine\n"
    else:
        assert os.listdir(tmp_path.parent / f"{tmp_path.name}-elsewhere") == []
