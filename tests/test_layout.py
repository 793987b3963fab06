"""The package's shape: modules and functions short enough to read whole, and
imports that go one way (a circle means two modules are one job split badly).

Imports inside functions count: deferring an import hides a circle from
Python, not from the reader.
"""

from __future__ import annotations

import ast
import os

from tests.conftest import REPO

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


def _modules():
    """{dotted module name: repository-relative path} for every tfnorm module."""
    found = {}
    for folder, _, names in os.walk(os.path.join(REPO, "tfnorm")):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.relpath(os.path.join(folder, name), REPO)
            dotted = path[: -len(".py")].replace(os.sep, ".")
            found[dotted.removesuffix(".__init__")] = path
    return found


def _tree(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        return ast.parse(handle.read(), path)


def _imported(tree, module, modules):
    """The tfnorm modules `module` imports, at any depth of its code."""
    package = (
        module
        if module in modules and modules[module].endswith("__init__.py")
        else module.rpartition(".")[0]
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in modules else base


def _import_graph():
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        targets = set()
        for name in _imported(_tree(path), module, modules):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("tfnorm") and name != module:
                targets.add(name)
        graph[module] = targets
    return graph, modules


def _circles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_is_longer_than_the_limit():
    too_long = {}
    for path in _modules().values():
        with open(os.path.join(REPO, path), encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        if lines > MAX_MODULE_LINES:
            too_long[path] = lines
    assert not too_long


def test_no_function_body_is_longer_than_the_limit():
    too_long = {}
    for path in _modules().values():
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = _code_lines(node)
                if lines > MAX_FUNCTION_LINES:
                    too_long[f"{path}:{node.lineno} {node.name}"] = lines
    assert not too_long


def _code_lines(function):
    """Lines of a function's statements; a public function's docstring (its
    arguments, an example) is documentation, not body, and is not counted."""
    statements = function.body
    first = statements[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        and len(statements) > 1
    ):
        statements = statements[1:]
    return function.end_lineno - statements[0].lineno + 1


def test_no_import_circle():
    graph, _ = _import_graph()
    assert not _circles(graph)


def test_the_checks_see_a_circle_and_a_long_module():
    # The graph walk must not pass by construction.
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]
    graph, _ = _import_graph()
    assert "tfnorm.training.workloads.selection" in graph["tfnorm.training.trainer"]
    # Imports inside functions count too.
    assert (
        "tfnorm.training.workloads.classifier"
        in (graph["tfnorm.training.workloads.selection"])
    )


def _non_package_modules(graph, modules, prefix):
    return {
        module
        for module in graph
        if module.startswith(prefix) and not modules[module].endswith("__init__.py")
    }


def _floors(graph, members):
    """The number of modules on the longest import chain within `members`."""
    depth = {}

    def floor(module):
        if module not in depth:
            below = [floor(target) for target in graph[module] if target in members]
            depth[module] = 1 + max(below, default=0)
        return depth[module]

    return max(floor(module) for module in members)


MODEL_FAMILIES = ("tfnorm.models.encoder", "tfnorm.models.decoder")
MAX_MODEL_FLOORS = 5


def test_no_model_family_imports_the_other():
    graph, _ = _import_graph()
    crossings = {
        (module, target)
        for family in MODEL_FAMILIES
        for other in MODEL_FAMILIES
        if other != family
        for module in graph
        if module.startswith(family)
        for target in graph[module]
        if target.startswith(other)
    }
    assert not crossings


def test_models_are_at_most_five_floors_deep():
    graph, modules = _import_graph()
    members = _non_package_modules(graph, modules, "tfnorm.models.")
    assert _floors(graph, members) <= MAX_MODEL_FLOORS


def _private_imports(modules):
    """(importer, module, name) for every private name (not a module) one
    tfnorm package takes from another's module."""
    found = set()
    for module, path in modules.items():
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for node in ast.walk(_tree(path)):
            if not (isinstance(node, ast.ImportFrom) and node.module):
                continue
            source = node.module
            if not source.startswith("tfnorm"):
                continue
            is_package = modules.get(source, "").endswith("__init__.py")
            source_package = source if is_package else source.rpartition(".")[0]
            for alias in node.names:
                private = alias.name.startswith("_")
                if private and f"{source}.{alias.name}" not in modules:
                    if source_package != package:
                        found.add((module, source, alias.name))
    return found


def test_no_module_imports_a_private_name_of_another_package():
    assert not _private_imports(_modules())


def test_the_layout_checks_see_floors_and_private_imports():
    graph = {"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}
    assert _floors(graph, {"a", "b", "c", "d"}) == 3
    assert _floors(graph, {"b", "c", "d"}) == 2
    # The compatibility package is imported as a module, not a private name.
    modules = _modules()
    graph, _ = _import_graph()
    assert "tfnorm._keras" in graph["tfnorm.models.block_parts"]
    assert ("tfnorm.models.block_parts", "tfnorm", "_keras") not in _private_imports(
        modules
    )
