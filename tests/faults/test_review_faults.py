"""Label Studio going away in the middle of a push: a clear error, nothing lost, and a rerun completes."""

from __future__ import annotations

import subprocess
import time
from collections import Counter

import sqlalchemy as sa

from annotation.client import connect
from benchsmith.store import Store
from benchsmith.store.schema import review_tasks
from tests.annotation.conftest import seed_questions
from tests.faults.conftest import BENCHSMITH


def test_label_studio_stopped_mid_push_is_a_clear_error_and_a_rerun_completes(label_studio, tmp_path):
    settings = label_studio.settings(batch_size=50)
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [1 + i % 9 for i in range(1200)])
    env = dict(label_studio.env, BENCHSMITH_WORKSPACE=str(settings.workspace),
               BENCHSMITH__REVIEW__PROJECT=settings.raw["review"]["project"], BENCHSMITH__REVIEW__BATCH_SIZE="50")
    push = subprocess.Popen([BENCHSMITH, "review", "push"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    engine = sa.create_engine(settings.db_url)
    deadline = time.time() + 120
    pushed = 0
    try:
        while pushed < 200:
            assert push.poll() is None, push.communicate()
            assert time.time() < deadline, "the push did not get going"
            with engine.connect() as conn:
                pushed = conn.scalar(sa.select(sa.func.count()).select_from(review_tasks)) or 0
            time.sleep(0.05)
        label_studio.stop()  # the server goes away while batches are still being sent
        _out, err = push.communicate(timeout=300)
    finally:
        engine.dispose()
        if label_studio.process is None:
            label_studio.start()
    assert push.returncode == 2, err
    assert "cannot reach Label Studio" in err and "Traceback" not in err

    with Store(settings.db_url) as store:
        assert 0 < len(store.get_review_tasks("question")) < len(questions), "stopped too late to prove anything"
    rerun = subprocess.run([BENCHSMITH, "review", "push"], env=env, cwd=tmp_path, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    with Store(settings.db_url) as store:
        tasks = store.get_review_tasks("question")
        assert len(tasks) == len(questions) and all(task for _, task in tasks.values())
        project_id = next(iter(tasks.values()))[0]
    on_server = Counter(t.data["question_id"] for t in connect(settings).client.tasks.list(
        project=project_id, page_size=1000, fields="task_only"))
    assert set(on_server) == {q.id for q in questions} and set(on_server.values()) == {1}
