"""Helpers that fill a store with questions ready for review. The Label Studio server itself is the
session fixture `label_studio` in tests/conftest.py."""

from __future__ import annotations

from PIL import Image as PILImage

from benchsmith.records import Image, ImageSet, Provenance, Question, Verdict, sha256_bytes
from benchsmith.settings import Settings
from tests.conftest import ADMIN, ADMIN_PASSWORD  # noqa: F401 - the browser test logs in as the admin


def seed_questions(store, settings: Settings, dimensions: list[int], *, blind_passed: bool = True,
                   text: str = "", options: list[str] | None = None) -> list[Question]:
    """One small image and one question per entry of `dimensions`, each with a blind-filter verdict;
    numbered on from the images already in the media folder, so every call adds new questions. `text`
    and `options`, when given, are every question's own."""
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    first = len(list(settings.media_dir.glob("img*.png")))
    questions, items, verdicts = [], [], []
    for index, dimension_id in enumerate(dimensions, start=first):
        path = settings.media_dir / f"img{index:05d}.png"
        PILImage.new("RGB", (48, 32), ((index * 37) % 256, (index * 91) % 256, 120)).save(path)
        item = Image(id=sha256_bytes(path.read_bytes() + str(index).encode()), path=path.name, width=48, height=32)
        items.append(item)
        questions.append(Question(
            item_id=item.id, dimension_id=dimension_id, text=text or f"Question {index}: which colour is the picture?",
            options=options or [f"red {index}", f"green {index}", f"blue {index}", f"grey {index}"], answer=index % 4,
            provenance=Provenance(backend="template")))
        verdicts.append(Verdict(subject_id=questions[-1].id, subject_kind="question", stage="blind",
                                rule="text_only_solvers", passed=blind_passed))
    store.add_items(items)
    store.add_questions(questions, stage="generate", verdicts_for_new=verdicts)
    return questions


def seed_set_question(store, settings: Settings, sizes: list[tuple[int, int]], dimension_id: int = 27) -> Question:
    """An image set of one new picture per size in `sizes` (so each image is told apart by its size) and
    a question about it that numbers them as a set's questions do, with a passing blind-filter verdict."""
    settings.media_dir.mkdir(parents=True, exist_ok=True)
    first = len(list(settings.media_dir.glob("set*.png")))
    members = []
    for index, size in enumerate(sizes, start=first):
        path = settings.media_dir / f"set{index:05d}.png"
        PILImage.new("RGB", size, ((index * 53) % 256, 90, (index * 29) % 256)).save(path)
        members.append(Image(id=sha256_bytes(path.read_bytes() + str(index).encode()), path=path.name,
                             width=size[0], height=size[1]))
    image_set = ImageSet.of(members)
    numbers = " and ".join(f"image {n}" for n in range(1, len(sizes) + 1))
    question = Question(item_id=image_set.id, dimension_id=dimension_id, text=f"What changed between {numbers}?",
                        options=["the square moved", "the circle turned red", "a star was added", "nothing"],
                        answer=1, provenance=Provenance(backend="template"))
    store.add_items([*members, image_set])
    store.add_questions([question], stage="generate", verdicts_for_new=[Verdict(
        subject_id=question.id, subject_kind="question", stage="blind", rule="text_only_solvers", passed=True)])
    return question
