"""Training data for `tfnorm train`: text-classification files and synthetic tasks.

Two sources produce the same thing, a `Dataset` of int32 token ids (0 is
padding) with integer labels:

* Text files (`read_examples`): UTF-8 (a byte-order mark is allowed) CSV or
  TSV with a header naming a `text` and a `label` column, or JSON Lines with
  one `{"text": ..., "label": ...}` object a line. Labels are class ids
  `0 .. num_classes - 1` (see `count_classes`) or names mapped to ids in
  sorted order (`label_names`, saved with the run by `save_label_names`).
  Every problem (bad UTF-8, missing column, bad label, ids and names mixed,
  malformed line, no examples or no words at all) raises `DataError` naming
  the file and line, before any training starts. Without a validation file a
  seeded share of the training file is held out (`split_indices`), and the
  texts cut by `max_len` are counted (`truncation_report`). The texts are
  turned into ids by a Keras `TextVectorization` layer adapted on the
  training split only; its vocabulary is saved with the run
  (`save_vocabulary`) and reloaded on resume so that a token keeps its id.
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
from tfnorm.training.data.labels import (
    LABELS_FILE,
    label_names,
    load_label_names,
    save_label_names,
)
from tfnorm.training.data.preparation import (
    MIN_SPLIT_EXAMPLES,
    split_indices,
    truncation_report,
)
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
    token_counts,
    vectorize,
)

__all__ = [
    "LABELS_FILE",
    "MAX_INFERRED_CLASSES",
    "MIN_SPLIT_EXAMPLES",
    "MAX_UNSEEN_CLASS_RATIO",
    "VOCABULARY_FILE",
    "DataError",
    "Dataset",
    "count_classes",
    "get_vocabulary",
    "label_names",
    "load_label_names",
    "load_text_data",
    "load_vocabulary",
    "make_synthetic",
    "make_vectorizer",
    "read_examples",
    "save_label_names",
    "save_vocabulary",
    "split_indices",
    "token_counts",
    "truncation_report",
    "vectorize",
]
