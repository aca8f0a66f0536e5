"""Scaling out (issue 14): the build's heavy stages on 1 vs 2 Dask worker processes, and an estimate of
a 1M-image build from the per-item costs measured here.

Each configuration runs `benchsmith build` as a process, as a user runs it, on a fresh PostgreSQL
database and against a Prefect server this benchmark starts (workers report to it):

- local: the default runner, each stage one task in the command's process;
- dask-1 / dask-2: `prefect.task_runner: dask` with a LocalCluster of 1 or 2 worker processes (one thread
  each), the stage's pending work split into two shards per worker.

Two workloads:
- extract: the offline build over `--scenes` oracle scenes (supplied annotations + RapidOCR on every
  image, programmatic and temporal questions, the offline blind filter). RapidOCR is CPU work, so on
  this 2-core machine two workers can at best halve it.
- generate: `--llm-scenes` scenes with only the LLM generator (9 image dimensions each), against the
  scripted OpenAI-compatible server answering every call after `--delay` seconds, 8 calls in flight per
  process. This is waiting, not computing: each worker adds its own 8 calls in flight.

Reported per configuration: the command's wall time and each stage's span (its first shard's start to
its last shard's end, from the run's stage records), and the ratios dask-1 / dask-2. The row and call
counts per image of the runs feed `benchmarks/results/scale_estimate.md`, a 1M-image estimate on N
workers. Results: benchmarks/results/distributed_scaling.json.

    .venv/bin/python benchmarks/distributed_scaling.py            # 400 + 100 scenes (~15 min here)
    .venv/bin/python benchmarks/distributed_scaling.py --quick    # 40 + 20 scenes
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.build_rerun import llm_reply  # noqa: E402
from benchmarks.common import RESULTS, arguments, cli, save, user_env  # noqa: E402
from tests.support.services import fresh_database, postgres_server, prefect_server  # noqa: E402

CONCURRENCY = 8  # LLM calls in flight per process
RUNNERS = {"local": {}, "dask-1": {"TASK_RUNNER": "dask", "DASK__WORKERS": "1"},
           "dask-2": {"TASK_RUNNER": "dask", "DASK__WORKERS": "2"}}
# the store's tables a build writes, counted per image for the estimate
TABLES = ("items", "facts", "questions", "verdicts", "work_ledger", "llm_calls", "stage_runs")


def _build(manifest: Path, db_url: str, workdir: Path, env: dict) -> dict:
    """One `benchsmith build` of `manifest` into `db_url`: wall seconds, stage spans, rows per table."""
    env = env | {"BENCHSMITH_WORKSPACE": str(workdir), "BENCHSMITH_DB_URL": db_url}
    seconds, _ = cli("build", str(manifest), cwd=workdir.parent, env=env)
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            records = conn.execute(sa.text(
                "SELECT stage, started_at, finished_at FROM stage_runs WHERE status = 'done' ORDER BY started_at")).all()
            rows = {table: conn.scalar(sa.text(f"SELECT count(*) FROM {table}")) for table in TABLES}
            review = conn.scalar(sa.text("SELECT count(*) FROM questions WHERE status = 'candidate'"))
    finally:
        engine.dispose()
    shards: dict[str, list] = {}  # a sharded stage's records are named "<stage>#<shard>"
    for stage, started_at, finished_at in records:
        if stage.split("#")[0].startswith(("extract:", "generate:", "blind")):
            shards.setdefault(stage.split("#")[0], []).append((started_at, finished_at))
    spans = {stage: round((max(f for _s, f in runs) - min(s for s, _f in runs)).total_seconds(), 2)
             for stage, runs in shards.items()}
    # each shard as (start, seconds) from the stage's first start: shows whether the shards overlapped
    timelines = {stage: [(round((s - runs[0][0]).total_seconds(), 2), round((f - s).total_seconds(), 2))
                         for s, f in runs] for stage, runs in shards.items()}
    return {"seconds": round(seconds, 2), "stage_seconds": spans, "shards": timelines, "rows": rows,
            "questions_left_for_review": review}


def _workload(name: str, manifest: Path, admin_url: str, tmp: Path, env: dict, stage: str, units: int) -> dict:
    runs = {}
    for runner, options in RUNNERS.items():
        with fresh_database(admin_url) as db_url:
            runner_env = env | {f"BENCHSMITH__PREFECT__{k}": v for k, v in options.items()}
            runs[runner] = _build(manifest, db_url, tmp / f"{name}-{runner}", runner_env)
        span = runs[runner]["stage_seconds"][stage]
        runs[runner]["per_second"] = round(units / span, 2)
        print(f"{name} {runner}: build {runs[runner]['seconds']} s, {stage} {span} s "
              f"({runs[runner]['per_second']}/s)", flush=True)
    one, two = runs["dask-1"]["stage_seconds"][stage], runs["dask-2"]["stage_seconds"][stage]
    return {"stage": stage, "units": units, "runs": runs, "speedup_2_vs_1_workers": round(one / two, 2),
            "dask_1_vs_local": round(one / runs["local"]["stage_seconds"][stage], 2),
            "same_rows": len({json.dumps({t: n for t, n in r["rows"].items() if t != "stage_runs"}, sort_keys=True)
                              for r in runs.values()}) == 1}


def run(scenes: int, llm_scenes: int, delay: float, workloads: tuple[str, ...] = ("extract", "generate")) -> dict:
    from ingest.scenes import make_scenes
    from tests.support.openai_server import ScriptedOpenAI

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        admin_url = os.environ.get("BENCHSMITH_TEST_PG_URL") or stack.enter_context(postgres_server())
        api = stack.enter_context(prefect_server(tmp / "prefect-home"))
        llm = stack.enter_context(ScriptedOpenAI(llm_reply(delay)))
        env = user_env("LABEL_STUDIO", "OPENAI", "PREFECT_API") | {
            "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp / "prefect-home"),
            "OPENAI_BASE_URL": llm.base_url, "OPENAI_API_KEY": "sk-benchmark"}
        result = {"case": "distributed_scaling", "cores": os.cpu_count(), "scenes": scenes, "llm_scenes": llm_scenes,
                  "llm_delay_s": delay, "llm_concurrency_per_process": CONCURRENCY}
        if "extract" in workloads:
            result["extract"] = _workload("extract", make_scenes(tmp / "scenes", scenes, seed=11), admin_url, tmp,
                                          env, "extract:rapidocr", scenes)
        if "generate" not in workloads:
            return result
        llm_env = env | {"BENCHSMITH__EXTRACT__USE": "[supplied]", "BENCHSMITH__GENERATE__GENERATORS": "[llm]",
                         "BENCHSMITH__GENERATE__LLM__OPTIONS__CONCURRENCY": str(CONCURRENCY)}
        calls_before = llm.calls
        result["generate"] = _workload("generate", make_scenes(tmp / "llm-scenes", llm_scenes, seed=12), admin_url,
                                       tmp, llm_env, "generate:llm", llm_scenes * 9)
        result["generate"]["http_calls_per_run"] = (llm.calls - calls_before) / len(RUNNERS)
    return result


def estimate(result: dict, images: int = 1_000_000) -> str:
    """A 1M-image build on N workers, from the per-image costs this run measured."""
    ext, gen = result["extract"], result["generate"]
    local = ext["runs"]["local"]
    n = result["scenes"]
    ocr_s = local["stage_seconds"]["extract:rapidocr"] / n  # one process: RapidOCR spreads over every core
    rows = {t: local["rows"][t] / n for t in TABLES}
    gen_rows = gen["runs"]["local"]["rows"]
    calls_per_image = gen["http_calls_per_run"] / result["llm_scenes"]
    review_per_image = local["questions_left_for_review"] / n
    delay, conc, cores = result["llm_delay_s"], result["llm_concurrency_per_process"], result["cores"]
    lines = [
        f"# Estimate: a {images:,}-image build on N workers",
        "",
        f"From `benchmarks/distributed_scaling.py` on this machine ({result['cores']} cores, no GPU): "
        f"{n} oracle scenes through the offline build, {result['llm_scenes']} through the LLM generator at "
        f"{delay:g} s per call. Every figure below is a measured per-image cost times {images:,}; what could "
        "not be measured here is named as an assumption.",
        "",
        "## Measured per image",
        f"- RapidOCR extraction: {ocr_s * 1000:.0f} ms of wall time per image on this {cores}-core machine, from one "
        "process (onnxruntime already spreads one image over every core). 1 → 2 Dask workers on the same "
        f"cores: {ext['speedup_2_vs_1_workers']}× (dask-1 against the local runner: {ext['dask_1_vs_local']}× the "
        "time): a second worker process on a machine whose cores are busy adds nothing, so CPU extraction "
        "scales by machines, not by workers per machine.",
        f"- LLM generation: {calls_per_image:.1f} calls (one per image dimension), "
        f"{gen_rows['llm_calls'] / result['llm_scenes']:.1f} call-cache rows; 1 → 2 workers with "
        f"{conc} calls in flight each: {gen['speedup_2_vs_1_workers']}×.",
        "- Store rows (offline build): " + ", ".join(f"{t} {v:.1f}" for t, v in rows.items() if t != "stage_runs")
        + ".",
        f"- Questions left for review (Label Studio tasks): {review_per_image:.2f}.",
        f"- Sharding's own cost: on one Dask worker the whole build took {ext['runs']['dask-1']['seconds']:.0f} s "
        f"against {local['seconds']:.0f} s locally; the blind filter {ext['runs']['dask-1']['stage_seconds']['blind']:.0f} s "
        f"against {local['stage_seconds']['blind']:.0f} s, as each shard loads its solvers and fits the learned one "
        "again. The table below counts only the stages' per-image work.",
        "",
        f"## {images:,} images",
        f"- Store: ~{sum(v for t, v in rows.items() if t != 'stage_runs') * images / 1e6:.0f} M rows from the "
        f"offline build, plus ~{gen_rows['questions'] / result['llm_scenes'] * images / 1e6:.1f} M LLM questions "
        f"and {calls_per_image * images / 1e6:.1f} M call-cache rows with the LLM generator: PostgreSQL, not SQLite.",
        f"- Label Studio: ~{review_per_image * images / 1e6:.1f} M review tasks from the offline generators "
        "alone: push per round (`review.batch_size`), not all at once.",
        f"- LLM calls: {calls_per_image * images / 1e6:.1f} M for generation. At {delay:g} s each and {conc} in "
        f"flight per worker, N workers take {calls_per_image * images * delay / conc / 3600:.0f} h / N; a provider "
        "limit of R requests per minute bounds it below by calls / R (10,000 RPM: "
        f"{calls_per_image * images / 10_000 / 60:.1f} h), whatever N.",
        "",
        f"The LLM column assumes linear scaling; 1 → 2 workers measured {gen['speedup_2_vs_1_workers']}×.",
        "",
        f"| N workers | RapidOCR, one worker per {cores}-core machine | LLM generation, no rate limit |",
        "|---:|---:|---:|",
    ]
    for workers in (1, 8, 32, 128):
        lines.append(f"| {workers} | {ocr_s * images / workers / 3600:.1f} h | "
                     f"{calls_per_image * images * delay / conc / workers / 3600:.1f} h |")
    lines += [
        "",
        "## Not measured here",
        "- GPU extractors (BLIP-2, Florence-2, CLIP tags, SAM, PaddleOCR server models): no GPU was lent, so "
        "their per-image cost is not in this table. Their time on N GPU workers is images × (the sum of their "
        "per-image seconds on one GPU) / N; measure that sum with `benchsmith extract --limit` on one worker.",
        "- The blind filter with LLM solvers adds questions × solvers calls; the offline profile's solvers are "
        "local and inside the build figures above.",
        "- Scaling is linear in N only while PostgreSQL keeps up: at this size the store's write rate, not the "
        "workers, is the next limit to measure.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = arguments(__doc__, {"scenes": 40, "llm_scenes": 20}, scenes=400, llm_scenes=100, delay=0.5)
    parser.add_argument("--only", choices=("extract", "generate"), help="run one workload (no estimate is written)")
    parser.add_argument("--estimate-only", action="store_true",
                        help="write scale_estimate.md again from the last results/distributed_scaling.json")
    args = parser.parse_args()
    if args.estimate_only:
        result = json.loads((RESULTS / "distributed_scaling.json").read_text())
    else:
        result = save("distributed_scaling", run(args.scenes, args.llm_scenes, args.delay,
                                                 (args.only,) if args.only else ("extract", "generate")))
    if not args.only:
        (RESULTS / "scale_estimate.md").write_text(estimate(result))
        print((RESULTS / "scale_estimate.md").read_text())
