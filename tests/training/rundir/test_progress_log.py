"""`tfnorm.training.rundir.progress_log`: the progress bar and the run's log file."""

from __future__ import annotations

import io

import pytest

from tfnorm.training.rundir import progress_log


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    "stream_class, expect_bar", [(_Terminal, True), (io.StringIO, False)]
)
def test_progress_bar_only_when_stdout_is_a_terminal(
    tmp_path, stream_class, expect_bar
):
    stream = stream_class()
    log_file = tmp_path / "progress.log"
    with progress_log.ProgressLog(stream, str(log_file)) as log:
        log.open_file()
        log.bar(3, 10, "step 3/10")
        log.line("step 3/10 loss 0.5")
        log.bar(4, 10, "step 4/10")
    shown = stream.getvalue()
    assert ("[#######" in shown and "\r" in shown) is expect_bar
    assert "step 3/10 loss 0.5\n" in shown
    # The log file gets whole lines only, never the bar.
    assert log_file.read_text().count("\n") == 1 and "\r" not in log_file.read_text()


def test_log_file_is_created_only_when_opened_and_gets_earlier_lines(tmp_path):
    log_file = tmp_path / "logs" / "train.log"
    with progress_log.ProgressLog(io.StringIO(), str(log_file)) as log:
        log.line("ignoring vocabulary.json")
        assert not (tmp_path / "logs").exists()
        log.open_file()
        log.line("starting from step 0")
    lines = log_file.read_text().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "ignoring vocabulary.json",
        "starting from step 0",
    ]


def test_a_symlinked_log_file_is_refused_and_its_target_left_as_it_was(tmp_path):
    secret = tmp_path / "notes.txt"
    secret.write_text("mine\n")
    log_file = tmp_path / "train.log"
    log_file.symlink_to(secret)
    log = progress_log.ProgressLog(io.StringIO(), str(log_file))
    log.line("starting")
    with pytest.raises(OSError, match="train.log is a symbolic link"):
        log.open_file()
    log.close()
    assert secret.read_text() == "mine\n"


class _ClosedPipe(io.StringIO):
    """stdout after `| head -2` exited (EPIPE) or a terminal closed (EIO)."""

    def __init__(self, error):
        super().__init__()
        self.error = error
        self.writes = 0

    def write(self, text):
        self.writes += 1
        raise self.error


@pytest.mark.parametrize(
    "error",
    [BrokenPipeError(32, "Broken pipe"), OSError(5, "Input/output error")],
    ids=["EPIPE", "EIO"],
)
def test_a_closed_stdout_is_dropped_and_the_log_file_kept(tmp_path, error):
    stream = _ClosedPipe(error)
    log_file = tmp_path / "train.log"
    with progress_log.ProgressLog(stream, str(log_file)) as log:
        log.open_file()
        log.line("step 1/10")  # must not raise
        log.bar(2, 10, "step 2/10")
        log.line("step 2/10")
    assert stream.writes == 1  # never tried again
    lines = log_file.read_text().splitlines()
    assert "step 1/10" in lines[0] and "step 2/10" in lines[-1]
    assert any("stdout" in line and "log file only" in line for line in lines)
