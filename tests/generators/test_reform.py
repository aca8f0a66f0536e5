"""The reform generator: annotated datasets in their public schemas, through ingest -> generate -> blind
filter -> review -> publish as a user runs them, checked against the datasets' own annotations."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from benchsmith.settings import load_settings
from benchsmith.store import Store
from generators.reform.answers import answer_key
from generators.reform.questions import provenance
from generators.reform.ranks import choose_by_rank, key_ranks
from generators.reform.settings import ReformSettings
from ingest.tasks import load_tasks
from tests.generators import reform_sets

CLI = [sys.executable, "-c", "from flows.app import main; main()"]


def benchsmith(workspace: Path, *args: str, cwd: Path | None = None, **env_extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI")) and k != "HF_TOKEN"}
    env |= {"BENCHSMITH_WORKSPACE": str(workspace), "COLUMNS": "200"} | env_extra
    done = subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"benchsmith {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def plain(text: str) -> str:
    """The test's own idea of 'the same answer': case, punctuation, articles, number words, a plural s."""
    numbers = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6"}
    words = re.sub(r"[^\w\s]", " ", unicodedata.normalize("NFKC", text).casefold()).split()
    words = [numbers.get(w, w) for w in words if w not in ("a", "an", "the")]
    return " ".join(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Every set ingested and reformulated through the CLI, then blind-filtered."""
    root = tmp_path_factory.mktemp("reform")
    sets = reform_sets.build(root / "sets")
    workspace = root / "bench"
    for path, task in sets.sources:
        benchsmith(workspace, "ingest", str(path), *(["--task", task] if task else []))
    generated = benchsmith(workspace, "generate", "-g", "reform")
    filtered = benchsmith(workspace, "filter")
    return sets, workspace, generated.stdout, filtered.stdout


def questions(workspace: Path, **query):
    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        return store.get_questions(**query)


def test_every_key_is_the_source_annotation_and_every_kind_gives_questions(built):
    sets, workspace, _out, _filtered = built
    made = [q for q in questions(workspace) if q.meta.get("generator") == "reform"]
    by_annotation = {(q.meta["source_dataset"], q.meta["annotation_id"]): q for q in made}
    assert set(by_annotation) <= set(sets.truth)
    for source_id, question in by_annotation.items():
        assert question.options[question.answer] == sets.truth[source_id].key, source_id
    tasks = Counter(q.meta["task"] for q in made)
    assert set(tasks) == {"vqa", "classification", "scene_classification", "matching", "grounding", "text_reading"}
    datasets_seen = {q.meta["source_dataset"] for q in made}
    assert datasets_seen == {"vqav2", "gqa", "textvqa", "imagenet", "places365", "coco-karpathy", "refcoco", "textocr"}
    # the tie in VQAv2 is broken by its multiple_choice_answer, not by order
    tie = by_annotation[("vqav2", "1")]
    assert tie.options[tie.answer] == reform_sets.COLOURS[3]


def test_no_distractor_is_an_accepted_answer(built):
    sets, workspace, _out, _filtered = built
    checked = 0
    for question in questions(workspace):
        truth = sets.truth[(question.meta["source_dataset"], question.meta["annotation_id"])]
        # an answer is the same in other letters; a written string must differ only in case to be the same
        same = plain if truth.task in ("vqa", "classification", "scene_classification") else str.casefold
        accepted = {same(a) for a in truth.accepted}
        for index, option in enumerate(question.options):
            if index != question.answer:
                assert same(option) not in accepted, (question.text, option, truth.accepted)
                checked += 1
        assert len({same(o) for o in question.options}) == 4
    assert checked > 300


def test_answer_letters_come_out_uniform(built):
    from scipy.stats import chisquare

    _sets, workspace, _out, _filtered = built
    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        gated = {v.subject_id for v in store.get_verdicts(stage="quality")}   # dropped before letters are placed
    kept = [q for q in questions(workspace) if q.id not in gated]
    letters = Counter(q.answer for q in kept)
    assert len(kept) > 200
    assert chisquare([letters[i] for i in range(4)]).pvalue > 0.05


def test_each_question_says_where_it_came_from_and_how_each_distractor_was_chosen(built):
    _sets, workspace, _out, _filtered = built
    hows = Counter()
    for question in questions(workspace):
        assert {"source_dataset", "annotation_id", "task", "accepted", "distractors"} <= set(question.meta)
        assert question.provenance.backend == "reform" and question.provenance.params["task"] == question.meta["task"]
        distractors = question.meta["distractors"]
        assert sorted(d["text"] for d in distractors) == sorted(
            o for i, o in enumerate(question.options) if i != question.answer)
        hows.update(next(p for p in HOWS if d["how"].startswith(p)) for d in distractors)
    assert set(hows) == set(HOWS)


HOWS = ("MiniLM nearest to the key among", "TF-IDF word overlap with the key", "edit-distance neighbour of the key",
        "another region of the image")


def test_bad_annotations_are_recorded_per_item_and_the_run_says_why(built):
    sets, workspace, out, _filtered = built
    # the TextVQA row with no answers is recorded with its reason, not crashed on
    assert "the answer list is empty" in out
    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        rows = [r for r in store.ledger_rows("generate:reform")]
    failed = [r for r in rows if r["status"] == "failed"]
    assert any("the answer list is empty" in r["reason"] for r in failed)
    assert all(r["status"] in ("done", "failed") for r in rows)


def test_the_blind_filter_judged_them_and_a_rerun_adds_nothing(built):
    _sets, workspace, _out, filtered = built
    statuses = Counter(q.status for q in questions(workspace))
    assert statuses["candidate"] > 0
    again = benchsmith(workspace, "generate", "-g", "reform")
    assert re.search(r"jobs\s+│\s+0 ", again.stdout) and re.search(r"new_questions\s+│\s+0 ", again.stdout)
    assert Counter(q.status for q in questions(workspace)) == statuses


def test_reviewed_questions_publish_with_the_source_answer(built, tmp_path):
    import datasets

    from tests.publish.conftest import accept

    sets, workspace, _out, _filtered = built
    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        for question in store.get_questions(status="candidate"):
            accept(store, question, [question.answer, question.answer])
    benchsmith(workspace, "publish", "--version", "v1")
    rows = datasets.load_dataset(str(workspace / "releases" / "v1"), "all", split="test",
                                 cache_dir=str(tmp_path / "cache"))
    by_id = {q.id: q for q in questions(workspace)}
    published_tasks = set()
    for row in rows:
        question = by_id[row["question_id"]]
        truth = sets.truth[(question.meta["source_dataset"], question.meta["annotation_id"])]
        assert row[f"choice_{row['answer'].lower()}"] == truth.key
        published_tasks.add(question.meta["task"])
    assert len(rows) > 0 and {"vqa", "matching", "grounding", "text_reading"} <= published_tasks


def test_no_text_distractor_is_written_elsewhere_in_the_same_image(tmp_path):
    """TextOCR ships one word per row: a word of another row of the same image is written there too."""
    words = ["CANDY", "CANDLE", "HANDLE", "HANDY", "SANDY", "SANDAL", "CINEMA", "ENIGMA", "CINDER", "TENDER",
             "TENDON", "LONDON"]
    folder, rows, written = tmp_path / "sets" / "textocr", [], {}
    for i in range(len(words)):
        reform_sets.image(folder / f"{i}.png", 70 + i)
        written[i] = {words[i], words[(i + 1) % len(words)]}   # each word is on two images
        rows += [{"path": f"{i}.png", "task": "text_reading", "source": "textocr", "id": f"{i}-{word}", "text": word}
                 for word in sorted(written[i])]
    workspace = tmp_path / "bench"
    benchsmith(workspace, "ingest", str(reform_sets._write_jsonl(rows, folder / "words.jsonl")))
    benchsmith(workspace, "generate", "-g", "reform")
    made = questions(workspace)
    assert len(made) >= 20
    for question in made:
        image = int(question.meta["annotation_id"].split("-")[0])
        assert question.options[question.answer] in written[image]
        assert not written[image] & set(question.options[:question.answer] + question.options[question.answer + 1:]), (
            question.options, written[image])


def test_neighbouring_counts_are_offered_and_a_translation_of_the_key_is_not(tmp_path):
    """MiniLM puts "2" and "4" as close to "3" as a synonym; "rouge" is "red" in French."""
    folder, rows = tmp_path / "sets" / "vqa", []
    counts = ["1", "2", "3", "3", "3", "4", "5"]
    colours = ["red", "red", "red", "rouge", "blue", "green", "yellow"]
    for i, (count, colour) in enumerate(zip(counts, colours)):
        reform_sets.image(folder / f"{i}.png", 90 + i)
        rows += [{"path": f"{i}.png", "task": "vqa", "question_id": f"n{i}", "question": "How many people are there?",
                  "question_type": "how many", "answers": [count] * 10},
                 {"path": f"{i}.png", "task": "vqa", "question_id": f"c{i}", "question": "What color is the car?",
                  "question_type": "what color is the", "answers": [colour] * 10}]
    workspace = tmp_path / "bench"
    benchsmith(workspace, "ingest", str(reform_sets._write_jsonl(rows, folder / "vqa.jsonl")))
    benchsmith(workspace, "generate", "-g", "reform")
    made = {q.meta["annotation_id"]: q for q in questions(workspace)}
    threes = [made[f"n{i}"] for i, count in enumerate(counts) if count == "3" and f"n{i}" in made]
    # "1" and "5" alone are too few: the question exists only if 2 and 4 count as wrong answers
    assert len(threes) == 3 and all({"2", "4"} & set(q.options) for q in threes)
    for i, colour in enumerate(colours):
        if f"c{i}" in made:
            assert not {"red", "rouge"} <= set(made[f"c{i}"].options), made[f"c{i}"].options
    assert {f"c{i}" for i in range(4)} <= made.keys()   # red and rouge, each with blue, green and yellow


def test_no_distractor_caption_also_describes_the_image(tmp_path):
    """Captions of drawings of two shapes are offered to drawings of three: some name two of those three."""
    import itertools

    shapes = ["pink star", "blue diamond", "green circle", "red square", "yellow hexagon"]
    folder, rows, drawn = tmp_path / "sets" / "drawings", [], {}
    for i, chosen in enumerate([*itertools.combinations(shapes, 2), *itertools.combinations(shapes, 3)]):
        reform_sets.image(folder / f"{i}.png", 120 + i)
        drawn[str(i)] = set(chosen)
        caption = (f"A drawing of a {chosen[0]} and a {chosen[1]}." if len(chosen) == 2
                   else f"Three shapes: a {chosen[0]}, a {chosen[1]} and a {chosen[2]}.")
        objects = [{"label": s.split()[1], "box": [0.1 + 0.3 * k, 0.3, 0.3 + 0.3 * k, 0.6],
                    "attributes": {"colour": s.split()[0]}} for k, s in enumerate(chosen)]
        rows.append({"path": f"{i}.png", "task": "matching", "source": "drawings", "id": str(i),
                     "captions": [caption], "annotations": {"objects": objects}})
    workspace = tmp_path / "bench"
    benchsmith(workspace, "ingest", str(reform_sets._write_jsonl(rows, folder / "drawings.jsonl")))
    benchsmith(workspace, "generate", "-g", "reform")
    made = questions(workspace)
    assert len(made) >= 15
    for question in made:
        for i, option in enumerate(question.options):
            named = set(re.findall(r"(\w+ (?:star|diamond|circle|square|hexagon))", option))
            assert (named <= drawn[question.meta["annotation_id"]]) == (i == question.answer), (option, question.options)


def test_a_caption_distractor_names_something_the_photo_lacks(tmp_path):
    """Photos whose objects are known (as COCO's instances are): each class on two photos with a person.
    The nearest captions by words are traps: a twin's caption ("two people and a kite": all there), and
    one that names only a person ("a man plays with a friend in the park"), whom every photo shows.
    Neither may be a wrong option: each one must name a thing the photo has no object of."""
    classes = ["dog", "cat", "horse", "kite", "frisbee", "umbrella", "bicycle", "skateboard"]
    places = ["park", "garden", "field", "meadow", "lawn", "square", "yard", "common"]
    folder, rows, truth = tmp_path / "sets" / "photos", [], {}
    for i, (thing, twin) in enumerate((c, t) for c in classes for t in range(2)):
        reform_sets.image(folder / f"{i}.png", 300 + i)
        captions = [f"A {('man', 'woman')[twin]} plays with a {thing} in the {places[i % 8]}.",
                    f"{('A person', 'Two people')[twin]} and a {thing} out on the grass.",
                    f"A {('man', 'woman')[twin]} plays with a friend in the {places[i % 8]}."]
        objects = [{"label": "person", "box": [0.1, 0.2, 0.4, 0.9]}, {"label": thing, "box": [0.5, 0.5, 0.8, 0.8]}]
        rows.append({"path": f"{i}.png", "task": "matching", "source": "photos", "id": str(i), "captions": captions,
                     "annotations": {"objects": objects}})
        truth[str(i)] = (captions, {"person", thing})
    workspace = tmp_path / "bench"
    benchsmith(workspace, "ingest", str(reform_sets._write_jsonl(rows, folder / "photos.jsonl")))
    benchsmith(workspace, "generate", "-g", "reform")

    words = {"man": "person", "woman": "person", "person": "person", "people": "person",
             **{c: c for c in classes}, **{c + "s": c for c in classes}}
    made = questions(workspace)
    assert len(made) >= 32          # every caption names what its photo shows: up to three keys a photo
    for question in made:
        captions, present = truth[question.meta["annotation_id"].split("#")[0]]
        assert question.options[question.answer] in captions
        for i, option in enumerate(question.options):
            if i != question.answer:
                named = {words[w] for w in re.findall(r"[a-z]+", option.lower()) if w in words}
                assert named - present, (option, present)


# -- pure parts --------------------------------------------------------------------------------------

def test_answers_that_say_the_same_in_other_letters_share_one_key():
    same = [("Two dogs.", "2 dog"), ("the Red", "red"), ("A  cat", "cats"), ("tennis", "Tennis!")]
    for a, b in same:
        assert answer_key(a) == answer_key(b), (a, b)
    for a, b in [("red", "reed"), ("bus", "bu"), ("glass", "glas"), ("tennis", "tenni")]:
        assert answer_key(a) != answer_key(b), (a, b)   # words that only look plural stay


def test_the_key_is_not_always_the_option_most_like_the_others():
    """Hard negatives are all near the key; some are also near each other. Picking the three nearest
    would put the key in the middle every time; the chosen triples spread the key's rank."""
    rng = random.Random(0)
    ranks = Counter()
    for _ in range(400):
        n = 8
        sims = [[0.0] * (n + 1) for _ in range(n + 1)]
        for i in range(n + 1):
            for j in range(i + 1, n + 1):
                near = i == 0 or (i - 1) // 4 == (j - 1) // 4   # the key, or the same cluster of four
                sims[i][j] = sims[j][i] = (0.6 if near else 0.2) + rng.random() * 0.3
        chosen, rank = choose_by_rank(key_ranks(sims), n, rng)
        assert len(set(chosen)) == 3 and all(1 <= c <= n for c in chosen)
        members = [0, *chosen]
        closeness = [sum(sims[a][b] for b in members if b != a) for a in members]
        assert rank == sum(c > closeness[0] for c in closeness[1:])
        ranks[rank] += 1
    assert ranks[0] < 250 and len(ranks) >= 3


def test_a_dataset_whose_columns_do_not_fit_its_declared_kind_fails_per_item_with_the_reason(tmp_path):
    sets = reform_sets.Sets(tmp_path / "sets")
    reform_sets.places(sets, n_images=4)
    manifest, _task = sets.sources[0]
    workspace = tmp_path / "bench"
    benchsmith(workspace, "ingest", str(manifest), "--task", "vqa")  # rows say scene_classification: task column wins
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    wrong = manifest.with_name("wrong.jsonl")
    wrong.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "task"}) + "\n" for r in rows))
    # the same images declared as VQA: no question column
    benchsmith(workspace, "ingest", str(wrong), "--task", "vqa")
    out = benchsmith(workspace, "generate", "-g", "reform").stdout
    assert "no question for a vqa annotation" in out
    with Store(load_settings(env={"BENCHSMITH_WORKSPACE": str(workspace)}).db_url) as store:
        failed = [r for r in store.ledger_rows("generate:reform") if r["status"] == "failed"]
    assert len(failed) == 4 and all("columns question, sent" in r["reason"] for r in failed)


