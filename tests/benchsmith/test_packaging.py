"""A wheel (not only an editable checkout) carries the data folder where benchsmith.paths looks for it."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from benchsmith.paths import find_shipped_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_ships_every_data_file_under_share(tmp_path):
    leftover = not (ROOT / "build").exists()  # setuptools builds in the checkout's build/: tidy up after
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path), str(ROOT)], check=True, capture_output=True, text=True)
    assert "License classifiers are deprecated" not in built.stdout + built.stderr
    assert "`project.license` as a TOML table is deprecated" not in built.stdout + built.stderr
    if leftover:
        shutil.rmtree(ROOT / "build", ignore_errors=True)
    (wheel,) = tmp_path.glob("benchsmith-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"evaluation/prompts.yaml", "evaluation/cli.py", "benchsmith/settings.yaml", "publish/card.md",
            "publish/lmms_eval/task.yaml.template", "publish/lmms_eval/utils.py", "ingest/stage.py", "flows/app.py"} <= set(names)
    prompts = {p.relative_to(ROOT).as_posix() for p in (ROOT / "generators" / "prompts").rglob("*.yaml")}
    assert "generators/prompts/image_sets/_shared.yaml" in prompts and prompts <= set(names)
    shipped = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    expected = {f"share/benchsmith/data/{p.relative_to(ROOT / 'data').as_posix()}"
                for p in (ROOT / "data").rglob("*") if p.is_file()}
    assert expected <= shipped
    assert {"share/benchsmith/locks/labelstudio.txt", "share/benchsmith/locks/lock.py"} <= shipped


def test_data_dir_is_the_checkout_then_the_installed_copy(tmp_path):
    assert find_shipped_dir("data", "dimensions.yaml", env={}, checkout=ROOT) == ROOT / "data"
    installed = find_shipped_dir("data", "dimensions.yaml", env={}, checkout=tmp_path / "site-packages", prefix=str(tmp_path))
    assert installed == tmp_path / "share" / "benchsmith" / "data"
    assert find_shipped_dir("data", "dimensions.yaml", env={"BENCHSMITH_DATA_DIR": "/elsewhere"}) == Path("/elsewhere")
    assert find_shipped_dir("locks", "lock.py", env={}, checkout=ROOT) == ROOT / "locks"
