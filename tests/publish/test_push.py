"""`--push`: the exact files and commit a release would send to the Hub, and a clear error whenever it
cannot be sent (no Hub is reachable here)."""

from __future__ import annotations

import huggingface_hub
import pytest
from huggingface_hub import HfApi

from publish.push import PushError, push_release, upload_operations
from publish.release import publish
from tests.conftest import free_port


class RecordingHub(HfApi):
    """The real client with its three network calls replaced by a log of what they were asked to send."""

    def __init__(self) -> None:
        super().__init__(endpoint="http://127.0.0.1:9")
        self.sent: list[tuple] = []

    def create_repo(self, repo_id, **kwargs):
        self.sent.append(("create_repo", repo_id, kwargs))

    def create_commit(self, repo_id, operations, **kwargs):
        operations = list(operations)
        self.sent.append(("create_commit", repo_id, operations, kwargs))
        return huggingface_hub.CommitInfo(commit_url=f"https://huggingface.co/datasets/{repo_id}/commit/abc123",
                                          commit_message="", commit_description="", oid="abc123", pr_url=None)

    def create_tag(self, repo_id, **kwargs):
        self.sent.append(("create_tag", repo_id, kwargs))


@pytest.fixture
def release(reviewed):
    return publish(reviewed.store, reviewed.settings, "v1.2", repo="acme/shapes").folder


def test_the_commit_holds_every_file_of_the_release_at_its_relative_path(release):
    files = {p.relative_to(release).as_posix(): p.read_bytes() for p in release.rglob("*") if p.is_file()}
    operations = upload_operations(release)
    assert {op.path_in_repo for op in operations} == set(files)
    for op in operations:
        with open(op.path_or_fileobj, "rb") as sent:
            assert sent.read() == files[op.path_in_repo]
    assert {"README.md", "release.json", "CHANGELOG.md", "vlmevalkit/benchsmith-bench.tsv"} <= set(files)
    assert any(name.startswith("data/instances_counting/test-") for name in files)


def test_push_creates_the_dataset_repo_commits_once_and_tags_the_version(release, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub = RecordingHub()
    url = push_release(release, "acme/shapes", "hf_writeToken", private=True, api=hub)
    assert url.endswith("/commit/abc123")
    (repo_call, commit_call, tag_call) = hub.sent
    assert repo_call == ("create_repo", "acme/shapes", {"token": "hf_writeToken", "repo_type": "dataset",
                                                         "private": True, "exist_ok": True})
    name, repo, operations, options = commit_call
    assert (name, repo) == ("create_commit", "acme/shapes")
    assert options == {"commit_message": "Release v1.2", "token": "hf_writeToken", "repo_type": "dataset"}
    assert sorted(op.path_in_repo for op in operations) == sorted(op.path_in_repo for op in upload_operations(release))
    assert tag_call == ("create_tag", "acme/shapes", {"tag": "v1.2", "revision": "abc123", "token": "hf_writeToken",
                                                      "repo_type": "dataset", "exist_ok": True})
    assert 'load_dataset("acme/shapes"' in (release / "README.md").read_text()


def test_push_without_a_token_or_with_a_bad_repo_id_says_what_to_fix(release, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(PushError, match="HF_TOKEN"):
        push_release(release, "acme/shapes", None, api=RecordingHub())
    with pytest.raises(PushError, match="org/name"):
        push_release(release, "shapes", "hf_x", api=RecordingHub())
    with pytest.raises(PushError, match="not a benchsmith release"):
        push_release(release / "data", "acme/shapes", "hf_x", api=RecordingHub())


def test_push_offline_fails_at_once_with_a_clear_error(release, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PushError, match="HF_HUB_OFFLINE"):
        push_release(release, "acme/shapes", "hf_x")
    monkeypatch.delenv("HF_HUB_OFFLINE")          # the library's own offline switch, read at its import
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PushError, match="offline mode"):
        push_release(release, "acme/shapes", "hf_x")


def test_push_to_an_unreachable_hub_reports_it_without_a_traceback(release, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(PushError, match="cannot reach the Hugging Face Hub") as error:
        push_release(release, "acme/shapes", "hf_secretToken", api=HfApi(endpoint=f"http://127.0.0.1:{free_port()}"))
    assert "hf_secretToken" not in str(error.value)
