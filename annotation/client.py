"""The connection to a Label Studio server, with every failure turned into a message the user can act on."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import httpx
from label_studio_sdk import LabelStudio
from label_studio_sdk.core.api_error import ApiError

from benchsmith.errors import BenchsmithError
from benchsmith.settings import Settings

T = TypeVar("T")
TIMEOUT_S = 120  # a 1,000-task import or a large export takes a while on a small server


class LabelStudioError(BenchsmithError, RuntimeError):
    """Label Studio cannot be reached or refuses us; nothing in the store has changed because of it."""


@dataclass
class Server:
    url: str
    client: LabelStudio

    def import_tasks(self, project_id: int, tasks: list[dict]) -> list[int]:
        """Create tasks in one call and return their ids, in order. The body is serialised here rather
        than by the SDK, whose generic encoder takes longer than the server for large batches."""
        response = httpx.post(
            f"{self.url}/api/projects/{project_id}/import", params={"return_task_ids": "true"},
            content=json.dumps(tasks).encode(), timeout=TIMEOUT_S,
            # the SDK's own headers carry the auth scheme it chose for the token (legacy or personal)
            headers=self.client._client_wrapper.get_headers() | {"Content-Type": "application/json"})
        if response.status_code >= 400:
            raise ApiError(status_code=response.status_code, headers=dict(response.headers), body=response.text)
        return response.json().get("task_ids") or []


def connect(settings: Settings) -> Server:
    """A client for the server in settings (or LABEL_STUDIO_URL), checked with one cheap call."""
    url = settings.services.label_studio_url.rstrip("/")
    token = settings.secrets.label_studio_api_key
    if token is None:
        raise LabelStudioError(
            "LABEL_STUDIO_API_KEY is not set; export the API token of a Label Studio user (for a server from "
            "`benchsmith labelstudio up`, the token you gave it; otherwise Account & Settings > Access Token)")
    server = Server(url, LabelStudio(base_url=url, api_key=token.get_secret_value(), timeout=TIMEOUT_S))
    with calls(server):
        server.client.users.whoami()
    return server


@contextmanager
def calls(server: Server) -> Iterator[None]:
    """Translate transport and HTTP failures of the calls inside into LabelStudioError."""
    try:
        yield
    except httpx.TransportError as exc:
        raise LabelStudioError(
            f"cannot reach Label Studio at {server.url} ({type(exc).__name__}); start it with "
            "`benchsmith labelstudio up` or point LABEL_STUDIO_URL at a running server, then run the "
            "command again: work already recorded is kept") from None
    except ApiError as exc:
        if exc.status_code in (401, 403):
            raise LabelStudioError(
                f"Label Studio at {server.url} refused the token in LABEL_STUDIO_API_KEY "
                f"(HTTP {exc.status_code}); set it to a valid user's API token") from None
        raise LabelStudioError(
            f"Label Studio at {server.url} answered HTTP {exc.status_code}: {str(exc.body)[:300]}") from None


def read_annotations(server: Server, project_ids: set[int], data_key: str,
                     parse: Callable[[dict, dict], T]) -> tuple[list[T], list[str]]:
    """Every submitted, not skipped, annotation on these projects' tasks whose data holds `data_key`
    (`question_id`, `conversation_id`), its `completed_by` given its email, as `parse(task, annotation)`;
    and why any could not be read (`parse` raised ValueError: a choice the current config does not have),
    so one odd annotation does not stop a pull."""
    parsed, unreadable = [], []
    with calls(server):
        emails = {u.id: u.email for u in server.client.users.list()}
        for project_id in sorted(project_ids):
            blob = b"".join(server.client.projects.exports.download_sync(project_id, export_type="JSON"))
            for task in json.loads(blob):
                if data_key not in task.get("data", {}):
                    continue
                for annotation in task.get("annotations", []):
                    if annotation.get("was_cancelled"):
                        continue
                    who = annotation.get("completed_by")
                    if isinstance(who, int):
                        annotation = annotation | {"completed_by": {"id": who, "email": emails.get(who, "")}}
                    try:
                        parsed.append(parse(task, annotation))
                    except ValueError as exc:
                        unreadable.append(str(exc))
    return parsed, unreadable
