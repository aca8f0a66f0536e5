"""Fixtures for the extractor tests: a few oracle scenes in a store, and settings with an extract section."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml


@pytest.fixture(scope="session")
def few_scenes(tmp_path_factory) -> Path:
    """Six oracle scenes (seed 7): enough signs and shapes to check OCR and supplied boxes."""
    from ingest.scenes import make_scenes

    return make_scenes(tmp_path_factory.mktemp("scenes"), 6, seed=7)


@pytest.fixture
def configure(settings, tmp_path):
    """configure({...extract section...}) -> Settings for the test workspace with that section merged in."""
    from benchsmith.settings import load_settings

    def make(extract: dict, **other) -> object:
        path = tmp_path / "benchsmith.yaml"
        path.write_text(yaml.safe_dump({"extract": extract, **other}), encoding="utf-8")
        return load_settings(path, env={"BENCHSMITH_WORKSPACE": str(settings.workspace)})
    return make


@pytest.fixture
def ingested(store, settings, few_scenes):
    """The six scenes ingested into `store` (media under the test workspace); returns their images."""
    from ingest.sources import candidates_for
    from ingest.stage import ingest

    ingest(store, settings.media_dir, candidates_for(few_scenes), settings.ingest, label="scenes")
    return store.get_items(kind="image")
