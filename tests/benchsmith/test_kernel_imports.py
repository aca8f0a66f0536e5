"""The kernel stands alone: nothing under benchsmith/ imports a stage package, not even inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

KERNEL = Path(__file__).resolve().parents[2] / "benchsmith"
STAGE_PACKAGES = {"flows", "ingest", "extractors", "generators", "filters", "annotation", "publish", "evaluation"}


def imported_packages(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_no_kernel_module_imports_a_stage_package():
    offenders = {
        str(path.relative_to(KERNEL.parent)): sorted(imported_packages(path.read_text(encoding="utf-8")) & STAGE_PACKAGES)
        for path in KERNEL.rglob("*.py")}
    assert {path: packages for path, packages in offenders.items() if packages} == {}


def test_the_walk_sees_imports_inside_functions():
    assert imported_packages("def f():\n    from filters import richness\n    import flows.build\n") == {"filters", "flows"}
