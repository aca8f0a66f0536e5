"""End to end in headless Chromium: an annotator labels a pushed question, and a pull brings the answer back.

Needs Debian's `chromium` and `npm install` in tests/browser (playwright-core drives the browser).
The labeling pages are saved to tests/browser/artifacts/*.png.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid

import pytest

from annotation.client import connect
from annotation.labeling import to_task
from annotation.pull import pull
from annotation.push import Round, push, questions_to_push
from annotation.settings import ReviewSettings
from benchsmith.dimensions import registry
from benchsmith.paths import REPO_ROOT
from benchsmith.records import Turn
from benchsmith.store import Store
from evaluation.sources import from_folder
from tests.annotation.conftest import ADMIN, ADMIN_PASSWORD, seed_questions, seed_set_question
from tests.annotation.test_cli import benchsmith

BROWSER = REPO_ROOT / "tests" / "browser"
# what Label Studio would read as a `$name` from the task's data, a template or markup: all shown as written
TRICKY = ["SALE $5", "$question", "$images or $image", "<svg onload=alert(3)> {{x}}"]
TRICKY_QUESTION = "What does the sign say: $5, $question, {{x}} or <b>bold</b>?"


def browse(script: str, *args: object) -> dict:
    """Run one of tests/browser's scripts; what it saw on the page."""
    node = shutil.which("node")
    if node is None or not (BROWSER / "node_modules" / "playwright-core").exists():
        pytest.fail("needs node and playwright-core: run `npm install` in tests/browser")
    if not shutil.which("chromium"):
        pytest.fail("needs Debian's chromium: apt-get install -y chromium")
    (BROWSER / "artifacts").mkdir(exist_ok=True)
    done = subprocess.run([node, script, *map(str, args)], cwd=BROWSER, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_annotator_sees_the_question_and_submits_an_answer_that_a_pull_brings_back(label_studio):
    settings = label_studio.settings(overlap=1)
    with Store(settings.db_url) as store:
        question = seed_questions(store, settings, [3])[0]
        (report,) = push(store, connect(settings), settings, registry(),
                         questions_to_push(store, settings.section("review", ReviewSettings)))
        task_id = store.get_review_tasks("question")[question.id][1]

        chosen = (question.answer + 2) % 4
        label = f"{'ABCD'[chosen]}. {question.options[chosen]}"
        screenshot = BROWSER / "artifacts" / "labeling-page.png"
        seen = browse("label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, report.project_id, task_id, label,
                      screenshot, "1 r")

        assert question.text in seen["question"]
        options = [text for text in seen["labels"] if text[:3] in ("A. ", "B. ", "C. ", "D. ")]
        assert options == [f"{'ABCD'[i]}. {text}[{i + 1}]" for i, text in enumerate(question.options)]
        assert seen["imageSize"] == [48, 32]
        assert seen["reasonsShownOnDiscard"] and not seen["reasonsShownOnKeep"]
        assert screenshot.stat().st_size > 10_000

        # the dimensions are one radio list, each with a letter of its name, the generator's checked
        dimensions = [f"{d['html']}[{d['hotkey']}]" for d in to_task(question, store.get_items([question.item_id])[0],
                                                                     registry(), ReviewSettings(), "")["data"]["dimensions"]]
        assert "Spatial Relation[r]" in dimensions and "Instance Attributes[a]" in dimensions
        assert [text for text in seen["radios"] if text in dimensions] == dimensions
        assert not set(dimensions) & set(seen["checkboxes"])
        assert [text for text in seen["checkedAtStart"] if text in dimensions] == ["Instance Attributes[a]"]
        assert [text for text in seen["checkedByHotkey"] if text in dimensions] == ["Spatial Relation[r]"]
        assert seen["checkedByHotkey"][0] == f"A. {question.options[0]}[1]"
        assert seen["reasonsOnDiscard"] == [f"{label}[shift+{key}]" for label, key in zip(
            ReviewSettings().discard_reasons.values(), "answdbo")]

        pulled = pull(store, connect(settings), settings, registry())
        assert pulled.outcomes["accepted"] == 1
        accepted = store.get_questions(ids=[question.id])[0]
        assert (accepted.status, accepted.review_answer, accepted.review_dimension_id) == ("accepted", chosen, 6)
        assert [r.annotator for r in store.get_reviews()] == [ADMIN]


def test_an_annotator_sees_a_sets_images_side_by_side_numbered_in_order_and_a_pull_brings_the_answer_back(label_studio):
    settings = label_studio.settings(overlap=1)
    sizes = [(48, 32), (40, 30), (36, 36)]  # each image told apart by its size
    with Store(settings.db_url) as store:
        (single,) = seed_questions(store, settings, [3])
        question = seed_set_question(store, settings, sizes)
        reports = push(store, connect(settings), settings, registry(),
                       questions_to_push(store, settings.section("review", ReviewSettings)))
        assert [(r.kind, r.sent) for r in reports] == [("", 1), ("image-set question", 1)]
        tasks = store.get_review_tasks("question")
        assert tasks[single.id][0] == reports[0].project_id and tasks[question.id][0] == reports[1].project_id

        chosen = 2
        label = f"C. {question.options[chosen]}"
        seen = browse("label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, reports[1].project_id,
                      tasks[question.id][1], label, BROWSER / "artifacts" / "image-set-page.png", "1 v")
        assert [(f["caption"], tuple(f["size"])) for f in seen["figures"]] == [
            (f"Image {n}", size) for n, size in enumerate(sizes, 1)]
        (x1, y1), (x2, y2), (x3, y3) = (f["at"] for f in seen["figures"])
        assert y1 == y2 == y3 and x1 < x2 < x3  # side by side, in the question's order
        assert "image 1 and image 2 and image 3" in question.text and question.text in seen["question"]
        assert [t for t in seen["labels"] if t[:3] in ("A. ", "B. ", "C. ", "D. ")] == [
            f"{'ABCD'[i]}. {text}[{i + 1}]" for i, text in enumerate(question.options)]
        names = ["Image Differences[i]", "Image Comparison[c]", "Visual Correspondence[v]"]
        assert [t for t in seen["radios"] if t in names] == names
        assert [t for t in seen["checkedAtStart"] if t in names] == ["Image Differences[i]"]
        assert [t for t in seen["checkedByHotkey"] if t in names] == ["Visual Correspondence[v]"]

        pulled = pull(store, connect(settings), settings, registry())
        assert pulled.outcomes["accepted"] == 1 and pulled.outcomes["waiting"] == 1, pulled.summary()
        (accepted,) = store.get_questions(ids=[question.id])
        assert (accepted.status, accepted.review_answer, accepted.review_dimension_id) == ("accepted", chosen, 29)


def test_an_annotator_checks_a_text_reading_on_the_enlarged_crop_it_was_read_from(label_studio):
    from PIL import Image as PILImage, ImageDraw

    from benchsmith.records import Image, Provenance, Question, Verdict, sha256_bytes

    settings = label_studio.settings(overlap=1)
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    photo = PILImage.new("RGB", (320, 240), (40, 90, 200))  # blue, with a red sign where the text was read
    ImageDraw.Draw(photo).rectangle((160, 60, 239, 89), fill=(220, 30, 30))
    photo.save(path := settings.media_dir / "sign.png")
    item = Image(id=sha256_bytes(path.read_bytes()), path=path.name, width=320, height=240)
    question = Question(item_id=item.id, dimension_id=9, text="What does the text in the image say?",
                        options=["OPEN", "EXIT", "STOP", "SALE"], answer=0, provenance=Provenance(backend="template"),
                        meta={"template": "text", "crop": [0.5, 0.25, 0.75, 0.375]})  # the red sign
    with Store(settings.db_url) as store:
        store.add_items([item])
        store.add_questions([question], stage="generate", verdicts_for_new=[Verdict(
            subject_id=question.id, subject_kind="question", stage="blind", rule="text_only_solvers", passed=True)])
        (report,) = push(store, connect(settings), settings, registry(),
                         questions_to_push(store, settings.section("review", ReviewSettings)))
        task_id = store.get_review_tasks("question")[question.id][1]
    seen = browse("label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, report.project_id, task_id,
                  "A. OPEN", BROWSER / "artifacts" / "text-crop-page.png", "1")

    assert [f["caption"] for f in seen["figures"]] == ["The text was read here"]
    (crop,) = seen["crops"]
    width, height = crop["size"]
    assert width > 160 and abs(width / height - 120 / 45) < 0.05  # enlarged, with the crop's proportions
    shown = PILImage.open(crop["file"]).convert("RGB")
    red, blue = (220, 30, 30), (40, 90, 200)
    close = lambda xy, colour: all(abs(a - b) < 40 for a, b in zip(shown.getpixel(xy), colour))  # noqa: E731
    w, h = shown.size
    # the sign fills the middle two thirds (a quarter of its size added each side), the sky is around it
    assert close((w // 2, h // 2), red) and close((w // 6 + 3, h // 6 + 3), red) and close((w - w // 6 - 3, h - h // 6 - 3), red)
    assert close((2, 2), blue) and close((w - 3, h - 3), blue) and close((w // 2, 2), blue)


def test_dollar_signs_templates_and_markup_are_shown_and_recorded_exactly_as_written(label_studio):
    settings = label_studio.settings(overlap=1, second_look_overlap=1, second_look_project=f"second {uuid.uuid4().hex[:8]}")
    env = dict(label_studio.env, BENCHSMITH_WORKSPACE=str(settings.workspace), COLUMNS="200",
               BENCHSMITH__REVIEW__PROJECT=settings.raw["review"]["project"], BENCHSMITH__REVIEW__OVERLAP="1",
               BENCHSMITH__REVIEW__SECOND_LOOK_OVERLAP="1",
               BENCHSMITH__REVIEW__SECOND_LOOK_PROJECT=settings.raw["review"]["second_look_project"])
    with Store(settings.db_url) as store:
        (question,) = seed_questions(store, settings, [9], text=TRICKY_QUESTION, options=TRICKY)
    pushed = benchsmith(env, "review", "push")
    assert pushed.returncode == 0, pushed.stderr
    with Store(settings.db_url) as store:
        project_id, task_id = store.get_review_tasks("question")[question.id]

    chosen = 3  # the key is A; the annotator picks the option with markup and a template
    labels = [f"{'ABCD'[i]}. {text}" for i, text in enumerate(TRICKY)]
    seen = browse("label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, project_id, task_id, labels[chosen],
                  BROWSER / "artifacts" / "exact-text-page.png", "2")
    assert TRICKY_QUESTION in seen["question"]
    assert [text for text in seen["labels"] if text[:3] in ("A. ", "B. ", "C. ", "D. ")] == [
        f"{label}[{i + 1}]" for i, label in enumerate(labels)]
    names = [d.name for d in registry().for_modality("image")]
    shown = [re.sub(r"\[(alt\+)?\w\]$", "", text) for text in seen["labels"]]  # a hotkey follows each dimension
    assert [text for text in shown if text in names] == names
    assert seen["checkedByHotkey"][0] == labels[1] + "[2]" and seen["checkedByClick"][0] == labels[chosen] + "[4]"
    assert seen["dialogs"] == []  # the markup stayed text

    pulled = benchsmith(env, "review", "pull")
    assert pulled.returncode == 0 and "not understood" not in pulled.stdout, pulled.stdout + pulled.stderr
    with Store(settings.db_url) as store:
        (accepted,) = store.get_questions(ids=[question.id])
        assert (accepted.status, accepted.review_answer, accepted.review_dimension_id) == ("accepted", chosen, 9)
    published = benchsmith(env, "publish", "--version", "v1")
    assert published.returncode == 0, published.stderr
    (row,) = from_folder(settings.workspace / "releases" / "v1")
    assert (row.text, row.options, row.answer) == (TRICKY_QUESTION, tuple(TRICKY), chosen)

    # a second look carries a note that holds what the models chose, here a `$` answer and markup
    note = "Published answer: D.\nWhy it is back: the key may be wrong.\nModels' choices: m$5 chose A, <i>m2</i> chose A."
    with Store(settings.db_url) as store:
        (published_question,) = store.get_questions(ids=[question.id])
        (looked,) = push(store, connect(settings), settings, registry(), [published_question],
                      round=Round("v1", {question.id: note}))
        second_task = store.get_second_look_tasks()[(question.id, "v1")][1]
    seen = browse("label_task.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, looked.project_id, second_task,
                  labels[chosen], BROWSER / "artifacts" / "second-look-page.png", "4")
    assert all(line in seen["text"] for line in note.splitlines()), seen["text"]
    again = benchsmith(env, "review", "pull")
    assert again.returncode == 0 and "second looks: 1 confirmed" in again.stdout, again.stdout + again.stderr


def test_an_annotator_sees_each_turn_and_edits_a_reference_that_a_pull_brings_back(label_studio):
    from annotation import conversations as review_conversations
    from tests.annotation.test_conversations import seed_conversations

    settings = label_studio.settings(overlap=1, conversation_project="conversations in the browser")
    with Store(settings.db_url) as store:
        (conversation,) = seed_conversations(store, settings, 1)
        report = review_conversations.push(store, connect(settings), settings)
        task_id = store.get_review_tasks("conversation")[conversation.id][1]
        edited = "The left square, since it touches the border."
        seen = browse("review_conversation.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, report.project_id, task_id,
                      edited, BROWSER / "artifacts" / "conversation-page.png")
        values = {area["name"]: area["value"] for area in seen["areas"]}
        for n, turn in enumerate(conversation.turns, 1):   # every field starts with the generated text
            assert values[f"instruction_{n}"] == turn.instruction
            assert values[f"reference_{n}"] == turn.reference
            assert values[f"focus_points_{n}"] == "\n".join(turn.focus_points)

        pulled = pull(store, connect(settings), settings, registry())
        assert pulled.conversations["accepted"] == 1
        (accepted,) = store.get_conversations(ids=[conversation.id])
        assert accepted.final_turns[1].reference == edited
        assert accepted.final_turns[0] == conversation.turns[0] and accepted.final_turns[2] == conversation.turns[2]


def test_conversation_turns_with_dollar_signs_templates_and_markup_start_and_come_back_as_written(label_studio):
    from annotation import conversations as review_conversations
    from tests.annotation.test_conversations import seed_conversations

    turns = [Turn(level="perception", task="text", instruction="What does the tag say? {{x}}",
                  reference="It says $5 and $question.", focus_points=["reads $5", "<b>names</b> the price"]),
             Turn(level="reasoning", task="comparison", instruction="Is $10.99 more than the $images price?",
                  reference="Yes.", focus_points=["compares $10.99"]),
             Turn(level="creation", task="poem", instruction="Write a couplet about <svg onload=alert(3)>.",
                  reference="A tag of $5 / on a shelf alive.", focus_points=["two lines", "$image"])]
    settings = label_studio.settings(overlap=1, conversation_project=f"exact conversations {uuid.uuid4().hex[:8]}")
    with Store(settings.db_url) as store:
        (conversation,) = seed_conversations(store, settings, 1, turns)
        report = review_conversations.push(store, connect(settings), settings)
        task_id = store.get_review_tasks("conversation")[conversation.id][1]
        edited = "No: $10.99 is less than {{x}}."
        seen = browse("review_conversation.mjs", label_studio.url, ADMIN, ADMIN_PASSWORD, report.project_id, task_id,
                      edited, BROWSER / "artifacts" / "exact-conversation-page.png")
        values = {area["name"]: area["value"] for area in seen["areas"]}
        assert {name: values[name] for name in values if not name == "comment"} == {
            f"{field}_{n}": "\n".join(turn.focus_points) if field == "focus_points" else getattr(turn, field)
            for n, turn in enumerate(turns, 1) for field in ("instruction", "reference", "focus_points")}

        pulled = pull(store, connect(settings), settings, registry())
        assert pulled.conversations["accepted"] == 1, pulled.summary()
        (accepted,) = store.get_conversations(ids=[conversation.id])
        assert accepted.final_turns == [turns[0], turns[1].model_copy(update={"reference": edited}), turns[2]]
