"""What the library says names settings by key (`checkpoint_dir`), the way a
notebook gives them; only `tfnorm/cli/` names the flags of `tfnorm`'s own
commands, which it derives from the keys (`tfnorm.cli.flags.with_flags`).

Docstrings and comments may describe the command line; the text the
library shows (messages, progress lines, help texts) may not.
"""

from __future__ import annotations

import argparse
import ast
import os
import re

from tests.conftest import REPO
from tfnorm.cli.main import build_parser

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

#: Flags of other programs that the library's text may name, with why.
OTHER_PROGRAMS_FLAGS = {}


def _tfnorm_flags():
    flags = set()
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            flags.update(o for o in action.option_strings if o.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return flags


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(
            node,
            (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
        ):
            body = node.body
            if body and isinstance(body[0], ast.Expr):
                found.add(id(body[0].value))
    return found


def _flag_declarations(tree):
    """The `flags=(...)` of a setting: the spelling argparse is given."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "flags":
            found.update(id(part) for part in ast.walk(node.value))
    return found


def _library_texts():
    """(path, line, text) of every string literal the library may show."""
    package = os.path.join(REPO, "tfnorm")
    for folder, _, names in os.walk(package):
        if os.path.relpath(folder, package).split(os.sep)[0] == "cli":
            continue
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            skipped = _docstrings(tree) | _flag_declarations(tree)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Constant)
                    and isinstance(node.value, str)
                    and id(node) not in skipped
                ):
                    yield os.path.relpath(path, REPO), node.lineno, node.value


def test_tfnorm_flags_are_found_in_a_literal():
    flags = _tfnorm_flags()
    assert {"--checkpoint-dir", "--val-split", "--logdir", "--config"} <= flags
    assert FLAG.findall("use another --checkpoint-dir, not a-- b") == [
        "--checkpoint-dir"
    ]


def test_no_library_text_names_a_flag_of_tfnorm():
    flags = _tfnorm_flags()
    named = [
        f"{path}:{line}: {flag}"
        for path, line, text in _library_texts()
        for flag in FLAG.findall(text)
        if flag in flags and flag not in OTHER_PROGRAMS_FLAGS
    ]
    assert not named, "name the setting's key instead:\n" + "\n".join(named)
