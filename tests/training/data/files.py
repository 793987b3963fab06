"""Writing small data files for the data tests."""

from __future__ import annotations


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)
