"""The real local model server for tests: SmolLM2-135M (the `local-llm` extra) behind llama.cpp's
OpenAI-compatible server, started once per test session through `benchsmith.llm_server`, as
`benchsmith llm serve --detach` starts it. Tests assert on behaviour (schema-valid replies, stored calls,
cached reruns), never on what the small model knows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchsmith import llm_server
from benchsmith.settings import Settings, load_settings
from tests.support.services import free_port

MODEL = "smollm2"


@dataclass(frozen=True)
class LocalLlm:
    base_url: str
    model: str
    settings: Settings  # the server's own workspace settings (llm stop reads its state there)


@contextmanager
def local_llm_server(workdir: Path) -> Iterator[LocalLlm]:
    port = free_port()
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(workdir / "llm-server"),
                                  "BENCHSMITH__LLM_SERVER__MODEL": MODEL, "BENCHSMITH__LLM_SERVER__PORT": str(port),
                                  "BENCHSMITH__LLM_SERVER__CONTEXT": "2048"})
    info = llm_server.start_detached(settings)
    try:
        yield LocalLlm(base_url=info["url"], model=MODEL, settings=settings)
    finally:
        llm_server.stop(settings)
