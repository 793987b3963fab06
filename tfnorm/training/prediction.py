"""Running the exported model of a finished text run on new texts.

A `tfnorm train --data ...` run leaves in its `logdir` everything needed to
classify new text: the exported model (`model.keras`, or the SavedModel
directory `model` on TensorFlow 2.9), the vocabulary (`vocabulary.json`) and
the class names (`labels.json`). `Predictor` loads the three once; `predict`
is the one-call form. `tfnorm predict` is a thin layer over it.

Example:

>>> from tfnorm.training.prediction import predict
>>> predict("runs/reviews", ["a wonderful film"])  # doctest: +SKIP
[{'text': 'a wonderful film', 'label': 'pos',
  'probabilities': {'neg': 0.03, 'pos': 0.97}}]
"""

from __future__ import annotations

import json
import os

import numpy as np

from tfnorm._errors import one_line
from tfnorm.training.data.labels import LABELS_FILE, load_label_names
from tfnorm.training.data.vocabulary import VOCABULARY_FILE, load_vocabulary

#: The names an export may have, in the order they are looked for: the
#: `.keras` archive (Keras 3, tf_keras), the SavedModel directory (TF 2.9),
#: and the HDF5 file of `save_model(..., save_format="h5")`.
MODEL_NAMES = ("model.keras", "model", "model.h5")


class PredictionError(ValueError):
    """A run directory cannot be used for prediction; says what is missing."""


def find_model(run_dir):
    """The path of the model exported in `run_dir`, or `PredictionError`."""
    run_dir = os.fspath(run_dir)
    if not os.path.isdir(run_dir):
        raise PredictionError(
            f"{run_dir}: no such run directory (give the --logdir of a finished "
            f"tfnorm train run). Received: run_dir={run_dir!r}"
        )
    for name in MODEL_NAMES:
        path = os.path.join(run_dir, name)
        if os.path.isfile(path) or os.path.isdir(os.path.join(path, "variables")):
            return path
    raise PredictionError(
        f"{run_dir}: no exported model (model.keras, or the SavedModel directory "
        f"`model`){_why_no_model(run_dir)}. Received: run_dir={run_dir!r}"
    )


def _why_no_model(run_dir):
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as handle:
            summary = json.load(handle)
    except (OSError, ValueError):
        return "; is it the --logdir of a tfnorm train run?"
    status = summary.get("status") if isinstance(summary, dict) else None
    if status != "completed":
        return f"; the run has not completed (summary.json: status {status!r})"
    return "; the run was trained with --no-export"


class Predictor:
    """The exported model of a text run with its vocabulary and class names.

    Args:
        run_dir: the `logdir` of a finished `tfnorm train --data ...` run.

    Raises:
        PredictionError: the directory, the model or the vocabulary is
            missing, or the files do not fit together.
    """

    def __init__(self, run_dir):
        self.run_dir = os.fspath(run_dir)
        self.model_path = find_model(self.run_dir)
        vocabulary = load_vocabulary(self.run_dir)
        if vocabulary is None:
            raise PredictionError(
                f"{self.run_dir}: no {VOCABULARY_FILE}; tfnorm predict needs a run "
                "trained on a text file (--data), synthetic-task runs take token "
                f"ids, not text. Received: run_dir={self.run_dir!r}"
            )
        self.model = _load_model(self.model_path)
        self.max_len = int(self.model.inputs[0].shape[1])
        num_outputs = int(self.model.outputs[0].shape[-1])
        try:
            names = load_label_names(self.run_dir)
        except ValueError as error:
            raise PredictionError(str(error)) from None
        # Runs from before labels.json had id labels only.
        self.label_names = names or [str(index) for index in range(num_outputs)]
        if len(self.label_names) != num_outputs:
            raise PredictionError(
                f"{os.path.join(self.run_dir, LABELS_FILE)} names "
                f"{len(self.label_names)} classes but the model has {num_outputs} "
                "outputs; the files come from different runs."
            )
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


def _load_model(path):
    # Registers tfnorm's layers, schedules and optimizer for deserialisation:
    # the `tfnorm` command does not import them with the package.
    import tfnorm.models  # noqa: F401
    import tfnorm.optim.optimizers  # noqa: F401
    import tfnorm.optim.schedules  # noqa: F401
    from tfnorm import _keras

    try:
        return _keras.keras.models.load_model(path, compile=False)
    except (OSError, ValueError) as error:
        reason = one_line(error, with_type=False)
        raise PredictionError(
            f"{path}: the model cannot be loaded ({reason})."
        ) from None