def test_an_unknown_task_kind_is_one_clear_line(tmp_path):
    sets = reform_sets.Sets(tmp_path / "sets")
    reform_sets.places(sets, n_images=2)
    manifest, _task = sets.sources[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BENCHSMITH")}
    done = subprocess.run([*CLI, "ingest", str(manifest), "--task", "captioning"], capture_output=True, text=True,
                          env=env | {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")}, timeout=300)
    assert done.returncode == 2 and "unknown task kind 'captioning'" in done.stderr and "Traceback" not in done.stderr


def test_a_pool_too_small_is_topped_up_by_the_llm_never_with_an_accepted_answer(tmp_path):
    from generators.stage import run_generate
    from tests.support.openai_server import ScriptedOpenAI, json_completion

    def reply(request: dict):
        # the first repeats an accepted answer in other letters: only the two others can be used
        return json_completion({"distractors": ["Yes.", "only on weekends", "not sure"]})

    folder = tmp_path / "sets" / "yesno"
    rows = []
    for i in range(3):  # two questions answered "no" (some said "yes"), one answered "yes" by everyone
        reform_sets.image(folder / f"{i}.png", 40 + i)
        rows.append({"path": f"{i}.png", "task": "vqa", "question_id": i, "question": "Is the shop open?",
                     "answers": ["no"] * 6 + ["yes"] * 2 + ["nope"] * 2 if i else ["yes"] * 10})
    manifest = reform_sets._write_jsonl(rows, folder / "yesno.jsonl")
    with ScriptedOpenAI(reply) as server:
        env = {"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "OPENAI_BASE_URL": server.base_url,
               "OPENAI_API_KEY": "sk-test"}
        assert "3 added" in benchsmith(tmp_path / "bench", "ingest", str(manifest)).stdout
        settings = load_settings(env=env)
        with Store(settings.db_url) as store:
            first = run_generate(store, settings, generators=["reform"])
        # "no": its only neighbour "yes" was accepted by some; "yes": only "no" is left
        assert first["kept"] == 0 and server.calls == 0
        assert first["skipped"] == {"only 0 usable distractor(s), 3 needed": 2,
                                    "only 1 usable distractor(s), 3 needed": 1}
        settings = load_settings(env=env | {"BENCHSMITH__GENERATE__REFORM__LLM_DISTRACTORS": "true"})
        with Store(settings.db_url) as store:
            second = run_generate(store, settings, generators=["reform"])
            made = store.get_questions()
        # the new setting makes every job pending again; the two "no" questions ask the same, paid once
        assert second["jobs"] == 3 and server.calls == 2
    assert second["skipped"] == {"the LLM's distractors repeat an accepted answer or each other": 2}
    [question] = made
    assert question.options[question.answer] == "yes"
    assert sorted(o for i, o in enumerate(question.options) if i != question.answer) == [
        "no", "not sure", "only on weekends"]
    hows = [d["how"] for d in question.meta["distractors"]]
    assert hows[0].startswith("MiniLM nearest") and all(h.startswith("written by the LLM") for h in hows[1:])
    assert question.provenance.params["llm_call"]
    # the provenance every pool-only question of the kind shares was copied, not changed
    shared = provenance(ReformSettings(), 0, load_tasks()[question.meta["task"]])
    assert "llm_call" not in shared.params and shared.model is None and question.provenance.model


def test_worker_processes_make_exactly_the_questions_one_process_makes(settings, monkeypatch):
    from benchsmith.records import Image
    from generators.stage import build_stages, run_generate

    rng = random.Random(7)
    words = sorted({"".join(rng.choice("abdeiklmnoprstuy") for _ in range(rng.randint(4, 8))) for _ in range(400)})
    classes = [f"{a} {b}" for a, b in zip(words[:60], words[60:120])]
    items = []
    for i in range(2100):  # more jobs than one window: the runner forks
        record = [{"task": "classification", "dataset": "toyclasses", "row": f"c{i}", "fields": {"label": rng.choice(classes)}},
                  {"task": "text_reading", "dataset": "toyocr", "row": f"t{i}", "fields": {"text": rng.choice(words).upper()}},
                  {"task": "matching", "dataset": "toycaps", "row": f"m{i}", "fields": {"sentences": [
                      f"a {rng.choice(words)} beside a {rng.choice(words)}", f"the {rng.choice(words)} near a {rng.choice(words)}"]}},
                  ][i % 3]
        items.append(Image(id=f"{i:064x}", path=f"{i}.png", width=64, height=48, source="toy",
                           annotations={"reform": [record]}))
    made = {}
    for workers in (1, 2):
        monkeypatch.setenv("BENCHSMITH__GENERATE__REFORM__WORKERS", str(workers))
        monkeypatch.setenv("BENCHSMITH_WORKSPACE", str(settings.workspace / f"w{workers}"))
        ours = load_settings()
        with Store(ours.db_url) as store:
            store.add_items(items)
            [stage] = build_stages(ours, generators=["reform"])
            assert stage.workers() == workers
            counts = run_generate(store, ours, generators=["reform"])
            assert counts["jobs"] == 2100 > stage.windows()[0] and counts["finished"] == 2100
            made[workers] = ({q.id: (q.options, q.answer, q.status, q.meta) for q in store.get_questions()},
                             sorted((r["subject"], r["status"], r["reason"]) for r in store.ledger_rows("generate:reform")))
    assert len(made[1][0]) > 1500 and made[1] == made[2]
