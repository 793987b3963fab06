"""Training data for `tfnorm train`: text-classification files and synthetic tasks.

Two sources produce the same thing, a `Dataset` of int32 token ids (0 is
padding) with integer labels:

* Text files (`read_examples`): UTF-8 (a byte-order mark is allowed) CSV or
  TSV with a header naming a `text` and a `label` column, or JSON Lines with
  one `{"text": ..., "label": ...}` object a line. Labels are class ids
  `0 .. num_classes - 1` (see `count_classes`). Every problem (bad UTF-8,
  missing column, bad label, malformed line, no examples or no words at all)
  raises `DataError` naming the file and line, before any training starts. The texts are turned into ids by a
  Keras `TextVectorization` layer adapted on the training split only; its
  vocabulary is saved with the run (`save_vocabulary`) and reloaded on resume
  so that a token keeps its id.
* Synthetic tasks (`make_synthetic`): `sorted`, `duplicate` and `majority`,
  each deterministic by seed and each needing attention over the whole
  sequence (no single position or local window decides the label).

Example:

>>> train, val = make_synthetic("sorted", num_examples=64, max_len=8, seed=0)
>>> train.ids.shape, train.num_classes
((64, 8), 2)
"""

from __future__ import annotations

from tfnorm.training.data.dataset import DataError, Dataset
from tfnorm.training.data.synthetic import make_synthetic
from tfnorm.training.data.text_files import (
    MAX_INFERRED_CLASSES,
    MAX_UNSEEN_CLASS_RATIO,
    count_classes,
    load_text_data,
    read_examples,
)
from tfnorm.training.data.vocabulary import (
    VOCABULARY_FILE,
    get_vocabulary,
    load_vocabulary,
    make_vectorizer,
    save_vocabulary,
    vectorize,
)

__all__ = [
    "MAX_INFERRED_CLASSES",
    "MAX_UNSEEN_CLASS_RATIO",
    "VOCABULARY_FILE",
    "DataError",
    "Dataset",
    "count_classes",
    "get_vocabulary",
    "load_text_data",
    "load_vocabulary",
    "make_synthetic",
    "make_vectorizer",
    "read_examples",
    "save_vocabulary",
    "vectorize",
]
