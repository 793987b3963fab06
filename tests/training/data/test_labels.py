"""Labels: ids or names, the saved mapping."""

from __future__ import annotations

import pytest

from tfnorm.training.data import DataError, label_names, load_label_names
from tfnorm.training.data.labels import parse_label, save_label_names


@pytest.mark.parametrize(
    "raw, expected",
    [("3", 3), (" 0 ", 0), ("+2", 2), (4, 4), ("pos", "pos"), (" Not good ", "Not good"), ("1.5", "1.5")],
)  # fmt: skip
def test_digits_are_ids_and_other_strings_names(raw, expected):
    assert parse_label("f.csv", 2, raw) == expected


@pytest.mark.parametrize("raw", ["-1", -1, "", "  ", True, 1.0, None, [1]])
def test_other_labels_are_refused_by_line(raw):
    with pytest.raises(DataError, match=r"^f\.csv, line 7: the label must be"):
        parse_label("f.csv", 7, raw)


def test_names_are_sorted_whatever_the_order():
    assert label_names(["pos", "neg", "pos", "Neutral"]) == ["Neutral", "neg", "pos"]


def test_saved_names_round_trip_and_a_bad_file_is_an_error(tmp_path):
    assert load_label_names(str(tmp_path)) is None
    save_label_names(["négatif", "positif"], str(tmp_path / "run"))
    assert load_label_names(str(tmp_path / "run")) == ["négatif", "positif"]
    (tmp_path / "labels.json").write_text('{"a": 1}')
    with pytest.raises(DataError, match=r"labels\.json: expected a JSON list"):
        load_label_names(str(tmp_path))


@pytest.mark.parametrize("raw", ["1_0", "+1_000", " 2_5 "])
def test_digits_with_underscores_are_refused_by_line(raw):
    # Python's int() reads "1_0" as 10: neither that id nor a name is safe.
    with pytest.raises(DataError, match=r"^f\.csv, line 7: the label is digits with"):
        parse_label("f.csv", 7, raw)
