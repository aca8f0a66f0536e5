"""Label Studio's venv lives in a per-user data folder, outside any git checkout."""

from __future__ import annotations

from pathlib import Path

from annotation.server import default_venv, server_environment, venv_path
from annotation.settings import ReviewSettings
from benchsmith.paths import REPO_ROOT
from benchsmith.settings import load_settings


def test_the_default_venv_is_a_per_user_data_folder_outside_the_checkout(tmp_path):
    assert default_venv({"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "benchsmith" / "labelstudio-venv"
    assert default_venv({}) == Path.home() / ".local" / "share" / "benchsmith" / "labelstudio-venv"
    review = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path)}).section("review", ReviewSettings)
    assert not venv_path(review).is_relative_to(REPO_ROOT)
    moved = ReviewSettings.model_validate({"server": {"venv": str(tmp_path / "ls")}})
    assert venv_path(moved) == (tmp_path / "ls").resolve()


def test_the_server_cannot_take_a_surrounding_checkout_for_its_own_version(tmp_path):
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path), "LABEL_STUDIO_API_KEY": "token-123456"})
    review = ReviewSettings.model_validate({"server": {"venv": str(REPO_ROOT / ".venv-labelstudio")}})
    env = server_environment(settings, review, {"LABEL_STUDIO_PASSWORD": "long-enough-1",
                                                "LABEL_STUDIO_API_KEY": "token-123456"})
    assert env["GIT_CEILING_DIRECTORIES"] == str(venv_path(review))
