"""Checkpoint files of a run: finding, restoring, writing, pruning.

The files on disk are the truth, not the `checkpoint` state file: a garbled,
empty or stale state file must never make a rerun start from step 0 and
overwrite checkpoints it did not know about. So:

* resume scans `ckpt-<step>.index` files, tries them newest first, and uses
  the first that restores cleanly; damaged ones are reported with the reason
  and moved to `damaged/` (kept, never deleted, never overwritten); one that
  reads cleanly but holds other variables or shapes (another model's, or
  other settings') stops the resume with `CheckpointMismatchError`, and is
  left where it is;
* pruning (`keep_checkpoints`) deletes only checkpoints this run wrote or an
  intact state file listed, so checkpoints of unknown origin stay;
* a failed write removes its own partial files and raises
  `CheckpointWriteError`, leaving every earlier checkpoint intact; on a full
  disk, the writer first prunes down to `keep - 1` (never the newest) and
  tries once more.

The state file is still written (atomically, relative paths) so that
`tf.train.latest_checkpoint` and other tools keep working.
"""

from __future__ import annotations

import errno
import glob
import os
import re
import shutil

from tfnorm._errors import one_line
from tfnorm._keras import checkpoint_object_graph, tf
from tfnorm._safe_io import atomic_write_text

PREFIX = "ckpt"
STATE_FILE = "checkpoint"
DAMAGED_DIR = "damaged"
_INDEX = re.compile(rf"^{PREFIX}-(\d+)\.index$")
_STATE_LINE = re.compile(
    r'^(model_checkpoint_path|all_model_checkpoint_paths): "(.*)"$'
)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (its partial files are removed)."""


class CheckpointMismatchError(ValueError):
    """A readable checkpoint whose variables do not fit the model: it belongs
    to another model or other settings, and is not damaged."""

    def __init__(self, prefix, reason):
        super().__init__(reason)
        self.prefix = prefix
        self.reason = reason


def checkpoint_prefix(directory, step):
    return os.path.join(directory, f"{PREFIX}-{int(step)}")


def scan(directory):
    """`[(step, prefix)]` of every checkpoint whose index file is in `directory`,
    oldest first."""
    if not os.path.isdir(directory):
        return []
    found = []
    for name in os.listdir(directory):
        match = _INDEX.match(name)
        if match:
            step = int(match.group(1))
            found.append((step, checkpoint_prefix(directory, step)))
    return sorted(found)


def files_of(prefix):
    """The files making up the checkpoint `prefix` (index and data shards)."""
    return sorted(glob.glob(glob.escape(prefix) + ".index")) + sorted(
        glob.glob(glob.escape(prefix) + ".data-*")
    )


def read_state_file(directory):
    """Checkpoint prefixes an intact state file lists, or None if it is unreadable.

    "Intact" means every line parses and the file names at least the latest
    checkpoint; anything else (garbage, an empty file) gives None.
    """
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except (OSError, UnicodeDecodeError):
        return None
    listed, latest = [], None
    for line in lines:
        match = _STATE_LINE.match(line)
        if not match:
            return None
        name = match.group(2)
        prefix = name if os.path.isabs(name) else os.path.join(directory, name)
        if match.group(1) == "model_checkpoint_path":
            latest = prefix
        else:
            listed.append(prefix)
    if latest is None:
        return None
    return listed or [latest]


def write_state_file(directory):
    """Writes the state file naming every checkpoint in `directory`, oldest
    first, the newest as the latest."""
    names = [os.path.basename(prefix) for _, prefix in scan(directory)]
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    atomic_write_text(os.path.join(directory, STATE_FILE), "\n".join(lines) + "\n")


def restore_newest(checkpoint, directory, quarantine=True):
    """Restores the newest checkpoint in `directory` that restores cleanly.

    Args:
        checkpoint: the `tf.train.Checkpoint` to restore into; every variable
            must exist already (optimizer slots built), so that a later,
            successful restore overwrites whatever a damaged one half-wrote.
        directory: the checkpoint directory.
        quarantine: once one restores, move the damaged newer ones to
            `directory/damaged/`, where no save or pruning will touch them.
            Only the process that owns the directory (the chief) should.

    Returns:
        `(prefix or None, skipped)`, `skipped` being `[{"path", "reason"}]`
        for each damaged checkpoint newer than the one restored (every one
        when none restores; those are left in place).
    """
    skipped = []
    for _, prefix in reversed(scan(directory)):
        try:
            checkpoint.read(prefix).assert_existing_objects_matched()
        except Exception as error:  # every reader error means "damaged"...
            if _is_mismatch(error, prefix):
                # ...but one that reads and names other variables or shapes
                # is someone's good checkpoint: not moved, not passed over.
                raise CheckpointMismatchError(prefix, one_line(error)) from None
            skipped.append({"path": prefix, "reason": one_line(error)})
            continue
        if quarantine:
            # Moved so that this run's own saves at those steps cannot
            # overwrite them.
            for entry in skipped:
                entry["moved_to"] = _move_to_damaged(entry["path"])
        return prefix, skipped
    return None, skipped


def restore_model(model, prefix, key="model"):
    """Restores every variable of `model` from the checkpoint `prefix`, or none.

    For inference, where a weight left at its random start is a silent
    wrong answer: the checkpoint's object `key` (the run's model) must hold
    exactly the model's variables, each of the model's shape. Two checks,
    because each misses what the other catches: every variable of `model`
    must find its value (`assert_existing_objects_matched`: a norm with
    other weights, a missing final norm), and the checkpoint's model must
    hold no variable the rebuilt model lacks (a head that was not tied to
    the embedding, a deeper model), counted in the checkpoint's object graph.
    Optimizer slots and the step counter are not the model's and are ignored.

    Raises:
        CheckpointMismatchError: the variables differ (the reason says how).
        Exception: whatever TensorFlow raises for a damaged checkpoint.
    """
    try:
        status = tf.train.Checkpoint(**{key: model}).read(prefix)
        # Silences the warnings about the optimizer's values, which are not
        # wanted; the model's are checked here and below.
        status.expect_partial().assert_existing_objects_matched()
    except AssertionError as error:
        raise CheckpointMismatchError(prefix, one_line(error, limit=160)) from None
    except ValueError as error:
        if "incompatible tensor" not in str(error) and "shape" not in str(error):
            raise
        raise CheckpointMismatchError(prefix, one_line(error, limit=160)) from None
    saved = _variables_under(prefix, key)
    built = len({id(v) for v in model.weights})
    if saved != built:
        raise CheckpointMismatchError(
            prefix,
            f"the checkpoint's {key} has {saved} variables, the rebuilt one {built}",
        )


def _variables_under(prefix, key):
    """How many variables the checkpoint `prefix` holds below its object `key`."""
    graph = checkpoint_object_graph(prefix)
    stack = [c.node_id for c in graph.nodes[0].children if c.local_name == key]
    seen = set()
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(child.node_id for child in graph.nodes[node].children)
    return sum(
        any(a.name == "VARIABLE_VALUE" for a in graph.nodes[node].attributes)
        for node in seen
    )


def _damaged_dir(directory):
    """`directory/damaged`, created; or `damaged.1`, ... when that name is
    taken by a file or a link (never moved into, never replaced)."""
    target, number = os.path.join(directory, DAMAGED_DIR), 0
    while True:
        if not os.path.lexists(target):
            try:
                os.mkdir(target)
            except FileExistsError:
                continue  # made meanwhile: look at it again
            return target
        if os.path.isdir(target) and not os.path.islink(target):
            return target
        number += 1
        target = os.path.join(directory, f"{DAMAGED_DIR}.{number}")


def _is_mismatch(error, prefix):
    """Whether `error` says the checkpoint's variables are not the model's
    (names or shapes), while every file of it reads cleanly."""
    mismatch = isinstance(error, AssertionError) or (
        isinstance(error, ValueError) and "incompatible tensor" in str(error)
    )
    if not mismatch:
        return False
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)  # a cut data shard fails here
    except Exception:  # noqa: BLE001 - any reader error: damaged after all
        return False
    return True


def _move_to_damaged(prefix):
    target = _damaged_dir(os.path.dirname(prefix))
    for path in files_of(prefix):
        destination = os.path.join(target, os.path.basename(path))
        if os.path.exists(destination):
            stem, number = destination, 1
            while os.path.exists(f"{stem}.{number}"):
                number += 1
            destination = f"{stem}.{number}"
        os.replace(path, destination)
    return target


class CheckpointWriter:
    """Writes `ckpt-<step>` files, the state file, and prunes old checkpoints.

    Args:
        checkpoint: the `tf.train.Checkpoint` to write.
        directory: where to write.
        keep: how many of the checkpoints this writer manages to keep.
        known: prefixes it may prune besides its own (those an intact state
            file listed when the run started); anything else is left alone.
    """

    def __init__(self, checkpoint, directory, keep, known=()):
        self.checkpoint = checkpoint
        self.directory = directory
        self.keep = keep
        on_disk = {prefix for _, prefix in scan(directory)}
        self.managed = [prefix for prefix in known if prefix in on_disk]

    def save(self, step):
        """Writes the checkpoint of `step`; returns its prefix.

        On a full disk (ENOSPC, EDQUOT) the managed checkpoints beyond
        `keep - 1` (always keeping the newest) are pruned and the write is
        tried once more: pruning normally follows a successful save, so
        without this, lowering `keep_checkpoints` on a full disk, as the
        README advises, could never take effect.

        Raises:
            CheckpointWriteError: the write failed; no partial file remains.
        """
        prefix = checkpoint_prefix(self.directory, step)
        try:
            return self._save_and_prune(prefix)
        except CheckpointWriteError as error:
            if not (_is_disk_full(error.__cause__) and self._prune_for_space()):
                raise
        return self._save_and_prune(prefix)

    def _save_and_prune(self, prefix):
        try:
            os.makedirs(self.directory, exist_ok=True)
            path = self.checkpoint.write(prefix)
            self.managed = [p for p in self.managed if p != prefix] + [prefix]
            write_state_file(self.directory)
        except (OSError, tf.errors.OpError) as error:
            self._remove_partial(prefix)
            raise CheckpointWriteError(
                f"could not write checkpoint {prefix}: {one_line(error)}"
            ) from error
        self._prune()
        return path

    def _prune_for_space(self):
        """Prunes down to `keep - 1` (at least one) checkpoints; True if any went."""
        if len(self.managed) <= max(self.keep - 1, 1):
            return False
        while len(self.managed) > max(self.keep - 1, 1):
            for path in files_of(self.managed.pop(0)):
                os.remove(path)
        try:
            write_state_file(self.directory)
        except OSError:
            pass  # the retry writes it again
        return True

    def _prune(self):
        while len(self.managed) > self.keep:
            for path in files_of(self.managed.pop(0)):
                os.remove(path)
        write_state_file(self.directory)

    def _remove_partial(self, prefix):
        self.managed = [p for p in self.managed if p != prefix]
        for path in files_of(prefix) + glob.glob(glob.escape(prefix) + "_temp*"):
            shutil.rmtree(path, ignore_errors=True)
            if os.path.exists(path):
                os.remove(path)
        for temporary in glob.glob(os.path.join(self.directory, f"{STATE_FILE}.tmp*")):
            os.remove(temporary)


def _is_disk_full(error):
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error)
    return "No space left on device" in text or "Disk quota exceeded" in text


def remove_partial_writes(directory):
    """Deletes `ckpt-*_temp*` and state-file leftovers of writes a killed
    process began."""
    leftovers = glob.glob(os.path.join(glob.escape(directory), f"{PREFIX}-*_temp*"))
    leftovers += glob.glob(os.path.join(glob.escape(directory), f"{STATE_FILE}.tmp*"))
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
        if os.path.exists(path):
            os.remove(path)
