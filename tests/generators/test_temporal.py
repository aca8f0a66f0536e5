"""Video ingest and temporal questions on synthetic moving-shape clips with known actions."""

from __future__ import annotations

import json
import random

import pytest

from benchsmith.dimensions import registry
from benchsmith.records import Video
from benchsmith.settings import load_settings
from ingest.videos import VideoError, frame_indices, ingest_videos, make_moving_shapes
from generators.stage import run_generate
from generators.temporal import TemporalSettings, generate, hard_negatives, label_set


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    out = tmp_path_factory.mktemp("clips")
    make_moving_shapes(out, 6, seed=2)
    return out


def test_ingest_keeps_uniform_frames_and_sorted_segments(tmp_path, store, clips):
    media = tmp_path / "media"
    report = ingest_videos(store, media, clips / "manifest.jsonl", frames=8)
    assert (report.seen, report.added, report.unchanged) == (6, 6, 0)
    videos = store.get_items(kind="video")
    assert len(videos) == 6
    video = videos[0]
    assert video.fps == 10 and video.n_frames >= 30 and len(video.frames) == 8
    assert all((media / frame).is_file() for frame in video.frames)
    assert (media / video.path).is_file()
    times = video.annotations["frame_times"]
    assert times == sorted(times) and times[0] < 0.5 and times[-1] > video.annotations["duration"] - 0.5
    again = ingest_videos(store, media, clips / "manifest.jsonl", frames=8)
    assert (again.added, again.skipped) == (0, 6)  # no video is hashed or sampled again


def test_bad_rows_are_refused_with_reasons(tmp_path, store, clips):
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    first_clip = json.loads((clips / "manifest.jsonl").read_text().splitlines()[0])["path"]
    rows = [
        {"path": "../outside.mp4", "segments": [{"start": 0, "end": 1, "label": "x"}]},
        {"path": "nowhere.mp4", "segments": [{"start": 0, "end": 1, "label": "x"}]},
        {"path": "broken.mp4", "segments": [{"start": 0, "end": 1, "label": "x"}]},
        {"path": str(clips / first_clip), "segments": [{"start": 2, "end": 1, "label": "backwards"}]},
    ]
    manifest = tmp_path / "videos.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    report = ingest_videos(store, tmp_path / "media", manifest)
    assert report.added == 0
    assert report.rejected == {"path_outside_root": 1, "missing_file": 1, "bad_video": 1, "bad_row": 2}
    reasons = [v.reason for v in store.get_verdicts(stage="ingest", subject_kind="input")]
    assert any("ends (1.0) before it starts (2.0)" in r for r in reasons)
    with pytest.raises(VideoError, match="not found"):
        ingest_videos(store, tmp_path / "media", tmp_path / "missing.jsonl")


def test_frames_are_spread_evenly():
    assert frame_indices(80, 8) == [5, 15, 25, 35, 45, 55, 65, 75]
    assert frame_indices(3, 8) == [0, 1, 2]


def _video(segments, steps=None, frames=8, duration=4.0) -> Video:
    times = [round((i + 0.5) * duration / frames, 3) for i in range(frames)]
    return Video(id="v1", path="v1.avi", frames=[f"frames/v1/frame_{i:02d}.png" for i in range(frames)],
                 annotations={"segments": segments, "steps": steps, "frame_times": times})


LABELS = ["the red circle moves left", "the red circle moves right", "the red circle grows", "the red circle shrinks",
          "the blue square moves up", "the blue square moves down", "the red square moves left"]


def test_questions_match_the_annotations_and_distractors_are_never_true():
    segments = [{"start": 0.0, "end": 1.0, "label": "the red circle moves left"},
                {"start": 1.0, "end": 2.0, "label": "the red circle grows"},
                {"start": 2.0, "end": 4.0, "label": "the red circle moves right"}]
    video = _video(segments)
    settings = TemporalSettings(per_dimension=5)
    recognise = generate(video, registry().get("action_recognition"), LABELS, settings)
    assert [q.options[0] for q in recognise] == [s["label"] for s in segments]
    for question, segment in zip(recognise, segments):
        assert f"between {segment['start']:g} s and {segment['end']:g} s" in question.text
        assert segment["label"] not in question.options[1:]
    predict = generate(video, registry().get("action_prediction"), LABELS, settings)
    assert [q.options[0] for q in predict] == ["the red circle grows", "the red circle moves right"]
    assert predict[0].meta["frames"] == video.frames[:2]  # only what was seen before 1.0 s
    assert all(q.options[0] not in q.text for q in predict)
    [order] = generate(video, registry().get("procedure_understanding"), LABELS, settings)
    assert order.options[0] == ", then ".join(s["label"] for s in segments)
    assert len(set(order.options)) == 4


