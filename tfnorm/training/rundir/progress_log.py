"""`ProgressLog`: the run's progress on screen and in the log file.

The log file (`log_file`) is opened only once the settings and the data are
known to be good, so a rejected run leaves nothing behind.
"""

from __future__ import annotations

import datetime
import os

from tfnorm._safe_io import open_in_place


class ProgressLog:
    """Writes progress to a stream and the log file, line by line.

    A log file or a pipe gets one complete line per report so that
    `tail -f` and `nohup` show progress as it happens; a terminal gets a
    progress bar redrawn in place, with the same lines printed above it.
    Lines logged before `open_file` are written to the file when it opens.

    A stream that stops taking writes (`tfnorm train ... | head -2` once
    head exits: EPIPE; a closed terminal: EIO) is dropped with a note in the
    log file, and the run goes on writing the log file only: losing the
    screen must not lose the run. Its file descriptor is pointed at
    /dev/null, so that Python's own flush at exit finds nothing to complain
    about.
    """

    def __init__(self, stream, log_file=None):
        self.stream = stream
        self.is_tty = bool(getattr(stream, "isatty", lambda: False)())
        self.log_file = log_file
        self.file = None
        self._pending = []
        self._bar_shown = False

    def open_file(self):
        """Creates the log file's directory and opens it for appending.

        Raises:
            UnsafeFileError: the log file is a link or not a regular file
                (see `tfnorm._safe_io`); nothing is written to it.
        """
        if not self.log_file or self.file is not None:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.log_file)), exist_ok=True)
        descriptor = open_in_place(
            self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT
        )
        self.file = os.fdopen(descriptor, "a", buffering=1, encoding="utf-8")
        for line in self._pending:
            self.file.write(line + "\n")
        self._pending = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._clear_bar()
        if self.file:
            self.file.close()
            self.file = None

    def line(self, text):
        stamped = f"[{datetime.datetime.now().strftime('%H:%M:%S')}] {text}"
        self._clear_bar()
        self._to_file(stamped)
        self._write_stream(stamped + "\n")

    def _to_file(self, stamped):
        if self.file:
            self._write_file(stamped)
        elif self.log_file:
            self._pending.append(stamped)

    def _write_stream(self, text):
        if self.stream is None:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError) as error:  # ValueError: a closed file
            self._drop_stream(error)

    def _drop_stream(self, error):
        stream, self.stream = self.stream, None
        self._bar_shown = False
        try:
            descriptor = stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, descriptor)
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass  # not a real file (a notebook's stream): nothing flushes it later
        where = "the log file only" if self.log_file else "summary.json only"
        reason = getattr(error, "strerror", None) or error
        self._to_file(
            f"[{datetime.datetime.now().strftime('%H:%M:%S')}] stdout closed "
            f"({reason}); the run goes on, progress in {where}"
        )

    def _write_file(self, text):
        try:
            self.file.write(text + "\n")
        except OSError as error:
            # A full disk must not end the run from the log; say it once.
            self.file = None
            self._write_stream(f"log file {self.log_file} no longer written: {error}\n")

    def bar(self, step, total, text):
        if not self.is_tty or self.stream is None:
            return
        width = 24
        filled = int(width * step / max(total, 1))
        self._write_stream(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}\x1b[K")
        self._bar_shown = self.stream is not None

    def _clear_bar(self):
        if self._bar_shown:
            self._bar_shown = False
            self._write_stream("\r\x1b[K")
