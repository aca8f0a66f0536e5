"""A published release to evaluate: the publish tests' reviewed store (oracle scenes, a photo, a video),
published as v1, and a settings helper that adds models."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from publish.release import publish
from benchsmith.settings import load_settings
from benchsmith.store import Store
from tests.publish.conftest import Reviewed, build_reviewed


@dataclass
class Published:
    reviewed: Reviewed
    folder: Path

    @property
    def store(self) -> Store:
        return self.reviewed.store

    @property
    def settings(self):
        return self.reviewed.settings


@pytest.fixture
def published(settings, oracle_dir, tmp_path) -> Published:
    with Store(settings.db_url) as store:
        reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)
        release = publish(store, settings, "v1")
        yield Published(reviewed, release.folder)


def with_evaluate(settings, tmp_path: Path, evaluate: dict, **services) -> object:
    """`settings` with an `evaluate` section (and services) from a settings file, as a user writes one."""
    import os

    import yaml

    path = tmp_path / "benchsmith.yaml"
    path.write_text(yaml.safe_dump({"evaluate": evaluate, **({"services": services} if services else {})}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH") and k not in ("OPENAI_API_KEY",
                                                                                             "OPENAI_BASE_URL")}
    env["BENCHSMITH_WORKSPACE"] = str(settings.workspace)
    return load_settings(path, env=env)
