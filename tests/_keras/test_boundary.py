"""The Keras boundary: only `tfnorm/_keras/` may depend on Keras internals.

Every module of tfnorm outside `tfnorm/_keras/` is read (its syntax tree) and
imported, and fails the test, naming file:line, when it

* reads or writes a private attribute (a name starting with "_") of anything
  but `self`, `cls`, `super()` or a tfnorm module, also through
  `getattr`/`setattr`/`hasattr`/`delattr` with a constant name, or bypasses
  Keras's attribute tracking with `object.__setattr__`/`__delattr__`;
* defines or uses through `self`/`cls`/`super()` a private name that a Keras
  or TensorFlow class in its class's bases defines (overriding
  `_clip_gradients`, calling `self._set_hyper`, ...), checked on the classes
  as this runtime's Keras builds them;
* tests versions: `IS_KERAS_3`, `FLAVOUR`, `KERAS_VERSION`, `TF_RELEASE`,
  `CLIPS_BEFORE_ALL_REDUCE`, any `__version__` but tfnorm's, `version.parse`
  and friends, or `hasattr`/`getattr(..., default)` on `keras` or `tf`;
* imports TensorFlow, Keras or tf_keras itself instead of through
  `tfnorm._keras`.

The scanner is tested on snippets below, so a broken scanner cannot pass
silently.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os

import pytest

from tests.conftest import REPO

PACKAGE = os.path.join(REPO, "tfnorm")
BOUNDARY = os.path.join(PACKAGE, "_keras")

#: (file, name) pairs that may stay outside `tfnorm/_keras/`, each for a
#: reason that is tfnorm's own, not Keras's.
ALLOWED = {
    # TrainConfig's mark on the copy `resolve()` returns (not a dataclass
    # field, so copies and comparisons leave it out): tfnorm's own object.
    ("tfnorm/settings/declared.py", "_resolved_repr"),
}

VERSION_FLAGS = {
    "IS_KERAS_3",
    "FLAVOUR",
    "KERAS_VERSION",
    "TF_RELEASE",
    "CLIPS_BEFORE_ALL_REDUCE",
}
VERSION_MODULES = ("packaging.version", "distutils.version", "pkg_resources")
VERSION_HELPERS = {"LooseVersion", "StrictVersion", "parse_version"}
#: Names under which tfnorm code reaches Keras or TensorFlow.
KERAS_ROOTS = {"keras", "tf", "tensorflow", "tf_keras", "_keras.keras", "_keras.tf"}
KERAS_PACKAGES = {"keras", "tensorflow", "tf_keras"}
ATTRIBUTE_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}
OWN_OBJECTS = {"self", "cls"}


def is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dotted(node):
    """The dotted name ("a.b.c") of a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_super_call(node):
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
    )


def reaches_keras(node):
    name = dotted(node)
    return name is not None and any(
        name == root or name.startswith(root + ".") for root in KERAS_ROOTS
    )


def is_tfnorm_module(name):
    """Whether the dotted `name` ("tfnorm.layers._ops") is a module of tfnorm."""
    if name != "tfnorm" and not name.startswith("tfnorm."):
        return False
    path = os.path.join(REPO, *name.split("."))
    return os.path.isdir(path) or os.path.isfile(path + ".py")


