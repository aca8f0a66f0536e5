"""The review and labelstudio commands as a user runs them: real processes, real servers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
from label_studio_sdk import LabelStudio

from annotation.settings import ReviewSettings
from benchsmith.paths import REPO_ROOT
from benchsmith.store import Store
from benchsmith.settings import load_settings
from tests.annotation.conftest import seed_questions
from tests.annotation.test_pull import scripted  # noqa: F401 - two annotators review a scripted set
from tests.conftest import free_port


def benchsmith(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from flows.app import main; main()", *args], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)


def clean_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "LABEL_STUDIO"))}
    return env | {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "COLUMNS": "200"} | extra


def test_push_without_a_token_or_server_says_what_to_do(tmp_path):
    no_token = benchsmith(clean_env(tmp_path), "review", "push")
    assert no_token.returncode == 2
    assert "LABEL_STUDIO_API_KEY is not set" in no_token.stderr and "Traceback" not in no_token.stderr

    nobody = benchsmith(clean_env(tmp_path, LABEL_STUDIO_URL=f"http://127.0.0.1:{free_port()}",
                                  LABEL_STUDIO_API_KEY="some-token"), "review", "pull")
    assert nobody.returncode == 2
    assert "cannot reach Label Studio" in nobody.stderr and "benchsmith labelstudio up" in nobody.stderr


def test_up_refuses_to_start_without_the_admin_password(tmp_path):
    done = benchsmith(clean_env(tmp_path, LABEL_STUDIO_URL=f"http://127.0.0.1:{free_port()}",
                                LABEL_STUDIO_API_KEY="admin-token-1"), "labelstudio", "up")
    assert done.returncode == 2
    assert "LABEL_STUDIO_PASSWORD" in done.stderr


def test_status_counts_review_states_from_the_store_alone(tmp_path, label_studio):
    settings = label_studio.settings()
    with Store(settings.db_url) as store:
        questions = seed_questions(store, settings, [3, 4, 5])
        store.record_review_intents("question", [questions[0].id], project_id=1)
    env = clean_env(tmp_path, BENCHSMITH_WORKSPACE=str(settings.workspace))
    done = benchsmith(env, "review", "status")
    assert done.returncode == 0, done.stderr
    assert "push unconfirmed (rerun push)" in done.stdout and "│ 1" in done.stdout


def test_up_starts_a_server_with_the_admin_from_the_environment_and_down_stops_it(tmp_path):
    port = free_port()
    token = "up-token-" + uuid.uuid4().hex[:8]
    env = clean_env(tmp_path, LABEL_STUDIO_URL=f"http://127.0.0.1:{port}", LABEL_STUDIO_API_KEY=token,
                    LABEL_STUDIO_USERNAME="boss@benchsmith.test", LABEL_STUDIO_PASSWORD="boss-pass-123")
    up = benchsmith(env, "labelstudio", "up", "--detach")
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        assert f"Label Studio is running at http://127.0.0.1:{port}" in up.stdout
        assert 'press "Label All Tasks"' in up.stdout and "Submit" in up.stdout
        assert "benchsmith review annotators invite" in up.stdout and "signup link" in up.stdout
        assert token not in up.stdout + up.stderr
        me = LabelStudio(base_url=f"http://127.0.0.1:{port}", api_key=token).users.whoami()
        assert me.email == "boss@benchsmith.test"
        data = load_settings(env=env).workspace / "labelstudio"
        # its database holds the admin's token in plain text: closed to other local users
        assert data.stat().st_mode & 0o777 == 0o700
        assert {p.name: p.stat().st_mode & 0o777 for p in data.glob("*.sqlite3")} == {"label_studio.sqlite3": 0o600}
        assert (data / "server.log").stat().st_mode & 0o777 == 0o600

        again = benchsmith(env, "labelstudio", "up", "--detach")  # what `make demo` does on its second run
        assert again.returncode == 0 and f"Label Studio is running at http://127.0.0.1:{port}" in again.stdout
        other = benchsmith(env | {"BENCHSMITH_WORKSPACE": str(tmp_path / "other")}, "labelstudio", "up", "--detach")
        assert other.returncode == 2 and re.search(rf"port {port} is held by process \d+ \([^)]*label-studio", other.stderr)
        assert "choose a free port in LABEL_STUDIO_URL" in other.stderr
        assert "Traceback" not in other.stderr
    finally:
        down = benchsmith(env, "labelstudio", "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    try:
        httpx.get(f"http://127.0.0.1:{port}/api/version", timeout=2)
        raise AssertionError("the server still answers after `labelstudio down`")
    except httpx.TransportError:
        pass


def round_env(label_studio, settings) -> dict[str, str]:
    """The environment a user of the scripted round's workspace and project has."""
    review = settings.section("review", ReviewSettings)
    prefect = {k: v for k, v in os.environ.items() if k.startswith("PREFECT_")}
    return dict(label_studio.env, **prefect, BENCHSMITH_WORKSPACE=str(settings.workspace), COLUMNS="200",
                BENCHSMITH__REVIEW__PROJECT=review.project, BENCHSMITH__REVIEW__OVERLAP=str(review.overlap))


