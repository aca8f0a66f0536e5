"""`make demo` and `make finish` as the README tells a maintainer to run them, reviewed by the one person
the demo logs in: the Makefile's own recipes, a real Label Studio started from the demo's workspace."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from label_studio_sdk import LabelStudio

from benchsmith.paths import REPO_ROOT
from benchsmith.store import Store
from tests.annotation.test_pull import result


def make(target: str, demo: Path, **variables: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "LABEL_STUDIO", "MAKE"))}
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO_ROOT), target, f"DEMO={demo}",
                           *(f"{k}={v}" for k, v in variables.items())],
                          env=env | {"COLUMNS": "200"}, capture_output=True, text=True, timeout=1500)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def credentials(demo: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in (demo / "labelstudio.env").read_text().splitlines())


@pytest.mark.timeout(1800)  # a first start of Label Studio migrates its database: minutes on a busy box
@pytest.mark.slow(seconds=165)
def test_the_demo_is_built_reviewed_by_its_one_admin_and_finished_into_a_release(prefect_api, tmp_path):
    demo = tmp_path / "demo"
    previous = os.umask(0o022)  # a usual login umask: what the shell itself creates is readable by everyone
    try:
        built = make("demo-run", demo, SCENES="4")
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        review_and_finish(demo, credentials(demo), built.stdout)
    finally:
        os.umask(previous)
        down = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "benchsmith"), "labelstudio", "down"],
                              cwd=demo, capture_output=True, text=True, timeout=60)
    assert "stopped" in down.stdout, down.stdout + down.stderr


def review_and_finish(demo: Path, login: dict[str, str], out: str) -> None:
    bench = demo / "bench"
    # secrets and Label Studio's data (its database holds the token) are the user's alone
    assert mode(demo / "labelstudio.env") == 0o600 and mode(bench / "labelstudio") == 0o700
    assert mode(bench / "labelstudio" / "label_studio.sqlite3") == 0o600
    assert mode(bench) == mode(bench / "media") == 0o700 and mode(bench / "benchsmith.db") == 0o600
    # a port of its own, so another Label Studio on 8080 is never taken for the demo's
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", login["LABEL_STUDIO_URL"])
    assert f"log in at {login['LABEL_STUDIO_URL']} as admin@benchsmith.local" in out
    assert "each question needs one review here" in out and "labelstudio down" in out
    assert out.count('press "Label All Tasks"') == 1, out  # the annotator guide, once

    # the admin reviews every task in the browser's stead: the generated key, kept
    with Store(f"sqlite:///{bench / 'benchsmith.db'}") as store:
        questions = {q.id: q for q in store.get_questions(status="in_review")}
        tasks = {task: qid for qid, (_project, task) in store.get_review_tasks("question").items()}
    assert questions and set(tasks.values()) == set(questions)
    admin = LabelStudio(base_url=login["LABEL_STUDIO_URL"], api_key=login["LABEL_STUDIO_API_KEY"])
    from annotation.settings import ReviewSettings

    review = ReviewSettings()
    for task_id, qid in tasks.items():
        question = questions[qid]
        data = admin.tasks.get(id=task_id).data
        admin.annotations.create(id=task_id, result=result(data, True, question.answer, question.dimension_id, (),
                                                           review))

    finished = make("finish", demo, VERSION="v1")
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert f"decided now: {len(questions)} accepted, 0 rejected" in finished.stdout
    assert f"Release v1: {len(questions)} questions in" in finished.stdout
    card = (bench / "releases" / "v1" / "README.md").read_text()
    extraction = next(line for line in card.splitlines() if line.startswith("1. **Extraction.**"))
    assert "annotations supplied with the images" in extraction and "`rapidocr-3." in extraction
    assert "supplied:" not in card and "rapidocr:" not in card  # no work-ledger keys
