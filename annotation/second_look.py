"""Second looks at published questions that the models' answers put in doubt.

`benchsmith eval items` flags questions in the store (verdicts of its stage): every model chose the same
wrong option (the key is likely wrong), no model beat chance, or a text-only baseline answered without
the image. `benchsmith review push --flagged` sends the flagged questions that are in the latest
release to their own Label Studio project (`review.second_look_project`), through the same crash-safe
push as the first review, in a round named after that release. Each task shows why the question is
back: the flags, the published answer, and what every model chose.

`benchsmith review pull` decides a second look once it has `review.second_look_overlap` reviews:
- kept with the published answer and dimension: confirmed; the flag is cleared, and the question is
  not sent again while its published content stays the same;
- kept with another answer or dimension: changed; the next `publish` carries the new answer and lists
  the question as changed in the CHANGELOG, saying why;
- discarded: withdrawn (its status) from the next version, listed as removed with the annotators' reasons.
A tie waits for one more review, as in the first round. Each decision is a verdict of this stage and
an event in the question's history (published -> published, or published -> withdrawn).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from annotation.pull import change_text
from annotation.reconcile import Decision, decide
from annotation.settings import ReviewSettings
from benchsmith.dimensions import Registry
from benchsmith.errors import BenchsmithError
from benchsmith.records import LETTERS, Question, Verdict
from benchsmith.store import Store

STAGE = "second_look"
DOUBT = "models_in_doubt"      # the flags a question was sent back with
RULE = "human_second_look"     # what the second look decided

FLAG_TEXT = {
    "same_wrong_option": "every model evaluated chose the same wrong option, so the published answer may be wrong",
    "no_model_beats_chance": "no model did better than chance on it",
    "blind_right": "a text-only model answered it without seeing the image",
}


class SecondLookError(BenchsmithError, ValueError):
    """The flagged questions cannot be read or sent as asked; the message says what to do."""


@dataclass(frozen=True)
class Doubt:
    """One flagged question as `benchsmith eval items` wrote it."""

    question_id: str
    flags: tuple[str, ...]
    key: str                                            # the answer the models were scored against
    choices: dict[str, str] = field(default_factory=dict)  # model -> letter chosen ("-": no option matched)
    blind_right: tuple[str, ...] = ()


@dataclass
class Plan:
    round: str                                  # the release version in doubt
    questions: list[Question]
    notes: dict[str, str]
    skipped: Counter = field(default_factory=Counter)   # reason -> questions not sent


def flagged_plan(store: Store) -> Plan:
    """The second looks to send: each question a flag of `benchsmith eval items` stands on (the verdicts of
    its stage, item_analysis), planned against the source the flag was raised on."""
    flags: dict[str, list[Verdict]] = {}
    for verdict in store.get_verdicts(stage="item_analysis", passed=False, subject_kind="question"):
        flags.setdefault(verdict.subject_id, []).append(verdict)
    doubts: dict[str, list[Doubt]] = {}
    for qid, found in flags.items():
        entry = found[-1].details
        doubts.setdefault(entry["source"], []).append(Doubt(
            qid, tuple(sorted((v.rule for v in found), key=list(FLAG_TEXT).index)), entry["key"], entry["choices"],
            tuple(entry["blind_right"])))
    if not doubts:
        plan(store, "", [])  # says so when nothing is published yet
        raise SecondLookError("no question is flagged: run `benchsmith eval items` on the latest release first")
    plans = [plan(store, source, found) for source, found in sorted(doubts.items())]
    return Plan(plans[0].round, [q for p in plans for q in p.questions],
                {qid: note for p in plans for qid, note in p.notes.items()}, sum((p.skipped for p in plans), Counter()))


def note_for(doubt: Doubt) -> str:
    """What the annotator reads first: why the question is back and what the models chose."""
    reasons = "; ".join(FLAG_TEXT.get(flag, flag) for flag in doubt.flags)
    lines = [f"Published answer: {doubt.key}.", f"Why it is back: {reasons}."]
    if doubt.choices:
        lines.append("Models' choices: " + ", ".join(f"{model} chose {letter if letter != '-' else 'no option'}"
                                                     for model, letter in sorted(doubt.choices.items())) + ".")
    if doubt.blind_right:
        lines.append("Right without the image: " + ", ".join(doubt.blind_right) + ".")
    lines.append("Check the answer against the image: keep it with the right answer (change it if it is wrong), "
                 "or discard the question.")
    return "\n".join(lines)


def evaluated_version(source: str) -> str | None:
    """The release version a flag's source label names, when it names one."""
    if source.startswith("release:"):
        return source.removeprefix("release:")
    if source.startswith("folder:"):
        marker = Path(source.removeprefix("folder:")) / "release.json"
        try:
            return json.loads(marker.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError):
            return None
    return None


