"""P2: rerunning a finished build costs 0 tokens and at most 0.10x the first run's wall time.

The installed `benchsmith build` runs twice over the same oracle scenes, as separate processes (each
pays its own start-up), against a Prefect server this benchmark starts, with the LLM generator on
the scripted OpenAI-compatible server adding `delay` seconds to every call. Review push is left out
(no Label Studio here). Reported: both wall times, their ratio, and the HTTP calls and tokens of the
rerun. Results: benchmarks/results/build_rerun.json.

    .venv/bin/python benchmarks/build_rerun.py            # 40 scenes, 500 ms per LLM call
    .venv/bin/python benchmarks/build_rerun.py --quick    # 8 scenes, 100 ms
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import arguments, cli, save, user_env  # noqa: E402
from tests.support.services import prefect_server  # noqa: E402

TARGET_RATIO = 0.10


def llm_reply(delay: float):
    """One question per call, its text tagged by the prompt (so every question is new), after `delay` s."""
    from tests.support.openai_server import json_completion

    def respond(request: dict):
        tag = hashlib.sha256(json.dumps(request["messages"]).encode()).hexdigest()[:8]
        reply = json_completion({"questions": [
            {"question": f"Which shape sits closest to the top edge of the picture? ({tag})",
             "options": ["circle", "square", "star", "diamond"], "answer": "B"}]},
            prompt_tokens=900, completion_tokens=120)
        reply.delay = delay
        return reply
    return respond


def tokens_paid(workspace: Path) -> int:
    from benchsmith.settings import load_settings
    from benchsmith.store import Store

    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        return sum(v["tokens_in"] + v["tokens_out"] for v in store.llm_totals().values())


def run(scenes: int = 40, delay: float = 0.5) -> dict:
    from ingest.scenes import make_scenes
    from tests.support.openai_server import ScriptedOpenAI

    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAI(llm_reply(delay)) as llm, \
            prefect_server(Path(tmp) / "prefect-home") as api:
        tmp = Path(tmp)
        manifest = make_scenes(tmp / "scenes", scenes, seed=8)
        env = user_env("LABEL_STUDIO") | {
            "BENCHSMITH_WORKSPACE": str(tmp / "bench"), "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp / "prefect-home"),
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-benchmark",
            "BENCHSMITH__GENERATE__GENERATORS": "[programmatic, llm]",
            "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": "8"}
        runs = []
        for _ in range(2):
            calls_before = llm.calls
            seconds, _ = cli("build", str(manifest), cwd=tmp, env=env)
            runs.append({"seconds": round(seconds, 2), "http_calls": llm.calls - calls_before,
                         "tokens_paid_so_far": tokens_paid(tmp / "bench")})
    first, rerun = runs
    rerun["tokens"] = rerun["tokens_paid_so_far"] - first["tokens_paid_so_far"]
    ratio = rerun["seconds"] / first["seconds"]
    return {"case": "P2 build_rerun", "scenes": scenes, "llm_delay_s": delay, "first": first, "rerun": rerun,
            "ratio": round(ratio, 3), "target_ratio": TARGET_RATIO,
            "meets_target": ratio <= TARGET_RATIO and rerun["tokens"] == 0 and rerun["http_calls"] == 0}


if __name__ == "__main__":
    args = arguments(__doc__, {"scenes": 8, "delay": 0.1}, scenes=40, delay=0.5).parse_args()
    save("build_rerun", run(args.scenes, args.delay))