def test_finish_prints_the_same_tables_as_review_pull_and_publish(prefect_api, label_studio, scripted):
    settings, _store, _questions = scripted
    done = benchsmith(round_env(label_studio, settings), "finish", "--version", "v1")
    assert done.returncode == 0, done.stderr + done.stdout
    out = done.stdout
    assert "{'" not in out and "kappa': " not in out  # no Python dicts
    assert "decided now: 4 accepted, 2 rejected; still in review: 3 tied (waiting for a deciding annotation), " \
           "2 waiting for reviews" in out
    assert "agreement (kappa)" in out and "3 Instance Attributes" in out and "5 Instances Counting" in out
    assert re.search(r"-?\d\.\d{3} cohen \(\d+ items\)", out) and not re.search(r"\d\.\d{4,}", out)
    assert "Release v1: 4 questions in" in out and re.search(r"config\s+\S\s+n\s+\S\n", out), out
    assert "reviewed answers against the generators' keys" in out and "2 (100%)" in out
    assert "3 question(s) wait for a deciding annotation" in out and "review status --flagged" in out
    assert "raise `review.overlap` to 3" in out and "Assign Annotators" in out

    report = Path(re.search(r"report: (\S+)", out).group(1)).read_text()
    assert "## Review against the generators" in report and "| 2 (100%) |" in report
    assert "3 for a deciding annotation" in report
    assert "| review | human_review | 2 |" in report  # the 2 discarded; the 3 ties are not failures
    card = (settings.workspace / "releases" / "v1" / "README.md").read_text()
    assert "| 5 Instances Counting | template | 3 | 2 (100%) | 0 (0%) | 1 (33%) | no_correct_option 1 |" in card
    # the 2 discarded failed review; the 3 ties are not failures but wait for one more review
    assert "| review | human_review | failed | 2 |" in card
    assert "| review | human_review | tied, sent for a deciding review | 3 |" in card
    assert 'load_dataset("path/to/v1", split="test")' in card and "<org>" not in card  # a release not on the Hub
    assert "| passed quality |" in card and "| passed blind filter |" in card

    pulled = benchsmith(round_env(label_studio, settings), "review", "pull")
    assert pulled.returncode == 0, pulled.stderr
    assert "0 new reviews" in pulled.stdout and "2 (100%)" in pulled.stdout
    assert "3 question(s) wait for a deciding annotation" in pulled.stdout

    listed = benchsmith(round_env(label_studio, settings), "review", "status", "--flagged")
    assert listed.returncode == 0, listed.stderr
    assert "waiting for a deciding annotation (3)" in listed.stdout
    assert len(re.findall(rf"{label_studio.url}/projects/\d+/data\?task=\d+", listed.stdout)) == 3
    assert "keep or discard" in listed.stdout and "answer" in listed.stdout and "dimension" in listed.stdout


def test_annotators_sign_up_with_the_invite_link_and_are_listed_with_their_work(label_studio, scripted):
    settings, _store, _questions = scripted
    env = round_env(label_studio, settings)
    invited = benchsmith(env, "review", "annotators", "invite")
    assert invited.returncode == 0, invited.stderr
    link = invited.stdout.strip()
    assert link.startswith(f"{label_studio.url}/user/signup/?token=")

    email = f"new-{uuid.uuid4().hex[:6]}@benchsmith.test"
    with httpx.Client(timeout=60) as browser:  # what a browser does with the link: the page, then the form
        browser.get(link).raise_for_status()
        signed_up = browser.post(link, data={"csrfmiddlewaretoken": browser.cookies["csrftoken"], "email": email,
                                             "password": "annotator-pass-9"})
        assert signed_up.status_code == 302, signed_up.text[:300]

    listed = benchsmith(env, "review", "annotators", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
            for line in listed.stdout.splitlines() if line.startswith("│")}
    assert rows[email][1:3] == ["0", "0"]
    # the scripted round: the first annotator submitted 10 tasks (and skipped one), the second 9; none pulled yet
    assert [rows[a][1:3] for a in sorted(a for a in rows if a.startswith("ann"))] == [["10", "0"], ["9", "0"]]

    renewed = benchsmith(env, "review", "annotators", "invite", "--reset")
    assert renewed.returncode == 0 and renewed.stdout.strip() not in ("", link)


def test_label_studio_lives_outside_the_checkout_and_reports_its_own_version(label_studio):
    from annotation.server import default_venv, venv_path
    from benchsmith.paths import REPO_ROOT

    review = label_studio.settings().section("review", ReviewSettings)
    venv = venv_path(review)
    assert venv == default_venv().resolve() and REPO_ROOT not in venv.parents
    version = httpx.get(f"{label_studio.url}/api/version", timeout=10).json()
    ours = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    assert version["release"] == review.server.version
    assert ours and ours[:7] not in str(version)  # not benchsmith's last commit