def test_hard_negatives_are_the_most_similar_labels():
    picked = hard_negatives("the red circle moves left", LABELS, set(), pool=3, rng=random.Random(0))
    assert sorted(picked) == sorted(["the red circle moves right", "the red square moves left",
                                     "the red circle grows"])


def test_a_short_procedure_gets_no_question():
    video = _video([{"start": 0, "end": 1, "label": "a"}, {"start": 1, "end": 2, "label": "b"}])
    assert generate(video, registry().get("procedure_understanding"), LABELS, TemporalSettings()) == []


def test_the_stage_generates_temporal_questions_once(tmp_path, store, clips):
    ingest_videos(store, tmp_path / "media", clips / "manifest.jsonl")
    settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench")})
    report = run_generate(store, settings, generators=["temporal"])
    assert report["jobs"] == 18 and report["kept"] > 18
    questions = store.get_questions(status="candidate")
    truth = {v.id: v.annotations for v in store.get_items(kind="video")}
    labels = label_set(store.get_items(kind="video"), TemporalSettings())
    for q in questions:
        correct = q.options[q.answer]
        if q.meta["template"] == "recognition":
            start, end = q.meta["window"]
            assert correct in {s["label"] for s in truth[q.item_id]["segments"] if s["start"] == start and s["end"] == end}
        elif q.meta["template"] == "prediction":
            following = [s for s in truth[q.item_id]["segments"] if s["start"] >= q.meta["window"][1]]
            assert correct == following[0]["label"]
        else:
            assert correct == ", then ".join(truth[q.item_id]["steps"])
        assert all(o in labels for o in q.options) or q.meta["template"] == "procedure"
    assert run_generate(store, settings, generators=["temporal"])["jobs"] == 0


def test_llm_written_distractors_are_used_when_they_are_safe(tmp_path, store, clips):
    from tests.support.openai_server import ScriptedOpenAI, json_completion

    def respond(request):
        user = request["messages"][1]["content"]
        answer = json.loads(user.split("Correct answer: ")[1].splitlines()[0])
        if answer.endswith("grows"):  # an unsafe reply: the correct action comes back as a distractor
            return json_completion({"distractors": [answer, "it wobbles", "it spins"]})
        return json_completion({"distractors": [f"{answer} twice", "it wobbles", "it spins"]})

    ingest_videos(store, tmp_path / "media", clips / "manifest.jsonl")
    with ScriptedOpenAI(respond) as server:
        settings = load_settings(env={"BENCHSMITH_WORKSPACE": str(tmp_path / "bench"), "OPENAI_BASE_URL": server.base_url,
                                      "BENCHSMITH__GENERATE__TEMPORAL__DISTRACTORS": "llm"})
        report = run_generate(store, settings, generators=["temporal"])
        calls = server.calls
        assert report["jobs"] == 18 and report["llm_requests"] == calls > 0
        from benchsmith.store.schema import work_ledger
        with store.engine.begin() as conn:  # forget what was done: the cache must answer everything
            conn.execute(work_ledger.delete().where(work_ledger.c.stage == "generate:temporal"))
        again = run_generate(store, settings, generators=["temporal"])
        assert again["jobs"] == 18 and server.calls == calls
    asked = [json.loads(r["messages"][1]["content"].split("Correct answer: ")[1].splitlines()[0])
             for r in server.requests]
    questions = store.get_questions()
    kinds = {q.meta.get("distractors", "procedure") for q in questions}
    assert kinds == {"llm", "labels", "procedure"}
    for q in questions:
        correct = q.options[q.answer]
        if q.meta["template"] == "procedure":
            assert "distractors" not in q.meta and correct not in asked
        elif correct.endswith("grows"):
            assert q.meta["distractors"] == "labels"
            assert q.meta["llm_distractors_unusable"] == "a distractor is also a correct action"
        else:
            assert q.meta["distractors"] == "llm"
            assert sorted(q.options) == sorted([correct, f"{correct} twice", "it wobbles", "it spins"])
            assert q.provenance.model == "gpt-4o-mini" and q.provenance.prompt_version == "temporal-distractors-v2"
