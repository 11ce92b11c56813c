"""The house rules a reader checks by eye, read off the source with ``ast``: the package has no import
cycle, imports at the top of its modules (deferring only the optional dependencies), and no module
uses another module's private (``_name``) names."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from toolkit import ROOT

PACKAGE = ROOT / "onnx_masked_rnn"

# What a user may not have installed: the extras' packages (pyproject.toml's optional
# dependencies, beside the test tools). Only these may be imported inside a function.
OPTIONAL = {"keras", "torch", "openvino", "tract", "matplotlib", "tensorflow", "jax"}
# Modules of required packages that may be imported inside a function, and why.
DEFERRED = {
    "onnx.defs.gen_doc": "importing it collects onnx's example snippets (seconds, and output); only the "
    "spec pages need it",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
TESTS = sorted((ROOT / "tests").rglob("*.py"))
FILES = {"onnx_masked_rnn": list(MODULES.values()), "scripts": SCRIPTS, "tests": TESTS}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that runs (not under ``if TYPE_CHECKING:``) and whether it is inside a
    function."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child):
            yield from _imports(ast.Module(body=child.orelse, type_ignores=[]), in_function)
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
        yield from _imports(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))


def _absolute(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The module ``from ... import`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.Import | ast.ImportFrom, module: str, path: Path) -> list[str]:
    """The modules an import statement loads: for ``from M import x``, ``M.x`` when that is a module
    of the package, else ``M``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    source = _absolute(node, module, path)
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]


def _in_package(name: str) -> str | None:
    """The package module ``name`` is, or holds (``import a.b.c`` of a name that is not a module),
    or None outside the package."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports, at the top or inside functions."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges = graph.setdefault(module, set())
        for node, _ in _imports(ast.parse(path.read_text())):
            for target in _targets(node, module, path):
                found = _in_package(target)
                if found and found != module:
                    edges.add(found)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (``[a, b, ..., a]``) of ``graph``, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_one() -> None:
    """The checker itself: a cycle through three modules is found, a diamond is not a cycle."""
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None


def test_the_package_has_no_import_cycle() -> None:
    """No module of ``onnx_masked_rnn`` imports, directly or through others, itself: imports inside
    functions count (they are how a cycle hides), ``if TYPE_CHECKING:`` ones do not (they never run)."""
    graph = import_graph()
    assert "onnx_masked_rnn.conformance.worker" in graph["onnx_masked_rnn.conformance.runner"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _optional_modules() -> set[str]:
    """The package modules that need an optional dependency to import (at their top level,
    directly or through another package module)."""
    needs: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        needs[module] = set()
        for node, in_function in _imports(ast.parse(path.read_text())):
            if not in_function:
                needs[module] |= {_in_package(t) or t.partition(".")[0] for t in _targets(node, module, path)}
    optional = set(OPTIONAL)
    while grown := {m for m, deps in needs.items() if m not in optional and deps & optional}:
        optional |= grown
    return optional - OPTIONAL


def _local_imports(paths: list[Path]) -> list[str]:
    """``file:line: module`` of every import inside a function of one of ``paths`` that is not of an
    optional dependency."""
    optional = _optional_modules()
    found = []
    for path in paths:
        module = _module_name(path) if path.is_relative_to(PACKAGE) else path.stem
        for node, in_function in _imports(ast.parse(path.read_text())):
            if not in_function:
                continue
            for target in dict.fromkeys(_targets(node, module, path)):
                if (
                    target.partition(".")[0] in OPTIONAL
                    or target in DEFERRED
                    or _in_package(target) in optional
                ):
                    continue
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target}")
    return found


def test_imports_are_at_the_top_except_optional_dependencies() -> None:
    """Every module imports what it needs at its top; only an optional dependency (:data:`OPTIONAL`,
    or a module of the package that needs one to import) is imported inside the function that
    needs it, so that the rest works without it; and the few :data:`DEFERRED` modules, for the
    reason given there."""
    found = _local_imports([*MODULES.values(), *SCRIPTS])
    assert not found, f"{len(found)} imports inside functions:\n" + "\n".join(found)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _bindings(tree: ast.AST, module: str, path: Path) -> tuple[dict[str, str], list[str]]:
    """The names imports bind to the package's modules and their contents (name -> where it comes
    from, dotted), and each ``from M import _x`` of a private name that is not a module."""
    names: dict[str, str] = {}
    private = []
    for node, _ in _imports(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.name if alias.asname else alias.name.partition(".")[0]
                if _in_package(alias.name):
                    names[alias.asname or bound] = bound
            continue
        source = _absolute(node, module, path)
        for alias in node.names:
            if _in_package(source):
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
            if _private(alias.name) and f"{source}.{alias.name}" not in MODULES and source != "__future__":
                private.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {source} import {alias.name}")
    return names, private


def _public(module: str) -> set[str] | None:
    """The names a module of the package lists in ``__all__`` (None when it has no ``__all__``)."""
    for node in ast.parse(MODULES[module].read_text()).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            return set(ast.literal_eval(node.value))
    return None


def unlisted_imports(path: Path) -> list[str]:
    """``file:line: from M import x`` of each name imported from a module of the package whose
    ``__all__`` does not list it (nor is it a submodule): a module's public names are the ones
    it lists."""
    module = _module_name(path) if path.is_relative_to(PACKAGE) else path.stem
    found = []
    for node, _ in _imports(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _absolute(node, module, path)
        public = _public(source) if source in MODULES and source != module else None
        for alias in node.names:
            if public is not None and alias.name not in public and f"{source}.{alias.name}" not in MODULES:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {source} import {alias.name}")
    return found


def _origin(node: ast.AST, names: dict[str, str]) -> str | None:
    """Where ``node`` (``name`` or ``name.attr...``) comes from when it is a name the package's
    imports bound, or a module of the package read off one; else None."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _origin(node.value, names)
        if base in MODULES:
            return f"{base}.{node.attr}"
    return None


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def private_uses(path: Path, source: str | None = None) -> list[str]:
    """``file:line: what`` of each use in ``path`` (or in ``source``, said to be that file) of a
    private name of another module of the package, in line order: imported (``from M import _x``),
    read off a module of the package (``m._x``, ``getattr(m, "_x")``, ``mock.patch.object(m, "_x")``),
    or patched by its dotted path (``mock.patch("p.m._x")``). Third-party private names
    (``torch._check``, a torch op's ``_opoverload``) are not this rule's."""
    module = _module_name(path) if path.is_relative_to(PACKAGE) else path.stem
    tree = ast.parse(path.read_text() if source is None else source)
    names, found = _bindings(tree, module, path)
    where = f"{path.relative_to(ROOT)}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and _origin(node.value, names) in MODULES:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and node.args:
            first, second = node.args[0], node.args[1] if len(node.args) > 1 else None
            attribute = _string(second) if second is not None else None
            if attribute and _private(attribute) and _origin(first, names) in MODULES:
                found.append(
                    f"{where}:{node.lineno}: {ast.unparse(node.func)}({ast.unparse(first)}, {attribute!r})"
                )
            dotted = _string(first)
            if dotted and _in_package(dotted) and " " not in dotted and any(map(_private, dotted.split("."))):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node.func)}({dotted!r})")
    return sorted(found, key=lambda use: int(use.split(":")[1]))


