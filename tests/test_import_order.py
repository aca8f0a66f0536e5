"""Imports follow the pipeline: a package imports itself and the packages before it, never one after,
not even inside a function. `benchmarks/` and `tests/` may import anything."""

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
