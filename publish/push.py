"""`publish --push org/name`: upload a release folder to the Hugging Face Hub as one commit, tagged
with the version. The token comes from the environment (HF_TOKEN) only."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from benchsmith.errors import BenchsmithError
from publish.release import MARKER

REPO_ID = r"^[A-Za-z0-9][\w.-]*/[\w.-]+$"
# huggingface_hub has used requests, httpx and httpx2 over its versions; any of their connection errors
# means the Hub could not be reached.
HTTP_CLIENTS = (("httpx2", "TransportError"), ("httpx", "TransportError"), ("requests", "ConnectionError"))


def _connection_errors() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = [OSError]
    for module, name in HTTP_CLIENTS:
        with contextlib.suppress(ImportError):
            found.append(getattr(importlib.import_module(module), name))
    return tuple(found)


class PushError(BenchsmithError, RuntimeError):
    """The upload cannot be done; the message says why."""


def upload_operations(folder: Path) -> list[CommitOperationAdd]:
    """One add per file of the release, at the same relative path in the repository."""
    return [CommitOperationAdd(path_in_repo=path.relative_to(folder).as_posix(), path_or_fileobj=str(path))
            for path in sorted(folder.rglob("*")) if path.is_file()]


def push_release(folder: Path, repo_id: str, token: str | None, *, private: bool = False,
                 api: HfApi | None = None) -> str:
    """Create the dataset repository if needed, commit every file of the release, and tag the commit with
    the version. Returns the commit URL."""
    if not re.match(REPO_ID, repo_id):
        raise PushError(f"--push wants a repository id like org/name, got {repo_id!r}")
    if not token:
        raise PushError("pushing needs a Hugging Face token with write access in the HF_TOKEN environment variable")
    if not (folder / MARKER).is_file():
        raise PushError(f"{folder} is not a benchsmith release folder (no {MARKER})")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise PushError("cannot push: HF_HUB_OFFLINE is set; unset it on a machine that can reach the Hub")
    version = json.loads((folder / MARKER).read_text(encoding="utf-8"))["version"]
    api = api or HfApi()
    try:
        api.create_repo(repo_id, token=token, repo_type="dataset", private=private, exist_ok=True)
        commit = api.create_commit(repo_id, upload_operations(folder), commit_message=f"Release {version}",
                                   token=token, repo_type="dataset")
        api.create_tag(repo_id, tag=version, revision=commit.oid, token=token, repo_type="dataset", exist_ok=True)
    except OfflineModeIsEnabled:
        raise PushError("cannot push: huggingface_hub is in offline mode (HF_HUB_OFFLINE)") from None
    except HfHubHTTPError as exc:
        raise PushError(f"the Hub refused the upload to {repo_id}: {exc}".splitlines()[0]) from None
    except _connection_errors() as exc:  # connection refused, DNS failure, timeouts
        raise PushError(f"cannot reach the Hugging Face Hub to push {repo_id}: {type(exc).__name__}: {exc}"
                        .splitlines()[0]) from None
    return commit.commit_url
