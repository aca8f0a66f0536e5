"""ConvEval: a model holds each conversation with its own answers in context, a judge grades every turn
directly and pairwise under several prompts, the ablation gives it earlier references; the pooled scores
match what is computed here by hand, and a rerun, or a run killed while judging, asks nothing twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import sqlalchemy as sa
import yaml
from PIL import Image as PILImage

from benchsmith.records import Conversation, Image, Provenance, Turn
from benchsmith.store import Store
from benchsmith.store.schema import llm_calls
from evaluation.conveval import scores
from evaluation.judge import pooled_outcome, pooled_score, read_rating, read_verdict
from evaluation.contract import configured
from evaluation.sources import Source, from_store
from evaluation.stage import evaluate
from tests.evaluation.conftest import with_evaluate
from tests.generators.test_resume import key_of
from tests.publish.test_cli import CLI
from tests.support.openai_server import ScriptedOpenAI, chat_completion

MODEL = "scripted-vlm"
JUDGE = "scripted-judge"
EVALUATE = {"models": {"vlm": {"kind": "openai", "model": MODEL}},
            "conveval": {"judge_model": JUDGE, "llm": {"concurrency": 4}}}


def test_votes_are_read_from_the_last_line_and_pooled_by_hand_computed_rules():
    assert read_rating("good, but thin.\nRating: 7") == 7
    assert read_rating("Rating: 3 at first... on reflection\nRating: **9**") == 9
    assert read_rating("I would give it a 7") is None and read_rating("Rating: 11") is None
    assert read_verdict("A is sharper.\nVerdict: A", model_is_a=True) == "win"
    assert read_verdict("Verdict: A", model_is_a=False) == "lose"
    assert read_verdict("verdict: tie", model_is_a=True) == "tie" and read_verdict("no idea", True) is None
    assert pooled_score([7, None, 9]) == 8.0           # median of 7 and 9
    assert pooled_score([3, 5, 4]) == 4.0
    assert pooled_score([2, 10, 9, 3]) == 6.0           # even count: mean of the middle two (3, 9)
    assert pooled_score([None, None]) is None
    assert pooled_outcome(["win", "lose", "win"]) == "win"
    assert pooled_outcome(["win", "lose", "tie"]) == "tie"   # a three-way draw
    assert pooled_outcome(["lose", "lose", None]) == "lose"
    assert pooled_outcome(["win", "lose", None]) == "tie"    # one each
    assert pooled_outcome([None, None, None]) is None


def row(setting, direct, pairwise):
    return {"setting": setting, "direct": {str(k): {"score": v} for k, v in direct.items()},
            "pairwise": {str(k): {"outcome": v} for k, v in pairwise.items()}}


def test_the_board_averages_per_setting_and_target():
    rows = [row("model", {1: 8.0, 2: 6.0, 3: 5.0, 0: 6.0}, {1: "win", 2: "lose", 3: "tie", 0: "lose"}),
            row("model", {1: 4.0, 2: 7.0, 3: None, 0: 5.0}, {1: "win", 2: "win", 3: None, 0: "lose"}),
            row("perception_given", {2: 9.0, 3: 8.0, 0: 7.0}, {2: "win", 3: "win", 0: "tie"})]
    board = scores(rows)
    model = board["model"]
    assert model["conversations"] == 2
    assert (model["direct_S1"], model["direct_S2"], model["direct_S3"], model["direct_S0"]) == (6.0, 6.5, 5.0, 5.5)
    assert model["direct_R2"] == 5.833 and model["direct_R1"] == round((5.833 + 5.5) / 2, 3)
    assert model["win_S1"] == 1.0 and model["win_S2"] == 0.5 and model["lose_S2"] == 0.5
    assert model["tie_S3"] == 1.0 and model["win_S0"] == 0.0     # the unjudged S3 is left out
    given = board["perception_given"]
    assert "direct_S1" not in given and given["direct_S2"] == 9.0 and given["tie_S0"] == 1.0
    assert "direct_R2" not in given and "perception_reasoning_given" not in board


# -- end to end against the scripted server -----------------------------------------------------------

TURNS = [("perception", "How many blue shapes are there?", "There are two blue shapes.", ["says two"]),
         ("reasoning", "Which of them would roll, and why?", "The circle, as it is round.", ["names the circle"]),
         ("creation", "Write a one-line ad for it.", "Roll with it: the blue circle.", ["one line", "the circle"])]


def add_conversations(store, media_dir, n: int) -> list[Conversation]:
    media_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for k in range(n):
        path = f"conv{k}.png"
        PILImage.new("RGB", (32, 24), (20 * k, 40, 200)).save(media_dir / path)
        image = Image(id=f"img{k}", path=path, width=32, height=24)
        store.add_items([image])
        turns = [Turn(level=level, task="t", instruction=f"{instruction} (#{k})", reference=f"REF{k}-{n_}: {ref}",
                      focus_points=focus) for n_, (level, instruction, ref, focus) in enumerate(TURNS, 1)]
        made.append(Conversation(item_id=image.id, turns=turns, provenance=Provenance(backend="test")))
    store.add_conversations(made, stage="generate")
    return made


DIRECT_PROMPT = {"strict examiner": 0, "Score one part": 1, "fair teacher": 2}
PAIR_PROMPT = {"Two AI assistants": 0, "Compare two conversations": 1, "You referee": 2}


def respond(request: dict):
    """The model answers with its turn number and what it last said; the judge rates by prompt (6, 9, 7;
    the second prompt gives no rating for the whole conversation) and prefers the model on two of three
    pairwise prompts, wherever the model's conversation is shown."""
    messages = request["messages"]
    if request["model"] == MODEL:
        users = [m for m in messages if m["role"] == "user"]
        said = [m["content"] for m in messages if m["role"] == "assistant"]
        return chat_completion(f"MODEL turn {len(users)} after [{' | '.join(said)}]", prompt_tokens=50,
                               completion_tokens=10)
    text = messages[0]["content"]
    for phrase, k in DIRECT_PROMPT.items():
        if phrase in text:
            whole = "Grade the conversation as a whole" in text or "Part to score: the conversation as a whole" in text
            if k == 1 and whole:
                return chat_completion("Looks fine overall, hard to say.")
            return chat_completion(f"Rationale.\nRating: {(6, 9, 7)[k]}")
    k = next(k for phrase, k in PAIR_PROMPT.items() if phrase in text)
    side_a = text.split("<<<ASSISTANT_A")[1].split("ASSISTANT_A>>>")[0]
    model_side = "A" if "MODEL turn" in side_a else "B"
    other = "B" if model_side == "A" else "A"
    return chat_completion(f"Reasons.\nVerdict: {model_side if k < 2 else other}")


