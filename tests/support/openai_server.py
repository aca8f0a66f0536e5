"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

The real `openai` client talks to it over HTTP. A test decides each reply with a responder: a function
from the parsed request body to a `Reply`. Helpers build the common replies: valid chat completions,
malformed content, HTTP errors with Retry-After (optionally echoing the caller's key, as providers do),
slow or hanging answers, jittered latency (`jittered`), a proxy's HTML page sent with status 200, and a
body trickled a byte at a time. Every request is logged.

It also runs batch jobs as the OpenAI Batch API does (`/v1/files`, `/v1/batches`: create, list, retrieve,
cancel, output and error files): each line of a job goes through the same responder when the job ends,
`batch_delay_s` after it was created, on the server's own clock: whoever looks next (a list or a retrieve)
finds it ended. A job that expires or is cancelled writes the requests it never ran to its error file
(`batch_expired`, `batch_cancelled`), as OpenAI does. `on_batch_request(method, path)` hears each Batch
API call before the server does it (a Reply it returns is sent instead: the call never arrived),
`on_batch_call` after (a test kills the caller there). Faults: `batch_answers` (the job expires after answering that
many lines), `malformed_lines` (that many output lines cut short), `batches=False` (a server with no
batch endpoints). `completions` counts every chat completion answered, live or in a batch, by request.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from email.parser import BytesParser
from email.policy import HTTP
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
        self.completions: Counter = Counter()  # canonical request body -> times answered (live or batched)
        self.files: dict[str, dict] = {}       # file id -> {"meta": file object, "data": bytes}
        self.jobs: dict[str, dict] = {}        # batch id -> batch object (plus "_ends_at", "_authorization")
        self.batches = True
        self.batch_delay_s = 0.0
        self.batch_answers: int | None = None
        self.malformed_lines = 0
        self.on_batch_request: Callable[[str, str], None] | None = None
        self.on_batch_call: Callable[[str, str], None] | None = None
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        self.answered: list[tuple[float, float]] = []  # each chat completion's arrival and answer, wall clock
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # small JSON replies go out at once, not after a delayed ACK

            def log_message(self, *_args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if "/files" in self.path or "/batches" in self.path:
                    self._send(server._batch_api("GET", self.path.split("?")[0].rstrip("/"), {}))
                elif self.path.split("?")[0].rstrip("/").endswith("/_stats"):  # for a server in another process
                    self._send(Reply(body=server.stats(float(self.path.partition("?since=")[2] or 0))))
                elif self.path.rstrip("/").endswith("/models"):
                    self._send(Reply(body={"object": "list", "data": [{"id": "scripted", "object": "model"}]}))
                else:
                    self._send(error(404, "not found"))

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                kind = self.headers.get("content-type", "")
                try:
                    body = _form(kind, raw) if kind.startswith("multipart/") else json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                body["_path"] = self.path
                body["_authorization"] = self.headers.get("authorization", "")
                with server._lock:
                    server.requests.append(body)
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    if "/files" in self.path or "/batches" in self.path:
                        self._send(server._batch_api("POST", self.path.rstrip("/"), body))
                        return
                    server.completions[_canonical(body)] += 1
                    arrived = time.time()
                    reply = server.responder(body)
                    if reply.delay:
                        time.sleep(reply.delay)
                    self._send(reply)
                    with server._lock:
                        server.answered.append((arrived, time.time()))
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

    def _batch_api(self, method: str, path: str, body: dict) -> Reply:
        """The Batch API's files and batches endpoints; `on_batch_call(method, path)` hears each call after
        the server has done it and before it answers (a test kills the caller there); `on_batch_request`
        hears it before the server does it, and a Reply it returns is sent instead of doing the call."""
        if self.on_batch_request is not None:
            if (instead := self.on_batch_request(method, path.split("/v1", 1)[-1])) is not None:
                return instead  # the call never arrived
        reply = self._batch_reply(method, path, body)
        if self.on_batch_call is not None:
            self.on_batch_call(method, path.split("/v1", 1)[-1])
        return reply

    def _batch_reply(self, method: str, path: str, body: dict) -> Reply:
        if not self.batches:
            return error(404, "Invalid URL")
        parts = path.split("/v1/", 1)[-1].split("/")
        with self._lock:
            for job in self.jobs.values():  # jobs end on the server's clock, looked at or not
                if job["status"] == "in_progress" and time.monotonic() >= job["_ends_at"]:
                    self._end(job, "expired" if self.batch_answers is not None else "completed",
                              answer=self.batch_answers)
            if parts == ["files"] and method == "POST":
                file_id = f"file-{len(self.files) + 1}"
                data = body["file"]["data"]
                self.files[file_id] = {"data": data, "meta": {
                    "id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                    "filename": body["file"]["filename"], "purpose": body["purpose"], "status": "processed"}}
                return Reply(body=self.files[file_id]["meta"])
            if parts == ["files"]:
                return Reply(body={"object": "list", "has_more": False,
                                   "data": [f["meta"] for f in self.files.values()]})
            if parts[0] == "files" and parts[-1] == "content" and parts[1] in self.files:
                return Reply(body=self.files[parts[1]]["data"].decode("utf-8"), content_type="application/jsonl")
            if parts == ["batches"] and method == "POST":
                if body["input_file_id"] not in self.files:
                    return error(400, f"no file {body['input_file_id']}")
                job_id = f"batch_{len(self.jobs) + 1}"
                self.jobs[job_id] = {
                    "id": job_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                    "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                    "status": "in_progress", "output_file_id": None, "error_file_id": None,
                    "created_at": int(time.time()), "metadata": body.get("metadata"),
                    "request_counts": {"total": 0, "completed": 0, "failed": 0},
                    "_ends_at": time.monotonic() + self.batch_delay_s, "_authorization": body["_authorization"]}
                return Reply(body=_public(self.jobs[job_id]))
            if parts == ["batches"]:
                return Reply(body={"object": "list", "has_more": False,
                                   "data": [_public(job) for job in self.jobs.values()]})
            if parts[0] == "batches" and parts[1] in self.jobs:
                job = self.jobs[parts[1]]
                if parts[-1] == "cancel" and job["status"] == "in_progress":
                    self._end(job, "cancelled", answer=len(self._lines(job)) // 2)
                return Reply(body=_public(job))
        return error(404, f"no route {method} {path}")

    def _lines(self, job: dict) -> list[dict]:
        return [json.loads(line) for line in self.files[job["input_file_id"]]["data"].decode().splitlines() if line]

    def _end(self, job: dict, status: str, *, answer: int | None) -> None:
        """Answer the job's lines (the first `answer` of them; None: all) and write its output files; the
        lines it never ran go to the error file with the code of how it ended."""
        out, failed = [], []
        for line in self._lines(job)[answer:] if answer is not None else ():
            failed.append(json.dumps({"id": f"batch_req_{len(out) + len(failed)}", "custom_id": line["custom_id"],
                                      "response": None, "error": {"code": f"batch_{status}",
                                                                  "message": f"the batch was {status} first"}}))
        for line in self._lines(job)[:answer]:
            request = line["body"] | {"_path": line["url"], "_authorization": job["_authorization"]}
            self.completions[_canonical(request)] += 1
            reply = self.responder(request)
            result = {"id": f"batch_req_{len(out) + len(failed)}", "custom_id": line["custom_id"],
                      "response": {"status_code": reply.status, "request_id": "scripted", "body": reply.body},
                      "error": None}
            (out if reply.status == 200 else failed).append(json.dumps(result))
        for n in range(min(self.malformed_lines, len(out))):
            out[n] = out[n][:len(out[n]) // 2]
        for name, lines in (("output_file_id", out), ("error_file_id", failed)):
            if lines:
                file_id = f"file-{len(self.files) + 1}"
                data = ("\n".join(lines) + "\n").encode()
                self.files[file_id] = {"data": data, "meta": {
                    "id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                    "filename": f"{job['id']}_{name}.jsonl", "purpose": "batch_output", "status": "processed"}}
                job[name] = file_id
        job["status"] = status
        ran = len(self._lines(job)[:answer])
        job["request_counts"] = {"total": len(self._lines(job)), "completed": len(out), "failed": ran - len(out)}

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def calls(self) -> int:
        return len(self.requests)

    def stats(self, since: float = 0.0) -> dict:
        """The requests so far, the most held in flight, and when the first chat completion that arrived
        after `since` (wall clock) came in and the last one was answered (None: none yet)."""
        with self._lock:
            times = [(arrived, done) for arrived, done in self.answered if arrived >= since]
        return {"calls": self.calls, "max_in_flight": self.max_in_flight,
                "first_call_at": min((arrived for arrived, _done in times), default=None),
                "last_answer_at": max((done for _arrived, done in times), default=None)}

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _canonical(body: dict) -> str:
    """A request as the server counts it: what it asks, not how it was sent."""
    return json.dumps({k: v for k, v in body.items() if not k.startswith("_")}, sort_keys=True)


def _public(job: dict) -> dict:
    return {k: v for k, v in job.items() if not k.startswith("_")}


def _form(content_type: str, raw: bytes) -> dict:
    """A multipart form's fields: text ones as strings, files as {"filename", "data"}."""
    message = BytesParser(policy=HTTP).parsebytes(f"content-type: {content_type}\r\n\r\n".encode() + raw)
    fields: dict = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        filename = part.get_filename()
        fields[name] = {"filename": filename, "data": data} if filename else data.decode("utf-8")
    return fields


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
