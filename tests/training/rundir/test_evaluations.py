"""`tfnorm.training.rundir.evaluations`: the record of the last evaluation
and the best checkpoint."""

from __future__ import annotations

import os

from tfnorm._keras import tf
from tfnorm.training.rundir.evaluations import BestCheckpoint, EvaluationRecord


def test_the_record_reads_back_and_only_the_chief_writes_it(tmp_path):
    EvaluationRecord(str(tmp_path), write=False).write(3, {"val_loss": 1.0}, None)
    assert EvaluationRecord(str(tmp_path)).read() == {}
    (tmp_path / "evaluation.json.tmp123.ab").write_text("{")  # a killed write
    record = EvaluationRecord(str(tmp_path))
    record.write(3, {"val_loss": 1.0}, {"step": 3, "val_loss": 1.0})
    assert record.read()["best"] == {"step": 3, "val_loss": 1.0}
    assert sorted(os.listdir(tmp_path)) == ["evaluation.json"]
    (tmp_path / "evaluation.json").write_text("[garbage")
    assert record.read() == {}


def test_the_best_checkpoint_keeps_one_and_drops_a_killed_save(tmp_path):
    checkpoint = tf.train.Checkpoint(v=tf.Variable(1.0))
    best = BestCheckpoint(checkpoint, str(tmp_path))
    best.save(2)
    (tmp_path / "best" / "ckpt-5_temp_abc").mkdir()  # a save a kill interrupted
    best = BestCheckpoint(checkpoint, str(tmp_path))
    assert best.save(4) == str(tmp_path / "best" / "ckpt-4")
    names = sorted(os.listdir(tmp_path / "best"))
    assert names == ["checkpoint", "ckpt-4.data-00000-of-00001", "ckpt-4.index"]
    assert tf.train.latest_checkpoint(str(tmp_path / "best")).endswith("ckpt-4")
    assert BestCheckpoint(checkpoint, str(tmp_path / "w"), scratch=True).save(1) is None
    assert not (tmp_path / "w" / "best").exists()