def test_conversations_are_held_in_sequence_graded_and_pooled(settings, tmp_path):
    with Store(settings.db_url) as store:
        made = add_conversations(store, settings.media_dir, 2)
        with ScriptedOpenAI(respond) as server:
            options = with_evaluate(settings, tmp_path, EVALUATE, openai_base_url=server.base_url)
            source = Source("candidates", from_store(store, options.media_dir, "conversations"))
            stage = configured(options, "conveval").stage(store, options, source, "vlm")
            report = evaluate(store, stage)
            answers = [r for r in server.requests if r["model"] == MODEL]
            judged = [r for r in server.requests if r["model"] == JUDGE]
            sent = server.calls
            again = evaluate(store, configured(options, "conveval").stage(store, options, source, "vlm"))
            assert server.calls == sent and again.pending == 0
        rows = store.conversation_evals([stage.run.id])

    assert report.done == 6 and report.retry_later == 0
    # answers: 3 turns (model), 2 (perception given), 1 (perception and reasoning given), per conversation
    assert len(answers) == 2 * (3 + 2 + 1)
    # judging: 4 + 3 + 2 targets, each under 3 direct and 3 pairwise prompts
    assert len(judged) == 2 * 9 * 6
    first = answers[0]["messages"][0]["content"]
    assert first[0]["type"] == "image_url" and first[0]["image_url"]["url"].startswith("data:image/png;base64,")

    by = {(r["conversation_id"], r["setting"]): r for r in rows}
    conv = made[0]
    own = by[(conv.id, "model")]
    assert own["answers"] == ["MODEL turn 1 after []", "MODEL turn 2 after [MODEL turn 1 after []]",
                              "MODEL turn 3 after [MODEL turn 1 after [] | MODEL turn 2 after [MODEL turn 1 after []]]"]
    given = by[(conv.id, "perception_given")]
    assert given["answers"][0] == conv.turns[0].reference
    assert given["answers"][1] == f"MODEL turn 2 after [{conv.turns[0].reference}]"
    both = by[(conv.id, "perception_reasoning_given")]
    assert both["answers"][:2] == [conv.turns[0].reference, conv.turns[1].reference]
    assert both["answers"][2] == f"MODEL turn 3 after [{conv.turns[0].reference} | {conv.turns[1].reference}]"
    assert set(both["direct"]) == {"3", "0"} and set(given["direct"]) == {"2", "3", "0"}
    # by hand: direct votes (6, 9, 7) -> median 7; the whole conversation (6, None, 7) -> 6.5
    assert own["direct"]["1"]["votes"] == [6, 9, 7] and own["direct"]["1"]["score"] == 7.0
    assert own["direct"]["0"]["votes"] == [6, None, 7] and own["direct"]["0"]["score"] == 6.5
    # pairwise: two prompts prefer the model, one the reference, wherever each is shown -> win
    assert all(r["pairwise"][t]["votes"] == ["win", "win", "lose"] for r in rows for t in r["pairwise"])
    assert own["opponent"] == [t.reference for t in conv.turns]

    board = scores(rows)
    assert board["model"]["direct_S1"] == 7.0 and board["model"]["direct_S0"] == 6.5
    assert board["model"]["direct_R2"] == 7.0 and board["model"]["direct_R1"] == 6.75
    assert board["perception_given"]["win_S2"] == 1.0 and board["perception_reasoning_given"]["conversations"] == 2


