"""Taking over a run's directories and finding where to continue.

In this order, because nothing may be created before the settings and the
data are known to be good, and nothing may be resumed before the run owns
the checkpoint directory:

1. `inspect` reads what the checkpoint directory holds, changing nothing
   (the data loader needs it: a saved vocabulary only counts together with
   a checkpoint of the same run);
2. `claimed` refuses run files planted as links, creates the directories,
   locks the checkpoint directory and the logdir (the chief only), opens
   the log file, checks that the directory did not
   change since `inspect`, and removes half-written checkpoint files of a
   killed run;
3. `restore` restores the newest checkpoint that restores cleanly.

`claimed` and `restore` take the run's `RunPaths`: where the directories
are, and whether this process is the chief, which alone creates, locks and
changes them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os

from tfnorm import _safe_io
from tfnorm._errors import setting_key
from tfnorm.settings.config_error import ConfigError
from tfnorm.training.data.vocabulary import VOCABULARY_FILE
from tfnorm.training.rundir import checkpoints, evaluations, outputs, run_identity
from tfnorm.training.rundir.lock import DirectoryLock, DirectoryLockedError


@dataclasses.dataclass
class Resumed:
    """Where a run continues from.

    Attributes:
        checkpoint: the restored checkpoint's prefix, or None (fresh start).
        skipped: damaged checkpoints passed over, each `{"path", "reason"}`
            (and `"moved_to"` once moved aside).
        known: checkpoint prefixes an intact state file listed, which the
            run may prune like its own.
    """

    checkpoint: str | None = None
    skipped: list = dataclasses.field(default_factory=list)
    known: list = dataclasses.field(default_factory=list)


def inspect(checkpoint_dir):
    """`(saved run config or None, has_checkpoint)`, read without changing anything."""
    return (
        run_identity.read_run_config(checkpoint_dir),
        bool(checkpoints.scan(checkpoint_dir)),
    )


@contextlib.contextmanager
def claimed(paths, log, inspected):
    """Refuses linked run files, creates the directories, locks them, opens the log.

    Only the chief creates and locks (`paths.owns_directories`). Both the
    checkpoint directory and the logdir are locked (`tfnorm.lock` in each;
    one lock when they are the same directory): two runs sharing a logdir
    would overwrite each other's `summary.json`, vocabulary and exported
    model and mix their TensorBoard curves, so the second is refused even
    with its own checkpoint directory.
    A live holder of a lock is named in the error, a dead one's lock is taken
    over with a warning. The locks are released when the block ends.

    A run file planted as a symbolic link (the lock, `summary.json`,
    `run_config.json`, the vocabulary, the state file, the export) is refused
    before anything is written, its target left as it was (see
    `tfnorm._safe_io`).

    Args:
        paths: the run's `RunPaths`.
        log: the run's `ProgressLog`; its file is opened here.
        inspected: what `inspect` read from the checkpoint directory.

    Raises:
        ConfigError: a run file is a link, a directory or the log file cannot
            be created, a directory is locked, or the checkpoint directory
            changed since `inspected` was read.
    """
    owner = paths.owns_directories
    if owner:
        _refuse_linked_run_files(paths)
    locks = []
    try:
        stale = []
        if owner:
            for key, directory in paths.directories():
                _make_directory(key, directory)
            for key, directory in _directories_to_lock(paths):
                locks.append(DirectoryLock(directory))
                stale.append(_acquire(locks[-1], key, directory))
        _open_log_file(log, paths.log_file)
        for holder in dict.fromkeys(text for text in stale if text):
            log.line(
                f"warning: took over the lock left by a run that is gone ({holder})"
            )
        if owner:
            _check_unchanged(paths.checkpoint_dir, inspected)
            checkpoints.remove_partial_writes(paths.checkpoint_dir)
        yield
    finally:
        for lock in reversed(locks):
            lock.release()


def _refuse_linked_run_files(paths):
    from tfnorm import _keras

    run_files_in = {
        "checkpoint_dir": (
            DirectoryLock.LOCK_FILE,
            run_identity.RUN_CONFIG_FILE,
            VOCABULARY_FILE,
            checkpoints.STATE_FILE,
            evaluations.EVALUATION_FILE,
        ),
        "logdir": (
            DirectoryLock.LOCK_FILE,
            outputs.SUMMARY_FILE,
            VOCABULARY_FILE,
            os.path.basename(_keras.model_path("model", _keras.NATIVE_FORMAT)),
        ),
    }
    for key, directory in paths.directories():
        names = run_files_in[key]
        try:
            _safe_io.refuse_links([os.path.join(directory, name) for name in names])
        except OSError as error:
            raise ConfigError(key, f"{error}. Received: {key}={directory!r}") from None


def _directories_to_lock(paths):
    """`(setting, path)` of each directory to lock, the checkpoint directory first."""
    try:
        same = os.path.samefile(paths.logdir, paths.checkpoint_dir)
    except OSError:
        same = False
    chosen = [("checkpoint_dir", paths.checkpoint_dir)]
    return chosen if same else chosen + [("logdir", paths.logdir)]


def restore(checkpoint, paths, log):
    """Restores the newest clean checkpoint of the run; returns `Resumed`.

    Every process restores from the run's checkpoint directory. Damaged
    checkpoints are reported in the log; the chief moves those newer than
    the restored one aside (see `checkpoints.restore_newest`) and rewrites
    a state file that does not name the restored checkpoint as the newest.

    Args:
        checkpoint: the run's `tf.train.Checkpoint`, every variable built.
        paths: the run's `RunPaths`.
        log: the run's `ProgressLog`.

    Raises:
        ConfigError: checkpoints exist but none restores. Starting over would
            bury them, so the user decides.
    """
    directory = paths.checkpoint_dir
    known = checkpoints.read_state_file(directory) or []
    try:
        latest, skipped = checkpoints.restore_newest(
            checkpoint, directory, quarantine=paths.owns_directories
        )
    except checkpoints.CheckpointMismatchError as error:
        raise ConfigError(
            "checkpoint_dir",
            f"{error.prefix} belongs to another model or other settings: it "
            f"reads cleanly, but its variables do not fit this run's model "
            f"({error.reason}). It is left as it is; use another "
            f"{setting_key('checkpoint_dir')}, or the settings it was trained with. Received: "
            f"checkpoint_dir={directory!r}",
        ) from None
    for entry in skipped:
        moved = f"; moved to {entry['moved_to']}" if "moved_to" in entry else ""
        log.line(
            f"warning: skipped damaged checkpoint {entry['path']} "
            f"({entry['reason']}){moved}"
        )
    if latest is None and skipped:
        raise ConfigError(
            "checkpoint_dir",
            f"none of the {len(skipped)} checkpoint(s) in {directory} restores "
            "(see the warnings above); they are left as they are. Move them "
            f"away to start over, or use another {setting_key('checkpoint_dir')}. Received: "
            f"checkpoint_dir={directory!r}",
        )
    if latest and paths.owns_directories and known[-1:] != [latest]:
        # A kill between a checkpoint's write and the state file's left the
        # state file naming an older one; a rerun with no step left to train
        # would never write it again, and `tf.train.latest_checkpoint` would
        # go on returning the older checkpoint.
        checkpoints.write_state_file(directory)
    return Resumed(latest, skipped, known)


def _check_unchanged(directory, inspected):
    if inspect(directory) != inspected:
        raise ConfigError(
            "checkpoint_dir",
            f"{directory} changed while this run was reading its data (another "
            f"run used it); rerun the command. Received: checkpoint_dir={directory!r}",
        )


def _make_directory(key, path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            key,
            f"{key} cannot be created: {error.strerror or error}. "
            f"Received: {key}={path!r}",
        ) from None


def _acquire(lock, key, directory):
    flag = "--" + key.replace("_", "-")
    try:
        return lock.acquire()
    except DirectoryLockedError as error:
        raise ConfigError(
            key,
            f"{error}. Wait for it to end, or use another {flag}. "
            f"Received: {key}={directory!r}",
        ) from None
    except _safe_io.UnsafeFileError as error:
        raise ConfigError(key, f"{error}. Received: {key}={directory!r}") from None
    except OSError as error:
        raise ConfigError(
            key,
            f"{key} is not writable: {error.strerror or error}. "
            f"Received: {key}={directory!r}",
        ) from None


def _open_log_file(log, path):
    try:
        log.open_file()
    except _safe_io.UnsafeFileError as error:
        raise ConfigError("log_file", f"{error}. Received: log_file={path!r}") from None
    except OSError as error:
        raise ConfigError(
            "log_file",
            f"log_file cannot be opened: {error.strerror or error}. "
            f"Received: log_file={path!r}",
        ) from None
