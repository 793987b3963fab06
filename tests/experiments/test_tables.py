import pytest

from tfnorm.experiments.tables import format_markdown_table


def test_header_rule_and_one_line_per_row():
    text = format_markdown_table(
        ["variant", "loss"], [["pre_ln", "1.25"], ["post_ln", "-"]]
    )
    assert text == (
        "| variant | loss |\n|---|---|\n| pre_ln | 1.25 |\n| post_ln | - |\n"
    )


def test_no_rows_is_the_header_alone():
    assert format_markdown_table(["a"], []) == "| a |\n|---|\n"


def test_a_row_of_the_wrong_length_names_its_cells():
    with pytest.raises(ValueError, match=r"2 cells for 3 columns: \['x', 'y'\]"):
        format_markdown_table(["a", "b", "c"], [["x", "y"]])
