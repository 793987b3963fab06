"""A run's final model, exported only as what it has been checked to be.

A model saved whole can still come back wrong: a layer whose config leaves
out an argument, or whose weights are not all saved, reloads without an
error and computes something else. So the export is loaded back in this
process (tfnorm's classes registered, no `custom_objects`) and run on a
batch of training inputs beside the trained model, before anything takes
the name `model.keras` (or the SavedModel directory `model` on TF 2.9):

* it reloads and gives the trained model's outputs: the export is the
  model (`kind` "model");
* it cannot be saved, does not reload, or reloads with other outputs: the
  export is the weights (`model.weights.h5`, from `save_weights`) and the
  one line of Python that rebuilds the model and loads them (`kind`
  "weights", with the `reason`). A whole model from an earlier export is
  removed, so the directory never offers a model the run did not check.

Every file is written under a temporary name (`model.tmp<pid>.<random>...`)
and renamed into place. A process killed in between leaves that name
behind; `remove_leftovers` deletes such names at the next start and the next
export of a run in the same directory (which the run has locked, so no
other process is writing them).
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shutil

import numpy as np

from tfnorm import _keras
from tfnorm._safe_io import file_sha256, refuse_links

#: The weights file of an export that is not the whole model.
WEIGHTS_FILE = "model.weights.h5"

_BASE = "model"
# What an interrupted export leaves: a temporary file or directory, or the
# previous SavedModel directory moved aside while the new one took its name.
_LEFTOVER = re.compile(
    r"^model\.(tmp|old)\d+\.[0-9a-f]{8}(\.keras|\.h5|\.weights\.h5)?$"
)


@dataclasses.dataclass
class Export:
    """What an export wrote.

    Attributes:
        kind: "model" (the whole model, checked by reloading it) or
            "weights" (the weights only).
        path: the file or SavedModel directory written.
        load: one line of Python that loads it.
        reason: why the whole model is not the export (None for "model").
        sha256: the SHA-256 of each file that goes with the export (the
            model's file, `vocabulary.json`, `labels.json`), by its name
            relative to the directory: `tfnorm predict` refuses a file of
            another run in its place.
    """

    kind: str
    path: str
    load: str
    reason: str | None = None
    sha256: dict = dataclasses.field(default_factory=dict)

    def to_dict(self):
        return dataclasses.asdict(self)

    def describe(self):
        """The run's closing words on its export."""
        if self.kind == "model":
            return f"model exported to {self.path}"
        return (
            f"the whole model is not exported: {self.reason}. Its weights "
            f"are in {self.path}; load them with: {self.load}"
        )


def export_model(model, directory, probe_inputs=None, rebuild=None, imports=None):
    """Exports `model` to `directory`, checked by loading it back.

    Args:
        model: the trained Keras model.
        directory: where the export goes (the run's logdir).
        probe_inputs: a batch of inputs the model takes; the reloaded model
            must give the same outputs on it. None checks only the reload.
        rebuild: a line of Python that builds the model again as `model`
            (for the weights); None names no way to rebuild it.
        imports: a line of Python that registers the model's own classes
            with Keras (imports their module), run before loading the whole
            model; None when tfnorm's classes are all it holds.

    Returns:
        An `Export`.

    Raises:
        OSError: a file could not be written (a full disk); no temporary
            file is left. `UnsafeFileError` when the SavedModel directory's
            name (TF 2.9) is a symbolic link.
    """
    os.makedirs(directory, exist_ok=True)
    remove_leftovers(directory)
    final = _keras.model_path(os.path.join(directory, _BASE), _keras.NATIVE_FORMAT)
    weights = os.path.join(directory, WEIGHTS_FILE)
    if os.path.basename(final) == _BASE:
        # A SavedModel directory is moved into place, not renamed over a
        # link; a file is renamed over one, which leaves its target alone.
        refuse_links([final])
    temporary_base = _temporary_name(directory)
    temporary = _keras.model_path(temporary_base, _keras.NATIVE_FORMAT)
    try:
        try:
            _keras.save_model(model, temporary_base)
        except OSError:
            raise
        except Exception as error:  # the user's classes decide what saves
            reason = f"it cannot be saved whole ({_gist(error)})"
        else:
            reason = reload_problem(model, temporary, probe_inputs)
        if reason is None:
            _move_into_place(temporary, final)
            _remove(weights)  # an earlier export's, now out of date
            return Export(
                "model",
                final,
                _load_model_line(final, imports),
                sha256=fingerprints(final),
            )
    finally:
        _remove(temporary)
    _save_weights(model, directory, weights)
    _remove(final)
    load = _load_weights_line(rebuild, weights)
    return Export("weights", weights, load, reason, fingerprints(weights))


#: The files beside an export that belong to it, when a run writes them.
COMPANIONS = ("vocabulary.json", "labels.json", "language_model.json")


def fingerprints(path):
    """`{name: SHA-256}` of the export at `path` (a SavedModel directory by its
    `saved_model.pb`) and of its `COMPANIONS`, names relative to its directory."""
    directory = os.path.dirname(path)
    names = [os.path.basename(path)]
    if os.path.isdir(path):
        names = [os.path.join(names[0], "saved_model.pb")]
    names += [n for n in COMPANIONS if os.path.isfile(os.path.join(directory, n))]
    return {name: file_sha256(os.path.join(directory, name)) for name in names}


def reload_problem(model, path, probe_inputs=None):
    """None when the model saved at `path` loads back and gives `model`'s
    outputs on `probe_inputs`; otherwise what is wrong, in a few words."""
    register_tfnorm_objects()
    try:
        loaded = _keras.keras.models.load_model(path, compile=False)
    except Exception as error:
        return f"the saved model does not load back ({_gist(error)})"
    if probe_inputs is None:
        return None
    try:
        expected = _flat_outputs(model(probe_inputs, training=False))
        actual = _flat_outputs(loaded(probe_inputs, training=False))
    except Exception as error:
        return (
            f"the reloaded model cannot be called on a training batch ({_gist(error)})"
        )
    shapes = [[a.shape for a, _ in outputs] for outputs in (actual, expected)]
    if shapes[0] != shapes[1]:
        return (
            "the reloaded model's outputs have other shapes "
            f"({shapes[0]} instead of {shapes[1]})"
        )
    for (got, _), (want, itemsize) in zip(actual, expected):
        difference = float(np.max(np.abs(got - want), initial=0.0))
        scale = 1.0 + float(np.max(np.abs(want), initial=0.0))
        if not np.isfinite(difference) or difference > _tolerance(itemsize) * scale:
            return (
                "the reloaded model's outputs differ from the trained model's "
                f"(by up to {difference:.3g} on a batch of training inputs): "
                "some of its settings or weights are not saved"
            )
    return None


def remove_leftovers(directory):
    """Deletes what an export killed midway left in `directory`."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if _LEFTOVER.match(name):
            _remove(os.path.join(directory, name))


def register_tfnorm_objects():
    """Imports tfnorm's layers, schedules and optimizer so that a saved model
    names them without `custom_objects` (the `tfnorm` command does not
    import them with the package)."""
    import tfnorm.models  # noqa: F401
    import tfnorm.optim.optimizers  # noqa: F401
    import tfnorm.optim.schedules  # noqa: F401


#: What a model of the user's own needs to be exported whole, said after
#: the reason it was not.
OWN_CLASSES_ADVICE = (
    "to export it whole, register each layer and model class of your own "
    "with `@keras.utils.register_keras_serializable()` and give it a "
    "`get_config()` returning its __init__ arguments, as "
    "examples/keras_transformer_classifier.py does"
)


def own_model_rebuild(model_spec, probe_inputs):
    """A line of Python building the model of `model_spec` (`MODULE:FUNCTION`
    or `path/file.py:FUNCTION`) and creating its weights on zeros shaped as
    one example of `probe_inputs`, so that `load_weights` finds them."""
    module, _, function = str(model_spec).rpartition(":")
    if module.endswith(".py"):
        call = f"import runpy; model = runpy.run_path({os.path.abspath(module)!r})[{function!r}]()"
    else:
        call = f"from {module} import {function} as model_fn; model = model_fn()"
    return f"import numpy as np; {call}; model({_zeros_code(probe_inputs)}, training=False)"


def own_model_imports(model_spec):
    """A line of Python running the module of `model_spec`, so that the
    classes it registers with Keras are known when its export is loaded."""
    module = str(model_spec).rpartition(":")[0]
    if module.endswith(".py"):
        return f"import runpy; runpy.run_path({os.path.abspath(module)!r})"
    return f"import {module}"


# ------------------------------------------------------------------ helpers


def _temporary_name(directory, kind="tmp"):
    name = f"{_BASE}.{kind}{os.getpid()}.{secrets.token_hex(4)}"
    return os.path.join(directory, name)


def _move_into_place(temporary, final):
    if not os.path.isdir(temporary):
        os.replace(temporary, final)  # a link at `final` is replaced, not followed
        return
    # A SavedModel directory cannot be renamed over another: the old one is
    # moved aside first (a leftover name if the process dies just then).
    aside = None
    if os.path.isdir(final):
        aside = _temporary_name(os.path.dirname(final), "old")
        os.replace(final, aside)
    os.replace(temporary, final)
    if aside:
        _remove(aside)


def _save_weights(model, directory, weights):
    temporary = _temporary_name(directory) + ".weights.h5"
    try:
        model.save_weights(temporary)
        os.replace(temporary, weights)
    finally:
        _remove(temporary)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)


def _load_model_line(path, imports=None):
    before = f"{imports}; " if imports else ""
    return (
        f"import tensorflow as tf, tfnorm; {before}"
        f"model = tf.keras.models.load_model({os.path.abspath(path)!r})"
    )


def _load_weights_line(rebuild, weights):
    load = f"model.load_weights({os.path.abspath(weights)!r})"
    if rebuild is None:
        return f"build the same model as `model`, then {load}"
    return f"{rebuild}; {load}"


def _flat_outputs(outputs):
    """`(float64 array, bytes per value)` for each output tensor."""
    tf = _keras.tf
    return [
        (np.asarray(tf.cast(t, "float64")), tf.as_dtype(t.dtype).size)
        for t in tf.nest.flatten(outputs)
    ]


def _tolerance(itemsize):
    # The same weights and inputs give the same outputs up to rounding in the
    # order of operations; half-precision outputs round more coarsely.
    return 1e-2 if itemsize < 4 else 1e-5


def _zeros_code(inputs):
    """Python code for zeros shaped as one example of `inputs` (nested)."""
    if isinstance(inputs, dict):
        items = ", ".join(f"{k!r}: {_zeros_code(v)}" for k, v in inputs.items())
        return "{" + items + "}"
    if isinstance(inputs, (list, tuple)):
        return "[" + ", ".join(_zeros_code(v) for v in inputs) + "]"
    shape = (1,) + tuple(int(d) for d in inputs.shape[1:])
    dtype = getattr(inputs.dtype, "name", str(inputs.dtype))
    return f"np.zeros({shape!r}, {dtype!r})"


def _gist(error):
    """`error`'s type and whole message on one line: Keras's reason is kept
    entire (it names the class that is missing, and what to add), only the
    configs Keras 3 quotes around it are shortened to `{...}`."""
    return f"{type(error).__name__}: {_without_configs(' '.join(str(error).split()))}"


_CONFIG = re.compile(r"(config=|Full object config: )\{")


def _without_configs(text):
    """`text` with each quoted config (`config={...}`, brackets matched,
    quoted strings skipped) written as `{...}`."""
    parts, start = [], 0
    for match in _CONFIG.finditer(text):
        if match.start() < start:
            continue  # inside a config already shortened
        end, depth, quote = match.end(), 1, None
        while end < len(text) and depth:
            char = text[end]
            if quote:
                quote = None if char == quote else quote
            elif char in "'\"":
                quote = char
            else:
                depth += {"{": 1, "}": -1}.get(char, 0)
            end += 1
        parts += [text[start : match.end() - 1], "{...}"]
        start = end
    return "".join(parts + [text[start:]])