class Scanner(ast.NodeVisitor):
    """Collects `(line, name, message)` for what the boundary forbids in one file."""

    def __init__(self, is_module=is_tfnorm_module):
        self.is_module = is_module
        self.modules = {"tfnorm"}  # local names bound to tfnorm modules
        self.found = []

    def add(self, node, name, message):
        self.found.append((node.lineno, name, message))

    # -- imports ----------------------------------------------------------

    def visit_Import(self, node):
        for alias in node.names:
            self.check_imported(node, alias.name)
            if self.is_module(alias.name):
                self.modules.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        module = node.module or ""
        self.check_imported(node, module)
        for alias in node.names:
            if f"{module}.{alias.name}" in VERSION_MODULES:
                self.add(node, f"{module}.{alias.name}", "imports a version parser")
            if alias.name in VERSION_FLAGS or alias.name in VERSION_HELPERS:
                self.add(node, alias.name, "imports a version test")
            if self.is_module(f"{module}.{alias.name}"):
                self.modules.add(alias.asname or alias.name)

    def check_imported(self, node, module):
        top = module.split(".")[0]
        if top in KERAS_PACKAGES:
            self.add(node, module, f"imports {module} (use tfnorm._keras)")
        if any(module == m or module.startswith(m + ".") for m in VERSION_MODULES):
            self.add(node, module, f"imports {module} (version tests)")

    # -- names and attributes ---------------------------------------------

    def visit_Name(self, node):
        if node.id in VERSION_FLAGS or node.id in VERSION_HELPERS:
            self.add(node, node.id, f"tests the version ({node.id})")

    def visit_Attribute(self, node):
        name = node.attr
        if name in VERSION_FLAGS or name in VERSION_HELPERS:
            self.add(node, name, f"tests the version (.{name})")
        elif name == "__version__" and dotted(node.value) != "tfnorm":
            self.add(node, name, "reads a __version__")
        elif name == "parse" and dotted(node.value) == "version":
            self.add(node, "version.parse", "parses a version")
        elif name in ("__setattr__", "__delattr__") and dotted(node.value) == "object":
            self.add(node, name, f"object.{name} bypasses Keras's attribute tracking")
        elif is_private(name) and not self.own(node.value):
            self.add(node, name, f"touches the private attribute .{name}")
        self.generic_visit(node)

    def own(self, value):
        """Whether private attributes of `value` are tfnorm's to touch."""
        if is_super_call(value):
            return True  # checked against the bases by `check_classes`
        name = dotted(value)
        if name is None:
            return False
        if name in OWN_OBJECTS:
            return True
        head, _, rest = name.partition(".")
        if head not in self.modules:
            return False
        return True if not rest else self.is_module(name)

    def visit_Call(self, node):
        function = node.func.id if isinstance(node.func, ast.Name) else None
        if function in ATTRIBUTE_FUNCTIONS and len(node.args) >= 2:
            target, attribute = node.args[0], node.args[1]
            name = attribute.value if isinstance(attribute, ast.Constant) else None
            probes = function == "hasattr" or (
                function == "getattr" and len(node.args) == 3
            )
            if probes and reaches_keras(target):
                self.add(node, function, f"probes {dotted(target)} with {function}")
            if name == "__version__" and dotted(target) != "tfnorm":
                self.add(node, name, "reads a __version__")
            elif isinstance(name, str) and is_private(name) and not self.own(target):
                self.add(node, name, f"{function}(..., {name!r}) is private")
        self.generic_visit(node)


def scan_source(source, is_module=is_tfnorm_module):
    """`[(line, name, message)]` of what the boundary forbids in `source`."""
    scanner = Scanner(is_module)
    scanner.visit(ast.parse(source))
    return sorted(set(scanner.found))


def outside_files():
    """Paths (relative to the repo) of every module of tfnorm outside _keras."""
    paths = []
    for directory, subdirectories, files in os.walk(PACKAGE):
        subdirectories[:] = sorted(
            d
            for d in subdirectories
            if os.path.join(directory, d) != BOUNDARY and d != "__pycache__"
        )
        paths.extend(
            os.path.relpath(os.path.join(directory, f), REPO)
            for f in sorted(files)
            if f.endswith(".py")
        )
    return paths


def read(path, root=REPO):
    with open(os.path.join(root, path), encoding="utf-8") as file:
        return file.read()


def report(findings):
    return "\n".join(f"{path}:{line}: {message}" for path, line, message in findings)


# -- the scanner on snippets -----------------------------------------------


def names_found(source, **kwargs):
    return [name for _, name, _ in scan_source(source, **kwargs)]


@pytest.mark.parametrize(
    "source, name",
    [
        ("model._is_compiled", "_is_compiled"),
        ("layer._build_input_shape = None", "_build_input_shape"),
        ("del layer._cache", "_cache"),
        ("keras.optimizers.Adam._create_all_weights", "_create_all_weights"),
        ("super()._x.attr._hidden", "_hidden"),
        ("getattr(optimizer, '_built', False)", "_built"),
        ("setattr(layer, '_flag', True)", "_flag"),
        ("hasattr(layer, '_keras_api_names')", "_keras_api_names"),
        ("object.__setattr__(layer, 'call', f)", "__setattr__"),
        ("object.__delattr__(layer, 'call')", "__delattr__"),
        ("if IS_KERAS_3: pass", "IS_KERAS_3"),
        ("from tfnorm._keras import FLAVOUR", "FLAVOUR"),
        ("x = _keras.FLAVOUR == 'keras3'", "FLAVOUR"),
        ("_keras.KERAS_VERSION", "KERAS_VERSION"),
        ("_keras.TF_RELEASE >= (2, 16)", "TF_RELEASE"),
        ("keras.__version__", "__version__"),
        ("tf.__version__.startswith('2.9')", "__version__"),
        ("getattr(tf, '__version__', '0')", "__version__"),
        ("version.parse(v)", "version.parse"),
        ("from packaging import version", "packaging.version"),
        ("from packaging.version import Version", "packaging.version"),
        ("hasattr(keras.optimizers, 'AdamW')", "hasattr"),
        ("hasattr(tf, 'experimental')", "hasattr"),
        ("hasattr(_keras.keras.layers, 'RMSNormalization')", "hasattr"),
        ("getattr(keras.optimizers, 'AdamW', None)", "getattr"),
        ("import tensorflow as tf", "tensorflow"),
        ("from keras.src import ops", "keras.src"),
        ("import tf_keras", "tf_keras"),
        (
            "from tensorflow.python.ops import control_flow_util",
            "tensorflow.python.ops",
        ),
    ],
)
def test_the_scanner_flags(source, name):
    assert name in names_found(source)