def decisions(store: Store) -> dict[str, Verdict]:
    """question id -> the verdict of its latest decided second look."""
    return {v.subject_id: v for v in store.get_verdicts(stage=STAGE, subject_kind="question") if v.rule == RULE}


def plan(store: Store, source: str, doubts: Sequence[Doubt]) -> Plan:
    """Which flagged questions go out now, in the round of the latest release, and why the others do not."""
    releases = store.get_releases()
    if not releases:
        raise SecondLookError("nothing is published yet: a second look is for published questions; review "
                              "candidates with `benchsmith review push`")
    latest = releases[-1].version
    current = store.release_hashes(latest)
    evaluated = evaluated_version(source)
    known = {r.version for r in releases}
    seen = store.release_hashes(evaluated) if evaluated in known else current
    decided = decisions(store)
    undecided = {qid for (qid, round_), _task in store.get_second_look_tasks().items()
                 if round_ != latest and _decided_round(decided, qid) != round_}
    sending: dict[str, Doubt] = {}
    skipped: Counter = Counter()
    for doubt in doubts:
        qid = doubt.question_id
        verdict = decided.get(qid)
        if qid not in current:
            skipped[f"not in the latest release {latest}"] += 1
        elif seen.get(qid) != current[qid]:
            skipped[f"changed since {evaluated} was evaluated"] += 1
        elif verdict is not None and verdict.details.get("content_hash") == current[qid]:
            skipped[f"already decided at a second look ({verdict.details.get('outcome')})"] += 1
        elif qid in undecided:
            skipped["waiting for an earlier second look"] += 1
        else:
            sending[qid] = doubt
    questions = store.get_questions(ids=sorted(sending))
    store.add_verdicts([Verdict(subject_id=qid, subject_kind="question", stage=STAGE, rule=DOUBT, passed=False,
                                reason="flagged by the models: " + ", ".join(doubt.flags),
                                details={"round": latest, "source": source, "flags": list(doubt.flags),
                                         "key": doubt.key, "choices": doubt.choices,
                                         "blind_right": list(doubt.blind_right)})
                        for qid, doubt in sending.items()])
    return Plan(latest, questions, {qid: note_for(doubt) for qid, doubt in sending.items()}, skipped)


def _decided_round(decided: dict[str, Verdict], qid: str) -> str | None:
    """The round of the question's latest decided second look, if any."""
    verdict = decided.get(qid)
    return verdict.details.get("round") if verdict else None


def open_looks(store: Store, review: ReviewSettings,
               ids: Sequence[str] | None = None) -> list[tuple[str, str, int, Question, Decision]]:
    """The second looks out and undecided (of these questions), each as (question id, round, task, question,
    what its stored reviews decide now)."""
    decided = decisions(store)
    wanted = None if ids is None else set(ids)
    out = {(qid, round_): task for (qid, round_), (_project, task) in store.get_second_look_tasks().items()
           if task is not None and _decided_round(decided, qid) != round_ and (wanted is None or qid in wanted)}
    questions = {q.id: q for q in store.get_questions(ids=sorted({qid for qid, _ in out}))}
    reviews: dict[int, list] = {}
    for r in store.get_reviews(sorted(questions)):
        reviews.setdefault(r.task_id, []).append(r)
    return [(qid, round_, task, questions[qid], decide(questions[qid], reviews.get(task, []), review.second_look_overlap))
            for (qid, round_), task in sorted(out.items())]


