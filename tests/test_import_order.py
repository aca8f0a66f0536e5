"""Imports follow the pipeline: a package imports itself and the packages before it, never one after,
not even inside a function; and inside a package no modules import each other in a loop, not even inside
a function (an import under `if TYPE_CHECKING:` never runs and is left out). `benchmarks/` and `tests/`
may import anything."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ("benchsmith", "ingest", "extractors", "generators", "filters", "annotation", "publish", "evaluation",
            "flows")


def imported_packages(source: str) -> set[str]:
    """The top-level packages a module's source imports anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def imported_modules(source: str, module: str, modules: set[str], package: str | None = None) -> set[str]:
    """The modules of `modules` (dotted names) that `module`'s source imports at run time, anywhere in it:
    `from pkg import mod` names module `pkg.mod`, `from pkg.mod import name` module `pkg.mod`. `package`:
    what a relative import starts from (the module's parent; itself for a package's __init__)."""
    found = set()
    here = (package if package is not None else module.rpartition(".")[0]).split(".")
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or "" if node.level == 0 else ".".join(
                [*here[:len(here) - node.level + 1], *([node.module] if node.module else [])])
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` outside `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_runtime_nodes(child)])
            continue
        yield node
        yield from _runtime_nodes(node)


def import_loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """The loops of an import graph (module -> modules it imports): one list per strongly connected group
    of two or more modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            group.append(module)
            if len(group) > 1:
                loops.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(loops)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def later_packages(package: str, imported: set[str]) -> set[str]:
    """The imported pipeline packages that come after `package`."""
    return imported & set(PIPELINE[PIPELINE.index(package) + 1:])


def test_no_package_imports_a_later_stage():
    offenders = {}
    for package in PIPELINE:
        assert (ROOT / package).is_dir(), package
        for path in sorted((ROOT / package).rglob("*.py")):
            later = later_packages(package, imported_packages(path.read_text(encoding="utf-8")))
            if later:
                offenders[str(path.relative_to(ROOT))] = sorted(later)
    assert offenders == {}, "imports against the pipeline order (file: later packages it imports): " + str(offenders)


def test_the_walk_sees_imports_inside_functions_and_only_later_stages_offend():
    source = "import json\nfrom ingest import sources\ndef f():\n    from filters import richness\n    import flows.build\n"
    assert imported_packages(source) == {"json", "ingest", "filters", "flows"}
    assert later_packages("generators", imported_packages(source)) == {"filters", "flows"}
    assert later_packages("flows", imported_packages(source)) == set()


def test_no_modules_of_a_package_import_each_other_in_a_loop():
    loops = []
    for package in PIPELINE:
        paths = sorted((ROOT / package).rglob("*.py"))
        modules = {module_name(path) for path in paths}
        graph = {module_name(path): imported_modules(path.read_text(encoding="utf-8"), module_name(path), modules,
                                                     module_name(path.parent / "__init__.py"))
                 for path in paths}
        loops += import_loops(graph)
    assert loops == [], "modules that import each other (each a piece in the wrong module): " + str(loops)


def test_the_loop_walk_follows_every_import_form_and_leaves_type_checking_out():
    modules = {"pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.sub", "pkg.sub.d"}
    source = ("from typing import TYPE_CHECKING\nfrom pkg import b\nimport pkg.sub.d\nfrom . import c\n"
              "if TYPE_CHECKING:\n    from pkg.sub import thing\ndef f():\n    from .sub.d import g\n")
    assert imported_modules(source, "pkg.a", modules) == {"pkg", "pkg.b", "pkg.c", "pkg.sub.d"}
    assert imported_modules("from .d import g\nfrom .. import b\n", "pkg.sub", modules, "pkg.sub") == {
        "pkg.sub.d", "pkg", "pkg.b"}
    assert import_loops({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}) == [["a", "b", "c"]]
    assert import_loops({"a": {"b"}, "b": set()}) == []
