"""Using what a finished (or still training) run left in its directory:
`Predictor`/`predict` classify new texts with a text run's exported model
(`tfnorm predict`), `TextGenerator` continues prompts with a language-model
run's export or newest checkpoint (`tfnorm generate`).

Both read the run directory through `tfnorm.training.rundir.reading`, its
one public reader; training imports this package only to start a language
model from another run's weights (`--init-from RUN_DIR`). The names below
are imported on first use, so that `tfnorm predict --help` and `tfnorm
generate --help` answer without TensorFlow.

Example:

>>> from tfnorm.inference import TextGenerator
>>> TextGenerator("runs/lm").complete("The ", 40, seed=0)  # doctest: +SKIP
'The model of the statement is ...'
"""

from __future__ import annotations

from tfnorm._lazy_exports import lazy_exports

_EXPORTS = {
    "PredictionError": "tfnorm.inference.prediction",
    "Predictor": "tfnorm.inference.prediction",
    "predict": "tfnorm.inference.prediction",
    "TextGenerator": "tfnorm.inference.text_generation",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
