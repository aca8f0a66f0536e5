"""Where the real photographs and scans with their published truth are (COCO photos, YOLO boxes, SROIE
receipts; see its README.md): `BENCHSMITH_SHARED_DATA`, else `../shared/data` beside the checkout, as CI
lays it out. Tests and benchmarks read them from here and never copy them into the repository.

The tests that need them fail (never skip) when the folder is missing, so a run without the data
cannot pass by testing less."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchsmith.paths import REPO_ROOT

ENV = "BENCHSMITH_SHARED_DATA"


def shared_data_dir() -> Path:
    return Path(os.environ.get(ENV) or REPO_ROOT.parent / "shared" / "data").resolve()


def require_shared_data(*parts: str) -> Path:
    """The folder (or file) `parts` under the shared data; a failure that says where it looked otherwise."""
    path = shared_data_dir().joinpath(*parts)
    if not path.exists():
        pytest.fail(f"real test data not found at {path}: lay ../shared/data beside the checkout, or set {ENV}")
    return path
