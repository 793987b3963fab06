"""Vectorising texts with a vocabulary that is saved with the run and reused."""

from __future__ import annotations

import numpy as np

from tests.training.data.files import write
from tfnorm.training.data import load_text_data, load_vocabulary, save_vocabulary


def test_vectorised_ids_are_padded_and_stable_with_a_saved_vocabulary(tmp_path):
    train = write(
        tmp_path,
        "train.csv",
        "text,label\nthe cat sat,0\nthe dog ran far away,1\na cat,0\n",
    )
    val = write(tmp_path, "val.csv", "text,label\nthe unseenword cat,1\n")
    train_set, val_set, vocabulary = load_text_data(train, val, max_len=4)
    assert train_set.ids.dtype == np.int32 and train_set.ids.shape == (3, 4)
    assert train_set.num_classes == 2
    assert train_set.vocab_size == len(vocabulary) + 2
    # "the cat sat" has 3 tokens: one padding id at the end; the long text is cut.
    assert train_set.ids[0, 3] == 0 and np.all(train_set.ids[1] > 0)
    # Unknown words map to id 1.
    assert 1 in val_set.ids[0]

    save_vocabulary(vocabulary, str(tmp_path / "run"))
    reloaded = load_vocabulary(str(tmp_path / "run"))
    assert reloaded == vocabulary
    # Reordered vocabulary → other ids: proves the saved one is what is used.
    again, _, _ = load_text_data(train, None, max_len=4, vocabulary=reloaded)
    np.testing.assert_array_equal(again.ids, train_set.ids)
    shuffled, _, _ = load_text_data(
        train, None, max_len=4, vocabulary=list(reversed(reloaded))
    )
    assert not np.array_equal(shuffled.ids, train_set.ids)


def test_load_vocabulary_without_file_is_none(tmp_path):
    assert load_vocabulary(str(tmp_path)) is None


# ---------------------------------------------------------- synthetic tasks


def test_an_unreadable_vocabulary_is_a_value_error_naming_it(tmp_path, monkeypatch):
    import pytest

    save_vocabulary(["good", "day"], str(tmp_path))
    path = str(tmp_path / "vocabulary.json")
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    with pytest.raises(
        ValueError, match=r"vocabulary\.json cannot be read: .*Permission denied"
    ):
        load_vocabulary(str(tmp_path))