def test_the_scanner_names_the_line():
    source = "a = 1\nb = 2\nmodel._is_compiled\n"
    assert scan_source(source) == [
        (3, "_is_compiled", "touches the private attribute ._is_compiled")
    ]


@pytest.mark.parametrize(
    "source",
    [
        "self._x = 1\nself._x += self._y",
        "cls._registry",
        "super()._clip_gradients(grads)",
        "getattr(self, '_built', False)",
        "layer.__class__.__name__",
        "tfnorm.__version__",
        "from tfnorm import _keras\n_keras.sublayers(layer)",
        "from tfnorm.layers import _ops\n_ops._private_helper(x)",
        "import tfnorm.layers._ops as ops\nops._helper",
        "tfnorm.layers._ops._helper",
        "getattr(layer, 'epsilon', None)",
        "hasattr(optimizer, 'inner_optimizer')",
        "getattr(os, 'O_CLOEXEC', 0)",
        "x = keras.optimizers.Adam(1e-3)",
        "import keras_hub",
    ],
)
def test_the_scanner_leaves_alone(source):
    assert scan_source(source) == []


def test_the_scanner_does_not_take_tfnorm_objects_for_modules():
    # `layers` is a module of tfnorm; `layer` and `tfnorm.layers.RMSNorm`
    # are not.
    source = (
        "from tfnorm import layers\nfrom tfnorm.layers import RMSNorm\n"
        "layers._ops\nRMSNorm._epsilon_range\nlayer._x\n"
    )
    assert names_found(source) == ["_epsilon_range", "_x"]


# -- the classes -------------------------------------------------------------


