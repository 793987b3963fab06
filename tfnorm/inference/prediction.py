"""Running the exported model of a finished text run on new texts.

A `tfnorm train --data ...` run leaves in its `logdir` everything needed to
classify new text: the exported model (`model.keras`, or the SavedModel
directory `model` on TensorFlow 2.9), the vocabulary (`vocabulary.json`) and
the class names (`labels.json`). `Predictor` loads the three once; `predict`
is the one-call form. `tfnorm predict` is a thin layer over it.

Example:

>>> from tfnorm.inference.prediction import predict
>>> predict("runs/reviews", ["a wonderful film"])  # doctest: +SKIP
[{'text': 'a wonderful film', 'label': 'pos',
  'probabilities': {'neg': 0.03, 'pos': 0.97}}]
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from tfnorm._errors import one_line, setting_key
from tfnorm.training.data.labels import LABELS_FILE, load_label_names
from tfnorm.training.data.vocabulary import VOCABULARY_FILE, load_vocabulary
from tfnorm.training.rundir.reading import RunDirectoryError, read_summary

#: The names an export may have, in the order they are looked for: the
#: `.keras` archive (Keras 3, tf_keras), the SavedModel directory (TF 2.9),
#: and the HDF5 file of `save_model(..., save_format="h5")`.
MODEL_NAMES = ("model.keras", "model", "model.h5")


class PredictionError(RunDirectoryError):
    """A run directory cannot be used for prediction; says what is missing.
    Settings of the run the message names are marked with `setting_key`."""


def find_model(run_dir):
    """The path of the model exported in `run_dir`, or `PredictionError`.

    A file or directory at an export's name that cannot be an export (an
    empty file, a `.keras` archive cut short, a directory) is named as such.
    """
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise PredictionError(
            f"{run_dir}: no such run directory (give the {setting_key('logdir')} of a finished "
            f"tfnorm train run). Received: run_dir={run_dir!r}"
        )
    misplaced = None
    for name in MODEL_NAMES:
        path = os.path.join(run_dir, name)
        if os.path.isdir(os.path.join(path, "variables")):
            _check_not_empty(os.path.join(path, "saved_model.pb"))
            return path
        if os.path.isdir(path) and name != "model":
            misplaced = misplaced or path
        elif os.path.isfile(path):
            _check_not_empty(path)
            if name.endswith(".keras") and not zipfile.is_zipfile(path):
                raise PredictionError(
                    f"{path} is not a whole Keras archive (cut short by a full "
                    "disk or an interrupted copy?); rerun the run's tfnorm train "
                    "command to export it again, or copy it again"
                )
            return path
    if misplaced:
        raise PredictionError(
            f"{misplaced} is a directory, not a model file: the run's export "
            f"is a file of that name. Received: run_dir={run_dir!r}"
        )
    raise PredictionError(
        f"{run_dir}: no exported model (model.keras, or the SavedModel directory "
        f"`model`){_why_no_model(run_dir)}. Received: run_dir={run_dir!r}"
    )


def _check_not_empty(path):
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        raise PredictionError(
            f"{path} is empty or missing: the export was cut short (a full "
            "disk? a kill?); rerun the run's tfnorm train command to export it "
            "again"
        )


def _why_no_model(run_dir):
    summary = read_summary(run_dir)
    if summary is None:
        return f"; is it the {setting_key('logdir')} of a tfnorm train run?"
    status = summary.get("status")
    if status != "completed":
        return f"; the run has not completed (summary.json: status {status!r})"
    return f"; the run was trained with {setting_key('export', False)}"


def _refuse_own_model_run(run_dir, summary):
    """An own-model run's export is the user's model: not for this command."""
    config = summary.get("config") if summary else None
    model_fn = config.get("model_fn") if isinstance(config, dict) else None
    if not model_fn:
        return
    exported = summary.get("export") or {}
    how = (
        f"load its export in Python: {exported['load']}"
        if isinstance(exported, dict) and exported.get("load")
        else "it has no export (summary.json: status "
        f"{summary.get('status')!r}); rerun it to the end with the export on"
    )
    raise PredictionError(
        f"{run_dir} is a run of your own model ({setting_key('model_fn', model_fn)}); tfnorm "
        f"predict classifies texts with tfnorm's text classifier only. To use "
        f"it, {how}"
    )


def check_same_export(run_dir, summary):
    """Refuses a model, vocabulary or class names that are not the files the
    run exported together (their SHA-256 is in summary.json's export record;
    runs from before it are not checked)."""
    exported = (summary or {}).get("export")
    recorded = exported.get("sha256") if isinstance(exported, dict) else None
    if not isinstance(recorded, dict):
        return
    from tfnorm._safe_io import file_sha256

    for name, digest in recorded.items():
        path = os.path.join(run_dir, str(name))
        if os.path.isfile(path) and file_sha256(path) != digest:
            raise PredictionError(
                f"{path} is not the file this run exported with its model (its "
                "SHA-256 differs from the one summary.json recorded): it comes "
                "from another run or was changed since. Copy a run directory "
                f"whole. Received: run_dir={run_dir!r}"
            )


class Predictor:
    """The exported model of a text run with its vocabulary and class names.

    Args:
        run_dir: the `logdir` of a finished `tfnorm train --data ...` run.

    Raises:
        PredictionError: the directory, the model or the vocabulary is
            missing or damaged, the run is not a text run of tfnorm's
            classifier, or the files come from different runs.
    """

    def __init__(self, run_dir):
        self.run_dir = os.fspath(run_dir)
        summary = read_summary(self.run_dir)
        if os.path.isdir(self.run_dir):
            _refuse_own_model_run(self.run_dir, summary)
        self.model_path = find_model(self.run_dir)
        try:
            vocabulary = load_vocabulary(self.run_dir)
            names = load_label_names(self.run_dir)
        except ValueError as error:
            raise PredictionError(str(error)) from None
        if vocabulary is None:
            raise PredictionError(
                f"{self.run_dir}: no {VOCABULARY_FILE}; tfnorm predict needs a run "
                f"trained on a text file ({setting_key('data')}), synthetic-task runs take token "
                f"ids, not text. Received: run_dir={self.run_dir!r}"
            )
        self.model = load_exported_model(self.model_path)
        self.max_len = int(self.model.inputs[0].shape[1])
        num_outputs = int(self.model.outputs[0].shape[-1])
        # Runs from before labels.json had id labels only.
        self.label_names = names or [str(index) for index in range(num_outputs)]
        if len(self.label_names) != num_outputs:
            raise PredictionError(
                f"{os.path.join(self.run_dir, LABELS_FILE)} names "
                f"{len(self.label_names)} classes but the model has {num_outputs} "
                "outputs; the files come from different runs."
            )
        check_same_export(self.run_dir, summary)
        from tfnorm.training.data.vocabulary import make_vectorizer

        self.vectorizer = make_vectorizer(self.max_len, vocabulary=list(vocabulary))

    def probabilities(self, texts, batch_size=256):
        """Class probabilities `[len(texts), num_classes]` (float64)."""
        from tfnorm.training.data.vocabulary import vectorize

        texts = [str(text) for text in texts]
        if not texts:
            return np.zeros((0, len(self.label_names)))
        ids = vectorize(self.vectorizer, texts)
        logits = np.concatenate(
            [
                np.asarray(self.model(ids[start : start + batch_size], training=False))
                for start in range(0, len(ids), batch_size)
            ]
        ).astype(np.float64)
        logits -= logits.max(axis=-1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=-1, keepdims=True)

    def predict(self, texts, batch_size=256):
        """One dict per text: `text`, `label` (a class name) and `probabilities`
        (class name -> probability, in class-id order)."""
        texts = [str(text) for text in texts]
        results = []
        for text, row in zip(texts, self.probabilities(texts, batch_size)):
            results.append(
                {
                    "text": text,
                    "label": self.label_names[int(np.argmax(row))],
                    "probabilities": {
                        name: float(p) for name, p in zip(self.label_names, row)
                    },
                }
            )
        return results


def predict(run_dir, texts, batch_size=256):
    """Classifies `texts` with the model exported by the run in `run_dir`.

    Args:
        run_dir: the `logdir` of a finished `tfnorm train --data ...` run.
        texts: a list of strings.
        batch_size: texts per model call.

    Returns:
        One dict per text, see `Predictor.predict`.

    Raises:
        PredictionError: see `Predictor`.
    """
    return Predictor(run_dir).predict(texts, batch_size=batch_size)


def load_exported_model(path):
    """The model exported at `path` (tfnorm's layers registered first), or
    `PredictionError` naming the file when Keras cannot load it."""
    from tfnorm import _keras
    from tfnorm.training.rundir.export import register_tfnorm_objects

    register_tfnorm_objects()
    try:
        return _keras.keras.models.load_model(path, compile=False)
    except Exception as error:  # whatever a damaged file makes Keras raise
        reason = one_line(error, with_type=False)
        raise PredictionError(
            f"{path}: the model cannot be loaded ({type(error).__name__}: "
            f"{reason}); rerun the run's tfnorm train command to export it again"
        ) from None
