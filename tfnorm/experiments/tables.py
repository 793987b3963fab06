"""The Markdown tables the experiments' reports write (compare, the claim
measures, the depth sweep): one writer, so every report's tables read alike."""

from __future__ import annotations


def format_markdown_table(columns, rows):
    """A Markdown table of `columns` (header texts) and `rows` (lists of cell
    texts, one per column), one line each, ending with a newline."""
    lines = [_table_line(columns), "|" + "---|" * len(columns)]
    for cells in rows:
        if len(cells) != len(columns):
            raise ValueError(
                f"a row has {len(cells)} cells for {len(columns)} columns: {cells!r}"
            )
        lines.append(_table_line(cells))
    return "\n".join(lines) + "\n"


def _table_line(cells):
    return "| " + " | ".join(cells) + " |"
