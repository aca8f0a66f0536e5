"""The store on SQLite and on a real PostgreSQL: idempotent upserts, status moves, migrations."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from benchsmith.records import Fact, Image, Provenance, Question, Verdict
from benchsmith.store import (SCHEMA_HEAD, ContradictionError, Store, StoreError, TransitionError, alembic_config,
                              migrate)
from benchsmith.store.schema import metadata

PROV = Provenance(backend="programmatic", model=None, prompt_version="t1")


def image(n: int) -> Image:
    return Image(id=f"{n:064x}", path=f"{n:02x}/{n}.png", width=64, height=48, source="test")


def question(item: str, text: str, answer: int = 0) -> Question:
    return Question(item_id=item, dimension_id=5, text=text, options=["1", "2", "3", "4"], answer=answer,
                    provenance=PROV)


def test_adding_items_twice_stores_them_once(store):
    assert store.add_items([image(1), image(2)]) == 2
    assert store.add_items([image(2), image(3)]) == 1
    assert [i.id for i in store.get_items()] == [image(n).id for n in (1, 2, 3)]


def test_questions_move_through_the_allowed_statuses_and_keep_their_history(store):
    store.add_items([image(1)])
    q = question(image(1).id, "How many circles are there?")
    assert store.add_questions([q, q], stage="generate") == 1
    assert store.add_questions([q], stage="generate") == 0
    store.move("question", [q.id], "in_review", stage="review")
    store.move("question", [q.id], "accepted", stage="review")
    assert store.move("question", [q.id], "accepted", stage="review") == 0  # repeating is harmless
    store.move("question", [q.id], "published", stage="publish", reason="v1")
    events = store.events(q.id)
    assert [(e["from_status"], e["to_status"]) for e in events] == [
        (None, "candidate"), ("candidate", "in_review"), ("in_review", "accepted"), ("accepted", "published")]


def test_a_dropped_question_stays_with_its_reason_and_cannot_come_back(store):
    store.add_items([image(1)])
    q = question(image(1).id, "How many squares?")
    store.add_questions([q], stage="generate")
    drop = Verdict(subject_id=q.id, subject_kind="question", stage="blind", rule="seed_all_correct",
                   passed=False, reason="all 3 solvers answered without the image")
    store.move("question", [q.id], "dropped", stage="blind", reason=drop.reason, verdicts_to_add=[drop])
    with pytest.raises(TransitionError):
        store.move("question", [q.id], "in_review", stage="review")
    [kept] = store.get_questions(status="dropped")
    assert kept.id == q.id
    assert store.get_verdicts(subject_id=q.id)[0].reason == "all 3 solvers answered without the image"


def test_a_failed_gate_verdict_never_sits_on_a_live_question(store):
    store.add_items([image(1)])
    live, twin = question(image(1).id, "How many stars?"), question(image(1).id, "How many stars?", answer=1)
    failed = Verdict(subject_id=twin.id, subject_kind="question", stage="quality", rule="near_duplicate",
                     passed=False, reason="asks the same as itself")
    assert twin.id == live.id
    with pytest.raises(ContradictionError, match="in status 'candidate'"):  # one row, two stories: refused whole
        store.add_questions([live, twin.model_copy(update={"status": "dropped"})], stage="generate",
                            verdicts_for_new=[failed])
    assert store.get_questions() == [] and store.get_verdicts() == []
    store.add_questions([live], stage="generate")
    with pytest.raises(ContradictionError):
        store.add_verdicts([failed])
    store.add_verdicts([failed.model_copy(update={"stage": "item_analysis"})])  # other stages' doubts may stay
    store.move("question", [live.id], "dropped", stage="generate")
    store.add_verdicts([failed])  # once dropped, the gate's verdict explains it
    assert store.gate_contradictions() == []


def test_question_ids_ignore_option_order_and_spacing():
    a = question("x" * 64, "How many  circles are there?")
    b = a.model_copy(update={"options": ["4", "3", "2", "1"], "answer": 3, "text": "how many circles are there"})
    assert a.id == b.id


def test_facts_are_stored_once_and_usable_images_listed_oldest_first(store):
    store.add_items([image(1), image(2)])
    fact = Fact(item_id=image(1).id, kind="object", text="circle", box=(0.1, 0.1, 0.5, 0.5), score=0.9,
                provenance=Provenance(backend="supplied"))
    assert store.item_ids(kind="image") == [image(1).id, image(2).id]
    assert store.add_facts("supplied", [fact, fact]) == 1
    assert store.add_facts("supplied", [fact]) == 0
    assert store.get_facts([image(1).id])[image(1).id] == [fact]


def test_facts_written_under_an_extractors_old_settings_are_not_returned_beside_the_current_ones(store):
    store.add_items([image(1)])
    item = image(1).id

    def line(text: str, threshold: float) -> Fact:
        return Fact(item_id=item, kind="ocr", text=text, box=(0.1, 0.1, 0.5, 0.2),
                    quad=((0.1, 0.1), (0.5, 0.1), (0.5, 0.2), (0.1, 0.2)),
                    provenance=Provenance(backend="rapidocr", model="ppocr", params={"threshold": threshold}))

    caption = Fact(item_id=item, kind="caption", text="A sign.", provenance=Provenance(backend="caption", model="blip"))
    store.add_facts("rapidocr:ppocr:aaaaaaaa", [line("SALE", 0.5), line("SA1E", 0.5)])
    store.add_facts("caption:blip:cccccccc", [caption])
    store.add_facts("rapidocr:ppocr:bbbbbbbb", [line("SALE", 0.7)])  # the same extractor under new settings
    assert store.get_facts([item])[item] == [caption, line("SALE", 0.7)]
    assert store.get_facts([item], kinds=["ocr"])[item] == [line("SALE", 0.7)]


def test_migrations_build_exactly_the_declared_schema(store):
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []


def test_an_older_store_is_migrated_forward_keeping_its_rows(store_url):
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
    engine.dispose()
    with Store(store_url) as store:  # an empty versioned store is brought to head
        store.add_items([image(4)])
    with Store(store_url) as store:
        assert [i.id for i in store.get_items()] == [image(4).id]


def test_extraction_records_of_an_older_store_move_onto_the_work_ledger(store_url):
    engine = sa.create_engine(store_url)
    migrate(engine, "0003")
    when = "2026-11-01 10:00:00+00:00"
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO extractions (item_id, extractor, status, reason, n_facts, seconds, created_at) "
                             "VALUES (:i, :e, :s, :r, :n, 0.5, :t)"), [
            {"i": "a" * 64, "e": "florence2:microsoft/Florence-2-large-ft:0123abcd/with/a/long/local/path", "s": "done",
             "r": "", "n": 7, "t": when},
            {"i": "b" * 64, "e": "rapidocr:rapidocr-3.4:9f8e7d6c", "s": "failed", "r": "image cannot be read", "n": 0,
             "t": when}])
    engine.dispose()
    with Store(store_url) as store:
        assert store.extraction_counts() == {("florence2:microsoft/Florence-2-large-ft:0123abcd/with/a/long/local/path",
                                              "done"): 1, ("rapidocr:rapidocr-3.4:9f8e7d6c", "failed"): 1}
        failure, = store.extraction_failures()
        assert (failure["item_id"], failure["reason"], failure["n_facts"]) == ("b" * 64, "image cannot be read", 0)
        assert "extractions" not in sa.inspect(store.engine).get_table_names()
        assert store.finished_subjects("extract", "rapidocr:rapidocr-3.4:9f8e7d6c", retry_failed=True) == set()


def test_a_store_from_a_newer_benchsmith_is_refused_with_a_clear_message(store_url):
    Store(store_url).close()
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match="newer than this benchsmith"):
        migrate(engine)
    engine.dispose()


def test_a_foreign_database_is_refused_not_mangled(store_url):
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE customers (id INTEGER PRIMARY KEY)"))
    with pytest.raises(StoreError, match="no benchsmith schema version"):
        Store(store_url)
    engine.dispose()


def test_an_unreachable_database_is_a_clear_error():
    with pytest.raises(StoreError, match="cannot open the store"):
        Store("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")


def test_alembic_config_points_at_the_packaged_migrations():
    assert alembic_config().get_main_option("script_location").endswith("migrations")


def test_the_schema_head_that_opens_a_store_without_alembic_is_alembics_own_head():
    from alembic.script import ScriptDirectory

    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == SCHEMA_HEAD
    assert command  # the migration commands are importable for maintainers' use


def test_conversations_move_through_the_question_statuses_and_keep_their_history(store):
    from benchsmith.records import Conversation, Provenance, Turn
    from benchsmith.store import TransitionError

    turns = [Turn(level=level, instruction=f"{level} ask", reference=f"{level} answer", focus_points=["p"])
             for level in ("perception", "reasoning", "creation")]
    first = Conversation(item_id="i1", turns=turns, provenance=Provenance(backend="test", model="m", tokens_in=9))
    second = Conversation(item_id="i2", turns=turns, provenance=Provenance(backend="test"))
    assert store.add_conversations([first, second], stage="generate") == 2
    assert store.add_conversations([first], stage="generate") == 0
    assert first.id != second.id
    store.move("conversation", [first.id, second.id], "in_review", stage="review")
    store.move("conversation", [second.id], "rejected", stage="review", reason="blurry")
    edited = [turns[0], turns[1].model_copy(update={"reference": "a better answer"}), turns[2]]
    store.move("conversation", [first.id], "accepted", stage="review", updates_by_id={first.id: {"review_turns": edited}})
    with pytest.raises(TransitionError):
        store.move("conversation", [second.id], "accepted", stage="review")
    (accepted,) = store.get_conversations(status="accepted")
    assert accepted.id == first.id and accepted.final_turns[1].reference == "a better answer"
    assert accepted.turns[1].reference == "reasoning answer" and accepted.provenance.tokens_in == 9
    assert [e["to_status"] for e in store.events(second.id)] == ["candidate", "in_review", "rejected"]
    assert store.events(second.id)[-1]["reason"] == "blurry"
    assert store.status_counts("conversation") == {"accepted": 1, "rejected": 1}


def test_workers_claiming_and_caching_the_same_llm_calls_at_once_on_postgresql_each_key_goes_to_one(postgres_url):
    """Shards on many workers share one call cache: racing inserts of one key neither crash nor double-claim."""
    import threading

    rows = [{"key": f"k{i}", "purpose": "generate", "model": "m", "request": {"i": i}} for i in range(60)]
    with Store(postgres_url):
        pass  # the schema exists before the workers open it, as in a build (the flow opens the store first)
    barrier = threading.Barrier(6, timeout=60)
    claimed: dict[str, set[str]] = {}
    errors: list[BaseException] = []

    def worker(owner: str) -> None:
        try:
            with Store(postgres_url) as store:
                barrier.wait()
                mine = store.claim_llm_calls(rows, owner, stale_after_s=600)
                claimed[owner] = mine
                for key in mine:
                    store.put_llm_calls([{"key": key, "purpose": "generate", "model": "m", "request": {},
                                          "response": {"ok": 1}, "status": "ok"}])
                barrier.wait()
                store.put_llm_calls([{"key": "k0", "purpose": "generate", "model": "m", "request": {},
                                      "response": {"ok": 2}, "status": "ok"}])  # every worker writes it at once
        except BaseException as exc:  # noqa: BLE001 - reported below, on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    owners_of = [owner for owner, keys in claimed.items() for _ in keys]
    assert sorted(k for keys in claimed.values() for k in keys) == sorted(r["key"] for r in rows)  # once each
    assert len(owners_of) == 60
    with Store(postgres_url) as store:
        assert {k: v["status"] for k, v in store.get_llm_calls([r["key"] for r in rows]).items()} == {
            r["key"]: "ok" for r in rows}


def test_questions_and_conversations_of_an_older_store_move_onto_one_lifecycle(store_url):
    """0007 -> head: migrations 0008 (events, review tasks, releases) and 0009 (reviews)."""
    engine = sa.create_engine(store_url)
    migrate(engine, "0007")
    when = datetime(2026, 11, 1, 10, tzinfo=timezone.utc)
    q, c, gone = "q" * 64, "c" * 64, "w" * 64
    with engine.begin() as conn:
        table = {name: sa.Table(name, sa.MetaData(), autoload_with=conn) for name in (
            "questions", "conversations", "question_events", "conversation_events", "review_tasks",
            "conversation_review_tasks", "releases", "release_questions", "release_conversations", "reviews",
            "conversation_reviews")}
        common = {"status": "published", "generator": "template", "provenance": {"backend": "template"}, "meta": {},
                  "created_at": when, "updated_at": when}
        conn.execute(sa.insert(table["questions"]), [
            common | {"id": qid, "item_id": "i" * 64, "dimension_id": 3, "text": qid, "options": list("abcd"),
                      "answer": 0} for qid in (q, gone)])
        conn.execute(sa.insert(table["conversations"]), [common | {"id": c, "item_id": "i" * 64, "turns": []}])
        conn.execute(sa.insert(table["question_events"]), [
            {"question_id": q, "from_status": None, "to_status": "candidate", "stage": "generate", "reason": "",
             "created_at": when},
            {"question_id": q, "from_status": "candidate", "to_status": "in_review", "stage": "review", "reason": "",
             "created_at": when}])
        conn.execute(sa.insert(table["conversation_events"]), [
            {"conversation_id": c, "from_status": None, "to_status": "candidate", "stage": "generate", "reason": "",
             "created_at": when}])
        conn.execute(sa.insert(table["review_tasks"]), [
            {"question_id": q, "round": "", "project_id": 1, "task_id": 11, "pushed_at": when},
            {"question_id": q, "round": "v1", "project_id": 2, "task_id": 21, "pushed_at": when}])
        conn.execute(sa.insert(table["conversation_review_tasks"]), [
            {"conversation_id": c, "project_id": 3, "task_id": None, "pushed_at": when}])
        conn.execute(sa.insert(table["releases"]), [
            {"version": "v1", "path": "", "n_questions": 2, "changelog": {}, "meta": {}, "created_at": when},
            {"version": "v2", "path": "", "n_questions": 1, "changelog": {}, "meta": {"withdrawn": [gone]},
             "created_at": when + timedelta(days=1)}])
        conn.execute(sa.insert(table["release_questions"]), [
            {"version": "v1", "question_id": q, "content_hash": "h1"},
            {"version": "v1", "question_id": gone, "content_hash": "h2"},
            {"version": "v2", "question_id": q, "content_hash": "h1"}])
        conn.execute(sa.insert(table["release_conversations"]), [
            {"version": "v2", "conversation_id": c, "content_hash": "h3"}])
        reviewed = {"annotator": "a@x", "keep": True, "reasons": [], "comment": "", "created_at": when}
        conn.execute(sa.insert(table["reviews"]), [reviewed | {"id": "r1", "question_id": q, "task_id": 11,
                                                               "annotation_id": 5, "answer": 2, "dimension_id": 3}])
        conn.execute(sa.insert(table["conversation_reviews"]), [
            reviewed | {"id": f"v{n}", "conversation_id": c, "task_id": 31, "annotation_id": 6,
                        "submitted_at": when + timedelta(hours=n),
                        "turns": [{"level": "perception", "instruction": "What?", "reference": f"take {n}"}]}
            for n in (1, 2)])
    engine.dispose()

    with Store(store_url) as store:
        assert [(e["kind"], e["to_status"]) for e in store.events(q)] == [("question", "candidate"),
                                                                           ("question", "in_review")]
        assert [(e["kind"], e["to_status"]) for e in store.events(c)] == [("conversation", "candidate")]
        assert store.get_review_tasks("question") == {q: (1, 11)}
        assert store.get_second_look_tasks() == {(q, "v1"): (2, 21)}
        assert store.get_review_tasks("conversation") == {c: (3, None)}
        assert store.release_hashes("v1") == {q: "h1", gone: "h2"}
        assert store.release_hashes("v2", "question") == {q: "h1"}
        assert store.release_hashes("v2", "conversation") == {c: "h3"}
        assert [r.question_ids for r in store.get_releases()] == [sorted([q, gone]), [q]]
        # a withdrawal lived in the release's meta; now it is the question's status, with the event that says so
        assert store.status_counts("question") == {"published": 1, "withdrawn": 1}
        assert store.events(gone)[-1]["to_status"] == "withdrawn"
        assert store.events(gone)[-1]["reason"].startswith("withdrawn in v2")
        # one review table: the question's review, and every version of the conversation's (the latest counts)
        (answered,) = store.get_reviews([q])
        assert (answered.answer, answered.dimension_id, answered.submitted_at) == (2, 3, when)
        versions = store.get_reviews([c], kind="conversation", every_version=True)
        assert [v.turns[0].reference for v in versions] == ["take 1", "take 2"]
        assert [v.turns[0].reference for v in store.get_reviews([c], kind="conversation")] == ["take 2"]
        assert not {"question_events", "conversation_events", "conversation_review_tasks", "release_questions",
                    "release_conversations", "conversation_reviews"} & set(sa.inspect(store.engine).get_table_names())


def test_an_image_set_comes_back_with_its_images_in_order_and_its_order_is_part_of_its_id(store):
    from benchsmith.records import Image, ImageSet

    first, second = (Image(id=f"{n}" * 64, path=f"{n}{n}/{n}.png", width=640, height=480) for n in "ab")
    pair, swapped = ImageSet.of([first, second]), ImageSet.of([second, first])
    assert pair.id != swapped.id and pair.path == "aa/a.png"
    store.add_items([first, second, pair, swapped])
    assert store.get_items([pair.id]) == [pair]
    assert store.get_items([swapped.id])[0].paths == ["bb/b.png", "aa/a.png"]
    assert {i.id for i in store.get_items(kind="image_set")} == {pair.id, swapped.id}
    with pytest.raises(ValueError, match="2 to 6 images"):
        ImageSet.of([first])
