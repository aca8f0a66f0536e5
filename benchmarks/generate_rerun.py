"""What does rerunning generate cost once everything is done, or after the done-markers are lost?

Generates LLM questions for `items` images x 9 dimensions against the scripted OpenAI-compatible server
(`delay` seconds a call), then reruns: (1) as is, where every job is already marked done; (2) with the
generate done-markers deleted, so every job runs again and must be answered from the call cache. Both
reruns must make 0 HTTP calls and add 0 questions; their wall times are reported beside the first run's.
Results: benchmarks/results/generate_rerun.json.

    .venv/bin/python benchmarks/generate_rerun.py            # 40 images (360 calls)
    .venv/bin/python benchmarks/generate_rerun.py --quick    # 8 images
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import add_captioned_images, arguments, save, timed  # noqa: E402


def _reply(delay: float):
    from tests.support.openai_server import json_completion

    def respond(request: dict):
        user = request["messages"][1]["content"]
        tag = f"{user.split('.')[0]} {len(user)}"
        answer = json_completion({"questions": [
            {"question": f"Which shape is nearest the top edge? ({tag})",
             "options": ["circle", "square", "star", "diamond"], "answer": "B"},
            {"question": f"What colour is the background? ({tag})",
             "options": ["cream", "light grey", "pale blue", "pale green"], "answer": "A"}]})
        answer.delay = delay
        return answer
    return respond


def run(items: int = 40, delay: float = 0.05) -> dict:
    from benchsmith.settings import load_settings
    from benchsmith.store import Store
    from benchsmith.store.schema import work_ledger
    from generators.stage import run_generate
    from tests.support.openai_server import ScriptedOpenAI

    timings = {}
    with ScriptedOpenAI(_reply(delay)) as server, tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(env={"BENCHSMITH_WORKSPACE": tmp, "OPENAI_BASE_URL": server.base_url,
                                      "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "32"})
        with Store(settings.db_url) as store:
            add_captioned_images(store, items)
            for name in ("first", "rerun_done", "rerun_from_cache"):
                if name == "rerun_from_cache":
                    with store.engine.begin() as conn:
                        conn.execute(work_ledger.delete().where(work_ledger.c.stage == "generate:llm"))
                calls = server.calls
                seconds, report = timed(lambda: run_generate(store, settings, generators=["llm"]))
                timings[name] = {"seconds": round(seconds, 3), "http_calls": server.calls - calls,
                                 **{key: report[key] for key in ("jobs", "new_questions", "llm_cached")}}
    return {"items": items, "server_delay_s": delay, "runs": timings,
              "reruns_free": all(timings[n]["http_calls"] == 0 and timings[n]["new_questions"] == 0
                                 for n in ("rerun_done", "rerun_from_cache"))}


if __name__ == "__main__":
    args = arguments(__doc__, {"items": 8}, items=40, delay=0.05).parse_args()
    save("generate_rerun", run(args.items, args.delay))
