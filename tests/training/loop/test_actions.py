"""`tfnorm.training.loop.actions`: the cadence, checkpointing and the NaN guard."""

from __future__ import annotations

from tests.training.fakes import CADENCE, FakeModel, FakeWriter, Log, ones
from tfnorm.training.loop import actions, reporting
from tfnorm.training.loop.actions import Cadence
from tfnorm.training.loop.driver import Stop, run_loop


def test_cadence_counts_steps_and_adds_the_last_step():
    assert [s for s in range(1, 13) if CADENCE.checkpoint_due(s)] == [4, 8, 12]
    assert [CADENCE.epoch(s) for s in (1, 6, 7, 12)] == [1, 1, 2, 2]
    odd = Cadence(steps_per_epoch=13, total_steps=39, checkpoint_every=200)
    assert [s for s in range(1, 40) if odd.checkpoint_due(s)] == [39]


def test_epoch_checkpoints_are_added_only_when_asked():
    cadence = Cadence(6, 12, 4, epoch_checkpoints=True)
    assert [s for s in range(1, 13) if cadence.checkpoint_due(s)] == [4, 6, 8, 12]


def test_checkpoint_is_written_before_evaluation_at_epoch_end():
    cadence = Cadence(6, 12, 4, epoch_checkpoints=True)
    events, log = [], Log()
    evaluation = reporting.Evaluation(
        lambda: events.append(("eval",)) or {"val_loss": 1.0, "val_accuracy": 0.5},
        None,
        cadence,
        log,
    )
    checkpointing = actions.Checkpointing(FakeWriter(events), cadence, log)
    run_loop(ones, 0, 12, [checkpointing, evaluation])
    assert events == [
        ("save", 4),
        ("save", 6),
        ("eval",),
        ("save", 8),
        ("save", 12),
        ("eval",),
    ]
    assert checkpointing.last_path == "ckpt-12"


def test_a_failed_checkpoint_write_ends_the_run_as_failed():
    events, log = [], Log()
    checkpointing = actions.Checkpointing(FakeWriter(events, fail_at=8), CADENCE, log)
    result = run_loop(ones, 0, 12, [checkpointing])
    assert (result.status, result.step) == ("failed", 8)
    assert "could not write checkpoint ckpt-8" in result.stop.reason
    assert checkpointing.last_path == "ckpt-4"


def test_a_stop_that_asks_for_a_save_gets_one_unless_just_saved():
    events, log = [], Log()
    checkpointing = actions.Checkpointing(FakeWriter(events), CADENCE, log)
    checkpointing.on_stop(3, Stop("terminated", save=True))
    checkpointing.on_step_end(4, {})
    checkpointing.on_stop(4, Stop("terminated", save=True))
    checkpointing.on_stop(5, Stop("nan", save=False))
    assert events == [("save", 3), ("save", 4)]


def test_scratch_checkpoints_are_deleted_after_each_save(tmp_path):
    scratch = tmp_path / ".worker_1"
    scratch.mkdir()
    checkpointing = actions.Checkpointing(
        FakeWriter([], str(scratch)), CADENCE, Log(), scratch=True
    )
    checkpointing.save(4)
    assert not scratch.exists() and checkpointing.last_path is None


def test_nan_loss_stops_without_counting_the_step():
    log = Log()
    guard = actions.NanGuard(FakeModel(), CADENCE, log, lambda: "ckpt-4")
    assert guard.on_step_end(5, {"loss": 0.3}) is None
    stop = guard.on_step_end(5, {"loss": float("nan")})
    assert (stop.status, stop.save, stop.counted) == ("nan", False, False)
    assert "loss is nan at step 5" in stop.reason and "stays ckpt-4" in stop.reason
    assert "NaN: loss is nan" in log.text


def test_non_finite_weights_stop_before_a_checkpoint_or_a_signal_save():
    model = FakeModel(float("inf"))
    guard = actions.NanGuard(model, CADENCE, Log(), lambda: None)
    # Not a checkpoint step: weights are not read (that waits for the device).
    assert guard.on_step_end(6, {"loss": 0.1}) is None
    stop = guard.on_step_end(8, {"loss": 0.1})
    assert stop.status == "nan" and "weights are no longer finite" in stop.reason
    assert "none saved yet" in stop.reason
    replaced = guard.on_stop(5, Stop("terminated", save=True))
    assert replaced.status == "nan" and not replaced.save
    assert guard.on_stop(5, Stop("nan", save=False)) is None