def decide_second_looks(store: Store, review: ReviewSettings, registry: Registry,
                        ids: Sequence[str] | None = None) -> Counter:
    """Decide every second look that is out and undecided (of these questions) from its stored reviews;
    count the outcomes (confirmed, changed, withdrawn); a tie or too few reviews waits for more."""
    doubts = {v.subject_id: v for v in store.get_verdicts(stage=STAGE, subject_kind="question") if v.rule == DOUBT}
    counts: Counter = Counter()
    hashes: dict[str, dict[str, str]] = {}
    for qid, round_, task, question, decision in open_looks(store, review, ids):
        if decision.outcome in ("waiting", "flagged"):
            continue
        published_hash = hashes.setdefault(round_, store.release_hashes(round_)).get(qid, "")
        flags = doubts[qid].details.get("flags", []) if qid in doubts else []
        details = {"round": round_, "content_hash": published_hash, "flags": flags, "task_id": task}
        answer = question.final_answer
        dimension = question.final_dimension_id
        to_status = "published"
        if decision.outcome == "rejected":
            outcome, reason = "withdrawn", "withdrawn at a second look: " + (", ".join(decision.reasons) or
                                                                             "no reason given")
            details |= {"reasons": list(decision.reasons), "comments": list(decision.comments)}
            updates, to_status = None, "withdrawn"
        elif (decision.answer, decision.dimension_id) == (answer, dimension):
            outcome, reason, updates = "confirmed", f"answer {LETTERS[answer]} confirmed at a second look", None
        else:
            outcome = "changed"
            reason = change_text(answer, dimension, decision.answer, decision.dimension_id, registry) + " at a second look"
            details |= {"from_answer": LETTERS[answer], "to_answer": LETTERS[decision.answer],
                        "from_dimension": dimension, "to_dimension": decision.dimension_id}
            updates = {"review_answer": decision.answer, "review_dimension_id": decision.dimension_id}
        verdict = Verdict(subject_id=qid, subject_kind="question", stage=STAGE, rule=RULE,
                          passed=outcome != "withdrawn", reason=reason, details=details | {"outcome": outcome})
        # the answer, the verdict and the history event in one transaction: a crash leaves all or none; the
        # event says why the models put it in doubt too, for the next release's CHANGELOG
        flagged = f" (flagged by the models: {', '.join(flags)})" if flags and outcome != "confirmed" else ""
        store.move("question", [qid], to_status, stage=STAGE, reason=reason + flagged, updates=updates,
                             verdicts_to_add=[verdict])
        counts[outcome] += 1
    return counts


def outcomes_on(store: Store, source: str, question_ids: Sequence[str]) -> dict[str, str]:
    """question id -> what a second look decided (confirmed, changed, withdrawn) about the content the
    models saw in `source`, for the questions it decided."""
    version = evaluated_version(source)
    hashes = store.release_hashes(version) if version else {}
    decided = decisions(store)
    return {qid: decided[qid].details.get("outcome") for qid in question_ids
            if qid in decided and qid in hashes and decided[qid].details.get("content_hash") == hashes[qid]}


def second_look_counts(store: Store, review: ReviewSettings) -> dict[str, int]:
    """For `benchsmith review status`: second looks out and their outcomes so far."""
    outcomes = Counter(v.details.get("outcome") for v in decisions(store).values())
    return {"second looks waiting for annotators": len(open_looks(store, review)),
            **{f"second looks {outcome}": outcomes[outcome] for outcome in ("confirmed", "changed", "withdrawn")}}
