"""The lmms-eval task a release carries. Its utils.py is imported from the release folder and run on
the release's own rows; its YAML is parsed and checked against utils.py and the shards; and the whole
task runs through the real lmms-eval CLI (in its own venv) with a scripted model, whose accuracies
must come out as computed by hand below."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml

from publish.lmms_eval import task_name
from publish.release import publish
from tests.support import lmms_eval_venv

REPO = "org/bench"
TASK = "benchsmith_bench_v1_0"          # the default publish name `benchsmith-bench`, version v1.0
SUPPORT = Path(__file__).resolve().parents[1] / "support"
POST_PROMPT = "Answer with the option's letter from the given choices directly."
# The fixture's release, per dimension; the hand-computed accuracies below rely on it.
COUNTS = {"Instances Counting": 9, "Text Understanding": 4, "Instance Identity": 2, "Action Recognition": 1,
          "Chart Value Retrieval": 1, "Image Comparison": 1}
# What the scripted replies (see `scripted_replies`) must score: counting 8 of 9 right, text 2 of 4,
# identity 2 of 2, the table page's question right, the one video question wrong, the one image-set
# question right. 14 of 18 overall, 13 of the 16 single-image questions.
EXPECTED = {"accuracy": 14 / 18, "accuracy_image": 13 / 16, "accuracy_video": 0.0, "accuracy_image_set": 1.0,
            "dim_chart_value_retrieval": 1.0, "dim_instances_counting": 8 / 9, "dim_text_understanding": 2 / 4,
            "dim_instance_identity": 1.0, "dim_action_recognition": 0.0, "dim_image_comparison": 1.0}


class FunctionTag(str):
    """The `module.function` a `!function` tag names."""


class TaskLoader(yaml.SafeLoader):
    pass


TaskLoader.add_constructor("!function", lambda loader, node: FunctionTag(loader.construct_scalar(node)))


def read_task(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=TaskLoader)


def function_tags(value) -> list[FunctionTag]:
    if isinstance(value, FunctionTag):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [tag for item in value for tag in function_tags(item)] if isinstance(value, list) else []


def load_utils(folder: Path):
    """The release's utils.py as lmms-eval imports it: from its file, not from benchsmith."""
    spec = importlib.util.spec_from_file_location("release_task_utils", folder / "lmms_eval" / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_rows(folder: Path, cache: Path) -> datasets.Dataset:
    return datasets.load_dataset(str(folder), "all", split="test", cache_dir=str(cache))


def by_category(rows) -> dict[str, list[dict]]:
    grouped = defaultdict(list)
    for row in sorted(rows, key=lambda r: r["question_id"]):
        grouped[row["category"]].append(row)
    return grouped


def scripted_replies(rows) -> dict[str, str]:
    """Replies in every form a model writes, right or wrong as EXPECTED says."""
    def option(row, letter):
        return row["choice_" + letter.lower()]

    def wrong(row):
        return "ABCD"[("ABCD".index(row["answer"]) + 1) % 4]

    replies = {}
    groups = by_category(rows)
    right_forms = [lambda r, a: f"({a})", lambda r, a: f"{a}.", lambda r, a: f"Answer: {a}", lambda r, a: a,
                   lambda r, a: option(r, a), lambda r, a: f"The answer is ({a}).", lambda r, a: a.lower(),
                   lambda r, a: f"{a}) {option(r, a)}"]
    for k, row in enumerate(groups["Instances Counting"][:8]):
        replies[row["question_id"]] = right_forms[k](row, row["answer"])
    last = groups["Instances Counting"][8]              # names two options: unreadable, so wrong
    replies[last["question_id"]] = f"{option(last, 'A')} or {option(last, 'B')}"
    text = groups["Text Understanding"]
    replies[text[0]["question_id"]] = f"The sign says {option(text[0], text[0]['answer'])}."
    replies[text[1]["question_id"]] = f"Option {text[1]['answer']}"
    replies[text[2]["question_id"]] = f"({wrong(text[2])})"
    replies[text[3]["question_id"]] = option(text[3], wrong(text[3]))
    for row in groups["Instance Identity"]:
        replies[row["question_id"]] = f"{row['answer']}. {option(row, row['answer'])}"
    [page] = groups["Chart Value Retrieval"]
    replies[page["question_id"]] = f"The value is {option(page, page['answer'])}."
    [video] = groups["Action Recognition"]
    replies[video["question_id"]] = f"Answer: {wrong(video)}"
    [odd] = groups["Image Comparison"]
    replies[odd["question_id"]] = f"It is {option(odd, odd['answer'])}."
    return replies


@pytest.fixture
def release(reviewed) -> Path:
    return publish(reviewed.store, reviewed.settings, "v1.0", repo=REPO).folder


def test_the_task_yaml_is_standalone_and_reads_the_release_shards(release):
    folder = release / "lmms_eval"
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{TASK}.yaml", f"{TASK}_hub.yaml", "utils.py"])
    utils = load_utils(release)
    local, hub = read_task(folder / f"{TASK}.yaml"), read_task(folder / f"{TASK}_hub.yaml")
    for task in (local, hub):
        assert "include" not in task
        tags = function_tags(task)
        assert {tag.split(".")[0] for tag in tags} == {"utils"} and len(tags) >= 4
        for tag in tags:
            assert callable(getattr(utils, tag.split(".", 1)[1], None)), f"{tag} is not in utils.py"
        assert task["output_type"] == "generate_until" and task["test_split"] == "test"
        assert task["doc_to_target"] == "answer"
        assert {m["metric"] for m in task["metric_list"]} == set(EXPECTED)
        assert task["lmms_eval_specific_kwargs"]["default"]["post_prompt"] == POST_PROMPT

    assert local["task"] == TASK and local["dataset_path"] == "parquet" and "dataset_name" not in local
    files = local["dataset_kwargs"]["data_files"]["test"]
    assert all(not Path(f).is_absolute() for f in files)
    assert {(folder / f).resolve() for f in files} == set(release.glob("data/*/test-*.parquet"))
    assert hub["task"] == f"{TASK}_hub"
    assert (hub["dataset_path"], hub["dataset_name"], hub["dataset_kwargs"]) == (REPO, "all", {"revision": "v1.0"})
    differing = {key for key in local.keys() | hub.keys() if local.get(key) != hub.get(key)}
    assert differing == {"task", "dataset_path", "dataset_name", "dataset_kwargs"}

    imported = set()
    for node in ast.walk(ast.parse((folder / "utils.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"PIL"}     # runs in lmms-eval's venv as it is

    card = (release / "README.md").read_text(encoding="utf-8")
    assert f"--tasks {TASK} --include_path benchsmith-bench/lmms_eval" in card
    assert f"hf download {REPO} --repo-type dataset --local-dir benchsmith-bench" in card
    assert f"`--tasks {TASK}_hub` reads `{REPO}` at tag `v1.0`" in card


def test_without_a_hub_repository_only_the_local_task_is_written(reviewed):
    folder = publish(reviewed.store, reviewed.settings, "v2-rc.1").folder
    assert sorted(p.name for p in (folder / "lmms_eval").iterdir()) == ["benchsmith_bench_v2_rc_1.yaml", "utils.py"]
    assert "_hub" not in (folder / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name, version, expected", [
    ("benchsmith-bench", "v1.0", TASK), ("My Bench!", "2026.1", "my_bench_2026_1"), ("3d-scenes", "v1", "bench_3d_scenes_v1"),
])
def test_task_names_are_letters_digits_and_underscores(name, version, expected):
    assert task_name(name, version) == expected


def test_doc_to_visual_and_doc_to_text_on_the_release_rows(release, reviewed, tmp_path):
    utils = load_utils(release)
    rows = load_rows(release, tmp_path / "cache")
    assert Counter(rows["category"]) == COUNTS
    for doc in rows:
        visuals = utils.doc_to_visual(doc)
        assert all(v.mode == "RGB" for v in visuals)
        if doc["question_id"] == reviewed.video_question:
            assert [v.getpixel((0, 0)) for v in visuals] == [(255, 0, 0), (0, 128, 0), (0, 0, 255)]
            assert utils.doc_to_text(doc) == ("Which colour does the clip end on?\nA. blue\nB. green\nC. red\n"
                                              f"D. white\n{POST_PROMPT}")
            kwargs = {"pre_prompt": "<image>\n", "post_prompt": "One letter, please."}
            assert utils.doc_to_text(doc, kwargs) == ("<image>\nWhich colour does the clip end on?\nA. blue\n"
                                                      "B. green\nC. red\nD. white\nOne letter, please.")
            assert utils.doc_to_text(doc, {"post_prompt": ""}).endswith("\nD. white")
        elif doc["question_id"] == reviewed.set_question:       # every image of the set, in order
            assert [v.getpixel((0, 0)) for v in visuals] == [(255, 255, 0), (128, 0, 128), (0, 255, 255)]
        else:
            assert len(visuals) == 1
    # Cells read straight from a shard, undecoded ({"bytes", "path"}), give the same pixels.
    [shard] = release.glob("data/action_recognition/*.parquet")
    [raw] = pq.read_table(shard).to_pylist()
    [decoded] = [doc for doc in rows if doc["question_id"] == raw["question_id"]]
    assert [v.tobytes() for v in utils.doc_to_visual(raw)] == [v.tobytes() for v in utils.doc_to_visual(decoded)]


def test_process_results_reads_the_letter_in_every_common_form(release, reviewed, tmp_path):
    utils = load_utils(release)
    rows = {doc["question_id"]: doc for doc in load_rows(release, tmp_path / "cache")}
    video = rows[reviewed.video_question]                  # blue, green, red, white; answer A
    person = next(doc for doc in rows.values() if doc["choice_a"] == "a person")   # a person, a dog, ...
    cases = [(video, "A", "A"), (video, "b", "B"), (video, "(C)", "C"), (video, "[D]", "D"), (video, "A.", "A"),
             (video, "B) green", "B"), (video, "C: red", "C"), (video, "Answer: D", "D"), (video, "answer:C", "C"),
             (video, "The answer is (B).", "B"), (video, "Option A", "A"), (video, "I would pick (C) here.", "C"),
             (video, "blue", "A"), (video, " Red. ", "C"), (video, "The clip ends on green.", "B"),
             (video, "green or blue", ""), (video, "I cannot tell.", ""), (video, "", ""),
             (person, "a dog", "B"), (person, "A car.", "C"), (person, "a tree, clearly", "D"),
             (person, "A", "A"), (person, "a", "A")]
    for doc, reply, letter in cases:
        assert utils.extract_letter(reply, doc) == letter, f"{reply!r} should read as {letter or 'nothing'}"

    scored = utils.process_results(video, ["The answer is (A)."])
    assert set(scored) == {"accuracy", "accuracy_video", "dim_action_recognition"}
    assert scored["accuracy"] == {"question_id": video["question_id"], "category": "Action Recognition",
                                  "data_type": "video", "pred": "A", "answer": "A", "score": 1}
    assert utils.process_results(person, ["a dog"])["dim_instance_identity"]["score"] == 0


def test_aggregation_gives_overall_type_and_dimension_accuracy(release, tmp_path):
    """As lmms-eval does it: each doc's records are filed under their metric names, then each metric of
    the YAML's metric_list is aggregated with the function it names."""
    utils = load_utils(release)
    rows = load_rows(release, tmp_path / "cache")
    replies = scripted_replies(rows)
    assert len(replies) == len(rows) == sum(COUNTS.values())
    filed = defaultdict(list)
    for doc in rows:
        for metric, record in utils.process_results(doc, [replies[doc["question_id"]]]).items():
            filed[metric].append(record)
    task = read_task(release / "lmms_eval" / f"{TASK}.yaml")
    results = {m["metric"]: getattr(utils, m["aggregation"].split(".", 1)[1])(filed[m["metric"]])
               for m in task["metric_list"]}
    assert results == pytest.approx(EXPECTED)
    assert utils.accuracy([]) == 0.0


@pytest.fixture(scope="session")
def lmms_eval_cli() -> Path:
    """lmms-eval's command in its own venv. CI installs it in `make test-deps`, so there a missing venv is
    a failure; elsewhere the first run installs it (about 2 minutes)."""
    if not lmms_eval_venv.installed():
        if os.environ.get("CI"):
            pytest.fail(f"lmms-eval is not installed in {lmms_eval_venv.venv_path()}; `make test-deps` runs "
                        "`python -m tests.support.lmms_eval_venv`")
        lmms_eval_venv.install()
    return lmms_eval_venv.executable()


@pytest.mark.lmms_eval
def test_the_real_lmms_eval_scores_a_moved_release_as_computed_by_hand(lmms_eval_cli, release, tmp_path):
    moved = tmp_path / "elsewhere" / "bench-v1"             # the YAML must not depend on where it was written
    moved.parent.mkdir()
    shutil.move(release, moved)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(scripted_replies(load_rows(moved, tmp_path / "cache"))), encoding="utf-8")
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
            "LMMS_EVAL_PLUGINS": "scripted_lmms", "PYTHONPATH": str(SUPPORT)}
    done = subprocess.run([str(lmms_eval_cli), "--model", "scripted", "--model_args", f"replies={replies}",
                           "--tasks", TASK, "--include_path", str(moved / "lmms_eval"),
                           "--output_path", str(tmp_path / "out"), "--batch_size", "1"],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=400)
    written = list((tmp_path / "out").rglob("*_results.json"))    # lmms-eval may log an error and exit 0
    assert done.returncode == 0 and len(written) == 1, (done.stdout + done.stderr)[-3000:]
    reported = json.loads(written[0].read_text())["results"][TASK]
    assert {metric: reported[f"{metric},none"] for metric in EXPECTED} == pytest.approx(EXPECTED)