def test_a_reference_model_is_the_pairwise_opponent_when_named(settings, tmp_path):
    evaluate_settings = {"models": {"vlm": {"kind": "openai", "model": MODEL},
                                    "rival": {"kind": "openai", "model": "rival-vlm"}},
                         "conveval": {"judge_model": JUDGE, "reference_model": "rival", "settings": ["model"]}}

    def rival_too(request):
        if request["model"] == "rival-vlm":
            return chat_completion("RIVAL says something")
        return respond(request)

    with Store(settings.db_url) as store:
        add_conversations(store, settings.media_dir, 1)
        with ScriptedOpenAI(rival_too) as server:
            options = with_evaluate(settings, tmp_path, evaluate_settings, openai_base_url=server.base_url)
            source = Source("candidates", from_store(store, options.media_dir, "conversations"))
            stage = configured(options, "conveval").stage(store, options, source, "vlm")
            evaluate(store, stage)
            assert sum(r["model"] == "rival-vlm" for r in server.requests) == 3
        (only,) = store.conversation_evals([stage.run.id])
    assert only["opponent"] == ["RIVAL says something"] * 3


def test_a_run_killed_while_judging_resumes_without_asking_anything_twice(settings, tmp_path):
    with Store(settings.db_url) as store:
        add_conversations(store, settings.media_dir, 3)
    (tmp_path / "benchsmith.yaml").write_text(yaml.safe_dump({"evaluate": EVALUATE}))

    def slow(request):
        reply = respond(request)
        reply.delay = 0.1
        return reply

    with ScriptedOpenAI(slow) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI"))} | {
            "BENCHSMITH_WORKSPACE": str(settings.workspace), "OPENAI_BASE_URL": server.base_url}
        command = [*CLI, "eval", "run", "--protocol", "conveval", "--candidates", "-m", "vlm"]
        first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while sum(r.get("model") == JUDGE for r in server.requests) < 40 and time.time() < deadline \
                and first.poll() is None:
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert first.returncode == -signal.SIGKILL, first.stdout.read().decode()
        with Store(settings.db_url) as store:
            with store.engine.connect() as conn:
                paid = set(conn.scalars(sa.select(llm_calls.c.key).where(llm_calls.c.status == "ok")))
        sent_before = server.calls
        second = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert second.returncode == 0, second.stdout + second.stderr
        rerun = [key_of(body) for body in server.requests[sent_before:]]
        # a POST cut off by the kill reaches the server with no body: it asked nothing
        everything = {key_of(body) for body in server.requests if body}
        third = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert third.returncode == 0 and server.calls == sent_before + len(rerun)
        assert "vlm on candidates (conveval): 0 done of 0 pending" in third.stdout

    assert paid and rerun and not set(rerun) & paid and len(set(rerun)) == len(rerun)
    assert len(everything) == 3 * (6 + 9 * 6)   # every answer and judgement there is, each paid once
    with Store(settings.db_url) as store:
        run_id = next(r["id"] for r in store.eval_runs("candidates") if r["protocol"] == "conveval")
        assert len(store.conversation_evals([run_id])) == 9

    board = subprocess.run([*CLI, "eval", "board", "--protocol", "conveval", "--candidates", "--json"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert board.returncode == 0, board.stderr
    assert '"direct_R1": 6.75' in board.stdout
    assert (settings.workspace / "evaluations" / "candidates" / "conversations.md").is_file()


def test_only_chat_models_can_hold_conversations(settings, tmp_path):
    import pytest

    from evaluation.adapters import EvalError

    nothing = Source("candidates", [])
    options = with_evaluate(settings, tmp_path, {"conveval": {"reference_model": "nobody"}})
    with Store(settings.db_url) as store:
        with pytest.raises(EvalError, match="model 'blind-longest' is of kind blind; conversations need a chat model"):
            configured(options, "conveval").stage(store, options, nothing, "blind-longest")
        options = with_evaluate(settings, tmp_path, {"models": EVALUATE["models"],
                                                     "conveval": {"reference_model": "nobody"}})
        with pytest.raises(EvalError, match="no model 'nobody' under evaluate.models"):
            configured(options, "conveval").stage(store, options, nothing, "vlm")


def test_a_release_holds_its_conversations_as_published_and_bad_sources_are_one_line(settings, oracle_dir, tmp_path):
    import pytest

    from publish.release import publish
    from evaluation.adapters import EvalError
    from evaluation.sources import resolve
    from tests.publish.conftest import build_reviewed
    from tests.publish.test_conversations import add_conversations as add_reviewed_conversations

    with Store(settings.db_url) as store:
        reviewed = build_reviewed(store, settings, oracle_dir, tmp_path)
        made = add_reviewed_conversations(store, sorted({q["item"] for q in reviewed.truth.values()})[:4])
        release = publish(store, settings, "v1")
        source = resolve(release=None, hub=None, candidates=False, releases_root=release.folder.parent,
                         store=store, media_dir=settings.media_dir, kind="conversations")
        held = source.items
        assert source.label == "release:v1" and sorted(c.conversation_id for c in held) == sorted([made[0].id, made[1].id])
        edited = next(c for c in held if c.conversation_id == made[0].id)
        assert edited.turns[1].reference == "The circle: it is twice the square's width."
        assert [t.level for t in edited.turns] == ["perception", "reasoning", "creation"]
        assert edited.turns[1].focus_points == ["names the circle", "gives size"]
        assert len(edited.frames) == 1 and edited.frames[0][:2] in (b"\xff\xd8", b"\x89P")

        empty = tmp_path / "empty-release"
        empty.mkdir()
        with pytest.raises(EvalError, match="is not a benchsmith release with conversations"):
            resolve(release=str(empty), hub=None, candidates=False, releases_root=tmp_path, store=store,
                    media_dir=settings.media_dir, kind="conversations")
        with pytest.raises(EvalError, match=r"cannot load 'someone/nothing-here' \(conversations/test\)"):
            resolve(release=None, hub="someone/nothing-here", candidates=False, releases_root=tmp_path, store=store,
                    media_dir=settings.media_dir, kind="conversations")
