"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

The real `openai` client talks to it over HTTP. A test decides each reply with a responder: a function
from the parsed request body to a `Reply`. Helpers build the common replies: valid chat completions,
malformed content, HTTP errors with Retry-After (optionally echoing the caller's key, as providers do),
slow or hanging answers, jittered latency (`jittered`), a proxy's HTML page sent with status 200, and a
body trickled a byte at a time. Every request is logged.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None            # dict -> JSON; str -> sent as is
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0          # seconds to wait before answering
    content_type: str = "application/json"
    trickle_s: float = 0.0      # > 0: send the headers, then the body one byte every trickle_s seconds


def chat_completion(content: str, *, model: str = "scripted", prompt_tokens: int = 100,
                    completion_tokens: int = 50, logprobs: list[dict] | None = None) -> Reply:
    """A well-formed chat completion whose message content is `content`."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": content}}
    if logprobs is not None:
        choice["logprobs"] = {"content": logprobs}
    return Reply(body={
        "id": f"chatcmpl-{time.monotonic_ns()}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


def json_completion(payload: Any, **kwargs) -> Reply:
    return chat_completion(json.dumps(payload), **kwargs)


def error(status: int, message: str = "scripted error", *, retry_after: float | None = None) -> Reply:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Reply(status=status, body={"error": {"message": message, "type": "scripted", "code": status}},
                 headers=headers)


def html_page(status: int = 200) -> Reply:
    """What a misconfigured proxy or captive portal sends instead of the API's JSON."""
    return Reply(status=status, content_type="text/html; charset=utf-8",
                 body="<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>")


def trickle(reply: Reply, every_s: float = 1.0) -> Reply:
    """`reply`, its body sent one byte every `every_s` seconds after prompt headers."""
    return Reply(**{**reply.__dict__, "trickle_s": every_s})


def echo_key(status: int, request: dict) -> Reply:
    """An error that repeats the caller's API key, whole and as a masked fragment, as real providers do."""
    key = request.get("_authorization", "").removeprefix("Bearer ")
    masked = f"{key[:3]}...{key[-12:]}"
    return error(status, f"Incorrect API key provided: {key}. You can find your key ({masked}) in your account.")


Responder = Callable[[dict], Reply]


def jittered(responder: Responder, *, base_s: float, jitter_s: float, seed: int) -> Responder:
    """`responder`, each reply delayed by `base_s` plus up to `jitter_s` drawn from `seed`: answers then
    arrive in an order of their own, different for each seed."""
    rng, lock = random.Random(seed), threading.Lock()

    def respond(request: dict) -> Reply:
        with lock:
            extra = rng.uniform(0, jitter_s)
        reply = responder(request)
        return Reply(**{**reply.__dict__, "delay": reply.delay + base_s + extra})

    return respond


class ScriptedOpenAI:
    """Start with `with ScriptedOpenAI(responder) as server:`; point clients at `server.base_url`."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or (lambda _req: chat_completion("ok"))
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # small JSON replies go out at once, not after a delayed ACK

            def log_message(self, *_args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/_stats"):  # for a server running in another process
                    self._send(Reply(body={"calls": server.calls, "max_in_flight": server.max_in_flight}))
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(Reply(body={"object": "list", "data": [{"id": "scripted", "object": "model"}]}))
                else:
                    self._send(error(404, "not found"))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                body["_path"] = self.path
                body["_authorization"] = self.headers.get("authorization", "")
                with server._lock:
                    server.requests.append(body)
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    reply = server.responder(body)
                    if reply.delay:
                        time.sleep(reply.delay)
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server._in_flight -= 1

            def _send(self, reply: Reply) -> None:
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body or {})
                data = payload.encode("utf-8")
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                self.send_header("content-length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if not reply.trickle_s:
                    self.wfile.write(data)
                    return
                self.wfile.flush()
                for byte in data:
                    time.sleep(reply.trickle_s)
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many clients connect at once; the default backlog of 5 drops SYNs

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        return len(self.requests)

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


if __name__ == "__main__":  # a standalone server in its own process, for benchmarks
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--content", default="ok", help="the message content of every reply")
    args = parser.parse_args()
    with ScriptedOpenAI(lambda _r: Reply(**{**chat_completion(args.content, prompt_tokens=900,
                                                              completion_tokens=120).__dict__,
                                            "delay": args.delay})) as srv:
        print(srv.base_url, flush=True)
        threading.Event().wait()
