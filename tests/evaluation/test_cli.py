"""`benchsmith eval` as a user runs it, in a real subprocess, against a published release."""

from __future__ import annotations

import json

import yaml

from tests.evaluation.conftest import Published
from tests.publish.test_cli import benchsmith
from tests.support.openai_server import ScriptedOpenAI, chat_completion


def test_run_board_and_items_on_the_latest_release(published: Published, tmp_path):
    workspace = published.settings.workspace
    def responder(request):     # "A", but the right "B" to the set question when all three images arrive
        parts = request["messages"][0]["content"]
        images = sum(part["type"] == "image_url" for part in parts)
        return chat_completion("Answer: B" if images == 3 and "Which image is purple?" in parts[-1]["text"]
                               else "Answer: A")

    with ScriptedOpenAI(responder) as server:
        (tmp_path / "benchsmith.yaml").write_text(yaml.safe_dump({"evaluate": {"models": {
            "always-a": {"kind": "openai", "model": "scripted"}}}}))
        env = {"OPENAI_BASE_URL": server.base_url}
        first = benchsmith(workspace, "eval", "run", "-m", "always-a", "-m", "blind-longest", env_extra=env)
        assert first.returncode == 0, first.stderr
        assert ("always-a on release:v1 (single): 18 done of 18 pending, 0 not scored, 0 left for the next run "
                "(18 ok)") in first.stdout
        calls = server.calls
        again = benchsmith(workspace, "eval", "run", "-m", "always-a", "--json", env_extra=env)
        assert again.returncode == 0 and json.loads(again.stdout)[0]["pending"] == 0
        assert server.calls == calls == 18                      # a finished run asks nothing again

    board = benchsmith(workspace, "eval", "board", "--json")
    assert board.returncode == 0, board.stderr
    rows = {row["model"]: row for row in json.loads(board.stdout)["rows"]}
    assert rows["always-a"]["questions"] == len(published.reviewed.accepted_ids)
    assert rows["always-a"]["format_hit"] == 1.0
    [page] = published.store.get_questions(ids=[published.reviewed.page_question])  # a text-rich dimension too
    assert rows["always-a"]["dimensions"]["chart_retrieval"] == {
        "accuracy": float(page.answer == 0), "n": 1, "ci": [float(page.answer == 0)] * 2}
    assert rows["always-a"]["dimensions"]["image_comparison"] == {"accuracy": 1.0, "n": 1, "ci": [1.0, 1.0]}
    assert rows["blind-longest"]["blind"]
    folder = workspace / "evaluations" / "release_v1"
    assert (folder / "board.png").stat().st_size > 0 and "| always-a |" in (folder / "board.md").read_text()

    items = benchsmith(workspace, "eval", "items")
    assert items.returncode == 0, items.stderr
    assert (folder / "items.csv").read_text().startswith("question_id,")
    flags = published.store.get_verdicts(stage="item_analysis")
    assert flags and {v.details["source"] for v in flags} == {"release:v1"}
    assert {v.subject_id for v in flags} <= published.reviewed.accepted_ids


def test_bad_sources_and_models_are_one_line_errors(published: Published, tmp_path):
    workspace = published.settings.workspace
    other = tmp_path / "other" / "data" / "x"
    other.mkdir(parents=True)
    import pandas as pd
    pd.DataFrame({"prompt": ["hi"], "label": [1]}).to_parquet(other / "test-00000-of-00001.parquet")
    cases = {
        ("--release", str(tmp_path / "other")): "is not a benchsmith release: it has no question_id, question",
        ("--release", str(tmp_path / "nowhere")): "does not exist",
        ("--hub", "someone/nothing-here"): "cannot load 'someone/nothing-here'",
    }
    for args, message in cases.items():
        done = benchsmith(workspace, "eval", "run", "-m", "blind-longest", *args)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    unknown = benchsmith(workspace, "eval", "run", "-m", "gpt-5")
    assert unknown.returncode == 2 and "no model 'gpt-5' under evaluate.models" in unknown.stderr
    protocol = benchsmith(workspace, "eval", "run", "-m", "blind-longest", "--protocol", "best-of-3")
    assert protocol.returncode == 2 and ("'best-of-3' is not one of the installed protocols (circular, conveval, "
                                         "instability, single)") in protocol.stderr