class ClassUses:
    """Private names a class statement defines or reaches through
    `self`/`cls`/`super()`: `{name: first line}`."""

    def __init__(self, node):
        self.node = node
        self.names = {}
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if sub in node.body:
                    self.note(sub.name, sub.lineno)
            elif isinstance(sub, ast.Attribute):
                if is_super_call(sub.value) or dotted(sub.value) in OWN_OBJECTS:
                    self.note(sub.attr, sub.lineno)
        for statement in node.body:
            targets = []
            if isinstance(statement, ast.Assign):
                targets = statement.targets
            elif isinstance(statement, ast.AnnAssign):
                targets = [statement.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    self.note(target.id, statement.lineno)

    def note(self, name, line):
        if is_private(name):
            self.names.setdefault(name, line)


def class_statements(tree):
    """`[(qualified name or None, ClassDef)]`; None for a class defined in a
    function, which the module does not expose."""
    found = []

    def walk(node, prefix, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = None if in_function else prefix + child.name
                found.append((name, child))
                walk(child, (name or "") + ".", in_function)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, prefix, True)
            else:
                walk(child, prefix, in_function)

    walk(tree, "", False)
    return found


def module_name(path):
    name = path[: -len(".py")].replace(os.sep, ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def is_tfnorm_class(cls):
    return cls.__module__ == "tfnorm" or cls.__module__.startswith("tfnorm.")


def resolve(module, qualname):
    value = module
    for part in qualname.split("."):
        value = getattr(value, part, None)
    return value


def is_made_by(cls, node, module):
    """Whether the class statement `node` of `module` made `cls` (and not a
    statement of the same name in a branch this runtime did not take)."""
    if not inspect.isclass(cls) or cls.__module__ != module:
        return False
    defined = set()
    for statement in node.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(statement.lineno)
            defined.update(d.lineno for d in statement.decorator_list)
    made = set()
    for value in vars(cls).values():
        function = getattr(value, "fget", value)
        code = getattr(function, "__code__", None)
        if code is not None:
            made.add(code.co_firstlineno)
    return not defined or not made or bool(defined & made)


def check_classes(paths, root=REPO, ours=is_tfnorm_class):
    """`[(path, line, message)]` for private Keras/TensorFlow members that
    classes outside the boundary define or use, and for Keras subclasses the
    check cannot see.

    `paths` are relative to `root`, which is on `sys.path`; `ours(cls)` tells
    tfnorm's classes from the rest.
    """
    classes = []
    uses = {}
    findings = []
    for path in paths:
        name = module_name(path)
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for qualname, node in class_statements(ast.parse(read(path, root))):
            cls = resolve(module, qualname) if qualname else None
            if is_made_by(cls, node, name):
                classes.append(cls)
                uses[cls] = (path, ClassUses(node))
            elif any(reaches_keras(base) for base in node.bases):
                findings.append(
                    (
                        path,
                        node.lineno,
                        f"class {node.name} subclasses Keras where this check "
                        "cannot see it (in a function, or a branch not taken "
                        "here); define it at module level or in tfnorm._keras",
                    )
                )
    for cls in classes:
        foreign = [b for b in cls.__mro__ if not ours(b) and b is not object]
        # The class and the mixins before it: a mixin's private method
        # overrides whatever Keras class follows it in this MRO.
        for own in cls.__mro__:
            if own not in uses:
                continue
            path, used = uses[own]
            for private, line in sorted(used.names.items()):
                owners = [base for base in foreign if private in vars(base)]
                if owners:
                    owner = f"{owners[0].__module__}.{owners[0].__qualname__}"
                    findings.append(
                        (
                            path,
                            line,
                            f"{own.__name__} reaches {owner}.{private} "
                            f"(private, in the bases of {cls.__name__})",
                        )
                    )
    return sorted(set(findings))


def test_the_class_check_flags_private_keras_members(tmp_path, monkeypatch):
    # `kerasish.Base` plays a Keras class; `ours` says which classes are
    # tfnorm's.
    (tmp_path / "kerasish.py").write_text(
        "class Base:\n    def _private_hook(self):\n        return None\n"
    )
    package = tmp_path / "ourpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(
        "from kerasish import Base\n"
        "class Mixin:\n"
        "    def _private_hook(self):\n"
        "        return super()._private_hook()\n"
        "class Layer(Mixin, Base):\n"
        "    def _own_helper(self):\n"
        "        return self._own_state\n"
        "def make():\n"
        "    class Local(keras.layers.Layer):\n"
        "        pass\n"
        "class Caller(Base):\n"
        "    def run(self):\n"
        "        return super()._private_hook()\n"
        "if False:\n"
        "    class Caller(Base):\n"
        "        def _private_hook(self):\n"
        "            pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    findings = check_classes(
        [os.path.join("ourpkg", "mod.py")],
        root=str(tmp_path),
        ours=lambda cls: cls.__module__.startswith("ourpkg"),
    )
    # The mixin's override (line 3), found through the class that puts the
    # mixin before the "Keras" base; the local Keras subclass (line 9), which
    # cannot be checked; the call through super() (line 13). The class's own
    # `_own_helper`/`_own_state` pass, and so does the `Caller` of the branch
    # not taken (line 15): only a Keras base would make it fail.
    assert [(line, message.split()[0]) for _, line, message in findings] == [
        (3, "Mixin"),
        (9, "class"),
        (13, "Caller"),
    ]


# -- tfnorm itself -----------------------------------------------------------


def test_there_are_files_to_scan():
    paths = outside_files()
    assert "tfnorm/optim/optimizers.py" in paths
    assert not any(p.startswith("tfnorm/_keras/") for p in paths)


def test_no_module_outside_keras_touches_keras_internals_or_versions():
    findings = []
    for path in outside_files():
        for line, name, message in scan_source(read(path)):
            if (path, name) not in ALLOWED:
                findings.append((path, line, message))
    assert not findings, (
        "Keras internals or version tests outside tfnorm/_keras/; move them "
        "into a tfnorm._keras helper:\n" + report(findings)
    )


def test_no_class_outside_keras_reaches_private_keras_members():
    findings = check_classes(outside_files())
    assert not findings, (
        "private Keras/TensorFlow members used outside tfnorm/_keras/; move "
        "the subclass or the call into tfnorm._keras:\n" + report(findings)
    )


def test_every_allowed_exception_is_still_needed():
    used = {
        (path, name)
        for path in outside_files()
        for _, name, _ in scan_source(read(path))
    }
    assert ALLOWED <= used, f"stale ALLOWED entries: {sorted(ALLOWED - used)}"