def test_private_uses_are_found() -> None:
    """The checker itself, on a file of each kind of use."""
    source = (
        "import onnx_masked_rnn.bench as bench\n"
        "from unittest import mock\n"
        "from onnx_masked_rnn.reference import _COMPUTED\n"
        "from onnx_masked_rnn import _worker, reference\n"
        "bench._workload()\n"
        "mock.patch.object(reference, '_COMPUTED')\n"
        "mock.patch('onnx_masked_rnn.fuzz._run')\n"
        "_worker.Worker, reference.FUNCTIONS, self._x\n"
        "import torch\n"
        "from onnx_masked_rnn.torch import ops\n"
        "torch._check(True), ops.masked_lstm._opoverload\n"
        "import onnx_masked_rnn.fuzz\n"
        "onnx_masked_rnn.fuzz._run, getattr(ops, '_lib')\n"
    )
    path = ROOT / "scripts" / "example.py"
    assert [u.split(": ", 1)[1] for u in private_uses(path, source)] == [
        "from onnx_masked_rnn.reference import _COMPUTED",
        "bench._workload",
        "mock.patch.object(reference, '_COMPUTED')",
        "mock.patch('onnx_masked_rnn.fuzz._run')",
        "onnx_masked_rnn.fuzz._run",
        "getattr(ops, '_lib')",
    ]


@pytest.mark.parametrize("where", FILES)
def test_no_module_uses_another_modules_private_names(where: str) -> None:
    """A private name (``_x``) is its module's own: no module of the package, script or test imports
    one from another module, reads one off an imported module or object, or patches one. (Private
    modules, ``onnx_masked_rnn._worker`` and the like, are the package's internals: modules of the
    package import them; their public names are what they offer.)"""
    found = [use for path in FILES[where] for use in private_uses(path)]
    assert not found, f"{len(found)} uses of other modules' private names:\n" + "\n".join(found)


@pytest.mark.parametrize("where", FILES)
def test_modules_import_only_the_names_others_list_as_public(where: str) -> None:
    """A name imported from a module of the package is one its ``__all__`` lists."""
    found = [use for path in FILES[where] for use in unlisted_imports(path)]
    assert not found, f"{len(found)} imports of names their module does not list in __all__:\n" + "\n".join(
        found
    )
