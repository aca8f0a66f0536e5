"""How long pushing review tasks to Label Studio takes, and that a re-push adds none.

Target: 10,000 tasks in 15 s or less. Also measures task-by-task creation on a small sample, the way
a naive client would push, for the ratio.

    .venv/bin/python benchmarks/review_push.py            # 10,000 tasks, median of 3 pushes
    .venv/bin/python benchmarks/review_push.py --quick    # 1,000 tasks, one push

Uses the server at LABEL_STUDIO_URL with LABEL_STUDIO_API_KEY when both are set; otherwise starts a
throwaway one from .venv-labelstudio (its first start migrates for about 40 s, not counted).
Writes benchmarks/results/review_push.json.
"""

from __future__ import annotations

import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from PIL import Image as PILImage

from annotation.client import connect
from annotation.labeling import to_task
from annotation.push import image_base, push, questions_to_push
from annotation.server import install, start, stop
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.records import Image, Provenance, Question, Verdict, stable_hash
from benchsmith.settings import Settings, load_settings
from benchsmith.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, save, timed, user_env  # noqa: E402

TARGET_S = 15.0


def seed(store: Store, settings: Settings, n: int) -> list[Question]:
    """n questions that passed the blind filter, over n items sharing one small image file."""
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    PILImage.new("RGB", (64, 48), (90, 140, 200)).save(settings.media_dir / "shared.png")
    items = [Image(id=stable_hash("bench", i), path="shared.png", width=64, height=48) for i in range(n)]
    questions = [Question(item_id=item.id, dimension_id=1 + i % 9, text=f"Benchmark question {i}?",
                          options=[f"option {i} {k}" for k in "abcd"], answer=i % 4,
                          provenance=Provenance(backend="benchmark")) for i, item in enumerate(items)]
    store.add_items(items)
    store.add_questions(questions, stage="generate", verdicts_for_new=[
        Verdict(subject_id=q.id, subject_kind="question", stage="blind", rule="benchmark", passed=True)
        for q in questions])
    return questions


def one_push(env: dict[str, str], root: Path, n: int, batch_size: int) -> dict:
    workspace = root / f"ws-{uuid.uuid4().hex[:8]}"
    settings = load_settings(env=env | {"BENCHSMITH_WORKSPACE": str(workspace),
                                        "BENCHSMITH__REVIEW__PROJECT": f"benchmark {workspace.name}",
                                        "BENCHSMITH__REVIEW__BATCH_SIZE": str(batch_size)})
    review = settings.section("review", ReviewSettings)
    with Store(settings.db_url) as store:
        seed(store, settings, n)
        server = connect(settings)

        def push_all():
            return push(store, server, settings, registry(), questions_to_push(store, review))
        push_s, report = timed(push_all)
        repush_s, again = timed(push_all)
        on_server = server.client.projects.get(id=report.project_id).task_number
    return {"push_s": push_s, "sent": report.sent, "repush_s": repush_s, "repush_sent": again.sent,
            "tasks_on_server": on_server}


def one_by_one(env: dict[str, str], root: Path, sample: int) -> float:
    """Seconds per task when each task is its own import call."""
    workspace = root / f"ws-{uuid.uuid4().hex[:8]}"
    settings = load_settings(env=env | {"BENCHSMITH_WORKSPACE": str(workspace),
                                        "BENCHSMITH__REVIEW__PROJECT": f"one by one {workspace.name}"})
    review = settings.section("review", ReviewSettings)
    with Store(settings.db_url) as store:
        questions = seed(store, settings, sample)
        server = connect(settings)
        push(store, server, settings, registry(), [])  # creates the project
        project_id = next(p.id for p in server.client.projects.list() if p.title == review.project)
        item = store.get_items()[0]
        tasks = [to_task(q, item, registry(), review, image_base(settings, review)) for q in questions]
        started = time.perf_counter()
        for task in tasks:
            server.client.projects.import_tasks(id=project_id, request=[task], return_task_ids=True)
        return (time.perf_counter() - started) / sample


def run(n: int = 10_000, repeats: int = 3, batch_size: int = 1000, one_by_one_sample: int = 50) -> dict:
    root = Path(tempfile.mkdtemp(prefix="benchsmith-review-push-"))
    env = user_env() | {"BENCHSMITH__REVIEW__LOCAL_FILES_ROOT": str(root)}
    process = None
    if not (env.get("LABEL_STUDIO_URL") and env.get("LABEL_STUDIO_API_KEY")):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env |= {"LABEL_STUDIO_URL": f"http://127.0.0.1:{port}",
                "LABEL_STUDIO_API_KEY": uuid.uuid4().hex, "LABEL_STUDIO_PASSWORD": uuid.uuid4().hex,
                "BENCHSMITH_WORKSPACE": str(root / "server")}
        settings = load_settings(env=env)
        review = settings.section("review", ReviewSettings)
        install(review)
        process = start(settings, review, env=env)
    try:
        runs = [one_push(env, root, n, batch_size) for _ in range(repeats)]
        per_task_s = one_by_one(env, root, one_by_one_sample)
    finally:
        if process is not None:
            stop(process)
    median_s = statistics.median(r["push_s"] for r in runs)
    return {
        "n_tasks": n, "batch_size": batch_size, "repeats": repeats,
        "push_s_median": round(median_s, 3), "push_s_runs": [round(r["push_s"], 3) for r in runs],
        "tasks_per_s": round(n / median_s, 1), "target_s": TARGET_S, "within_target": median_s <= TARGET_S * n / 10_000,
        "repush_added": max(r["repush_sent"] for r in runs),
        "repush_s_median": round(statistics.median(r["repush_s"] for r in runs), 3),
        "tasks_on_server": [r["tasks_on_server"] for r in runs],
        "one_by_one_s_per_task": round(per_task_s, 4),
        "one_by_one_estimate_s": round(per_task_s * n, 1),
        "speedup_vs_one_by_one": round(per_task_s * n / median_s, 1),
    }


if __name__ == "__main__":
    args = arguments(__doc__, {"n": 1000, "repeats": 1, "one_by_one_sample": 20}, n=10_000, repeats=3,
                     one_by_one_sample=50).parse_args()
    save("review_push", run(args.n, args.repeats, one_by_one_sample=args.one_by_one_sample))
