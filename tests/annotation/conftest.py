"""A real Label Studio server for the session, started from `.venv-labelstudio` by the production code,
and helpers that fill a store with questions ready for review."""

from __future__ import annotations

import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image as PILImage

from annotation.server import executable, install, start, stop
from annotation.settings import ReviewSettings
from benchsmith.records import Image, Provenance, Question, Verdict, sha256_bytes
from benchsmith.settings import Settings, load_settings
from tests.conftest import free_port

ADMIN = "admin@benchsmith.test"
ADMIN_PASSWORD = "admin-pass-123"
ADMIN_TOKEN = "admin-token-" + uuid.uuid4().hex[:12]


@dataclass
class LabelStudioServer:
    url: str
    root: Path  # the folder the server serves local files from; every test workspace lives inside it
    env: dict[str, str]
    process: subprocess.Popen | None = None

    def settings(self, **review: object) -> Settings:
        """Settings for a fresh workspace and project on this server; `review` overrides the section."""
        name = uuid.uuid4().hex[:8]
        env = dict(self.env, BENCHSMITH_WORKSPACE=str(self.root / f"ws-{name}"),
                   BENCHSMITH__REVIEW__PROJECT=f"test {name}")
        for key, value in review.items():
            env[f"BENCHSMITH__REVIEW__{key.upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
        return load_settings(env=env)

    def start(self) -> None:
        settings = load_settings(env=self.env)
        self.process = start(settings, settings.section("review", ReviewSettings), env=self.env)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def add_user(self, email: str, password: str, token: str) -> None:
        """An annotator with their own login and API token, made by Label Studio's own `init` command."""
        review = load_settings(env=self.env).section("review", ReviewSettings)
        subprocess.run([str(executable(review)), "init", "--username", email, "--password", password,
                        "--user-token", token, "--data-dir", str(self.root / "server" / "labelstudio")],
                       env=self.env | {"LABEL_STUDIO_BASE_DATA_DIR": str(self.root / "server" / "labelstudio")},
                       check=True, capture_output=True, cwd=self.root)


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory) -> LabelStudioServer:
    root = tmp_path_factory.mktemp("labelstudio")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "LABEL_STUDIO"))}
    env |= {
        "BENCHSMITH_WORKSPACE": str(root / "server"),
        "LABEL_STUDIO_URL": f"http://127.0.0.1:{free_port()}",
        "LABEL_STUDIO_API_KEY": ADMIN_TOKEN,
        "LABEL_STUDIO_USERNAME": ADMIN,
        "LABEL_STUDIO_PASSWORD": ADMIN_PASSWORD,
        "BENCHSMITH__REVIEW__LOCAL_FILES_ROOT": str(root),
    }
    install(load_settings(env=env).section("review", ReviewSettings))
    server = LabelStudioServer(env["LABEL_STUDIO_URL"], root, env)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def annotators(label_studio) -> dict[str, str]:
    """Two annotators besides the admin: email -> API token."""
    users = {f"ann{i}@benchsmith.test": f"ann{i}-token-{uuid.uuid4().hex[:10]}" for i in (1, 2)}
    for email, token in users.items():
        label_studio.add_user(email, "annotator-pass-1", token)
    return users


def seed_questions(store, settings: Settings, dimensions: list[int], *, blind_passed: bool = True) -> list[Question]:
    """One small image and one question per entry of `dimensions`, each with a blind-filter verdict;
    numbered on from the images already in the media folder, so every call adds new questions."""
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    first = len(list(settings.media_dir.glob("img*.png")))
    questions, items, verdicts = [], [], []
    for index, dimension_id in enumerate(dimensions, start=first):
        path = settings.media_dir / f"img{index:05d}.png"
        PILImage.new("RGB", (48, 32), ((index * 37) % 256, (index * 91) % 256, 120)).save(path)
        item = Image(id=sha256_bytes(path.read_bytes() + str(index).encode()), path=path.name, width=48, height=32)
        items.append(item)
        questions.append(Question(
            item_id=item.id, dimension_id=dimension_id, text=f"Question {index}: which colour is the picture?",
            options=[f"red {index}", f"green {index}", f"blue {index}", f"grey {index}"], answer=index % 4,
            provenance=Provenance(backend="template")))
        verdicts.append(Verdict(subject_id=questions[-1].id, subject_kind="question", stage="blind",
                                rule="text_only_solvers", passed=blind_passed))
    store.add_items(items)
    store.add_questions(questions, stage="generate", verdicts_for_new=verdicts)
    return questions
