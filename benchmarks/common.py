"""What the benchmarks share: their command line and results file, the installed `benchsmith` command
run as a user runs it, the scripted OpenAI-compatible server in its own process, prepared workspaces,
and peak memory read in a child process."""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
# the console script beside this interpreter, as a user runs it; BENCHSMITH_CLI names another command
BENCHSMITH = os.environ.get("BENCHSMITH_CLI", str(Path(sys.executable).with_name("benchsmith")))


class _Quick(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        vars(namespace).update(self.const, quick=True)


def arguments(doc: str, quick: dict | None = None, **defaults) -> argparse.ArgumentParser:
    """A benchmark's command line: `--name` for each of `defaults` (typed by its default, a list by its
    first value), and with `quick`, a `--quick` that sets those smaller values (options given after it
    still win)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in defaults.items():
        many = {"nargs": "+", "type": type(default[0])} if isinstance(default, list) else {"type": type(default)}
        parser.add_argument(f"--{name.replace('_', '-')}", default=default, **many)
    if quick is not None:
        parser.add_argument("--quick", action=_Quick, nargs=0, const=quick, default=False,
                            help="small sizes: " + ", ".join(f"{k} {v}" for k, v in quick.items()))
    return parser


def machine() -> dict:
    """The processor the figures were measured on: they move with it (the same charts render twice as
    fast on one 2-core machine as on another)."""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = "unknown"
    return {"cpu": model, "cores": os.cpu_count()}


def save(name: str, result: dict) -> dict:
    """Write `result`, with the machine it was measured on, to benchmarks/results/<name>.json and print it."""
    result = {"machine": machine(), **result}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result, indent=2, default=str))
    return result


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    """The median wall seconds of `repeats` calls of `fn` (by default, of one), and the last call's result."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def user_env(*also_drop: str) -> dict[str, str]:
    """This process's environment without benchsmith's own settings (nor variables starting with any of
    `also_drop`), and with Python's bytecode cache on. Some machines, this sandbox among them, set
    PYTHONDONTWRITEBYTECODE, so every command would compile the whole package from source again, a few
    tenths of a second that no installed copy pays (pip writes the bytecode, and an editable install
    writes it on the first run)."""
    drop = ("BENCHSMITH", "PYTHONDONTWRITEBYTECODE", *also_drop)
    return {name: value for name, value in os.environ.items() if not name.startswith(drop)}


def cli(*args: str, cwd: Path, env: dict, timeout: float = 3600) -> tuple[float, str]:
    """Run the installed `benchsmith` command; its wall seconds and what it printed."""
    started = time.perf_counter()
    done = subprocess.run([BENCHSMITH, *args], cwd=cwd, env=env | {"COLUMNS": "200"}, capture_output=True,
                          text=True, timeout=timeout)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"benchsmith {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def reported(printed: str, name: str) -> float:
    """The figure a command's report table prints beside `name` (NaN when it prints none)."""
    found = re.search(rf"\b{name}\s*\S\s*([\d.]+)", printed)
    return float(found.group(1)) if found else float("nan")


def prepared(folder: Path, scenes: int, env: dict, *more: list[str]) -> Path:
    """A workspace where `scenes` oracle scenes are made, ingested and extracted (then each command of
    `more` run), untimed: made once and copied per timed run."""
    folder.mkdir(parents=True)
    for command in (["scenes", "make", "--n", str(scenes), "--out", "scenes"], ["ingest", "scenes/manifest.jsonl"],
                    ["extract"], *more):
        cli(*command, cwd=folder, env=env)
    return folder


@contextmanager
def scripted_server(delay: float, content: str):
    """The scripted OpenAI-compatible server in its own process, as a real LLM server would be: its
    threads then never compete with the client for this process's interpreter lock. Yields its URL."""
    server = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server", "--delay", str(delay),
                               "--content", content], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        yield server.stdout.readline().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)


def server_stats(base_url: str, since: float = 0.0) -> dict:
    """The calls that server has answered so far, the most it held in flight, and when (wall clock) the
    first chat completion that arrived after `since` came in and the last one was answered."""
    import httpx

    return httpx.get(base_url.rstrip("/") + f"/_stats?since={since}", timeout=10).json()


def add_captioned_images(store, n: int) -> None:
    """`n` images with a caption each, so no two LLM prompts are the same (calls are keyed by content)."""
    from benchsmith.records import Fact, Image, Provenance

    for i in range(n):
        store.add_items([Image(id=f"img{i:04d}", path=f"img{i:04d}.png", width=640, height=480)])
        store.add_facts("supplied", [Fact(
            item_id=f"img{i:04d}", kind="caption", text=f"Drawing number {i} with {i % 7 + 2} shapes.",
            provenance=Provenance(backend="supplied"))])


CHILD = ("import json, runpy, sys; function = runpy.run_path(sys.argv[1])[sys.argv[2]]; "
         "print(json.dumps(function(*json.loads(sys.argv[3]))))")


def in_child(script: str, function: str, *args, **run) -> dict:
    """`function(*args)` of the benchmark `script`, called in a fresh interpreter (so its peak memory is
    its own; paths arrive as strings); what it returned."""
    done = subprocess.run([sys.executable, "-c", CHILD, script, function, json.dumps(args, default=str)],
                          capture_output=True, text=True, **run)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss_mb() -> float:
    """This process's peak RSS so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def byte_level_tokenizer(texts: list[str], special_tokens: list[str], **named):
    """A byte-level BPE tokenizer (vocabulary 2,000) trained on `texts`, as transformers loads one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=2000, special_tokens=special_tokens,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=raw, **named)
