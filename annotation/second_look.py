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

from annotation import lifecycle
from annotation.questions import Questions, change_text
from annotation.settings import ReviewSettings
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


@dataclass(frozen=True)
class Look:
    """A second look out and undecided: the published question, the round (the release it rechecks), its task."""

    question: Question
    round: str
    task: int
    published_hash: str                # the question's content as the round's release holds it
    flags: tuple[str, ...] = ()        # what the models' answers flagged it for

    @property
    def id(self) -> str:
        return self.question.id


@dataclass(frozen=True)
class SecondLooks(Questions):
    """Second looks as a round of the review lifecycle: the reviews of a look's own task decide it, by the
    first round's majority rule, once it has `review.second_look_overlap` of them. Kept, the question stays
    published, confirmed or changed; discarded, it is withdrawn. A decided look is final: a new flag on
    the question's next release sends another."""

    stage: str = STAGE
    rule: str = RULE

    @property
    def overlap(self) -> int:
        return self.review.second_look_overlap

    def open(self, store: Store, ids: Sequence[str] | None = None) -> list[Look]:
        verdicts = store.get_verdicts(stage=STAGE, subject_kind="question")
        decided = {v.subject_id: v for v in verdicts if v.rule == RULE}
        doubts = {v.subject_id: v for v in verdicts if v.rule == DOUBT}
        wanted = None if ids is None else set(ids)
        out = {(qid, round_): task for (qid, round_), (_project, task) in store.get_second_look_tasks().items()
               if task is not None and _decided_round(decided, qid) != round_ and (wanted is None or qid in wanted)}
        questions = {q.id: q for q in store.get_questions(ids=sorted({qid for qid, _ in out}))}
        hashes = {round_: store.release_hashes(round_) for round_ in {round_ for _qid, round_ in out}}
        return [Look(questions[qid], round_, task, hashes[round_].get(qid, ""),
                     tuple(doubts[qid].details.get("flags", [])) if qid in doubts else ())
                for (qid, round_), task in sorted(out.items())]

    def revisable(self, store: Store, ids: Sequence[str] | None = None) -> list:
        return []

    def reviews(self, store: Store, looks: Sequence[Look]) -> dict[str, list]:
        by_task: dict[int, list] = {}
        for r in store.get_reviews(sorted({look.id for look in looks})):
            by_task.setdefault(r.task_id, []).append(r)
        return {look.id: by_task.get(look.task, []) for look in looks}

    def decide(self, look: Look, reviews) -> lifecycle.Decision:
        return super().decide(look.question, reviews)

    def settle(self, look: Look, decision: lifecycle.Decision) -> lifecycle.Move | None:
        if decision.outcome not in ("accepted", "rejected"):
            return None  # a tie waits for one more review, as in the first round
        answer, dimension = look.question.final_answer, look.question.final_dimension_id
        details = {"round": look.round, "content_hash": look.published_hash, "flags": list(look.flags),
                   "task_id": look.task}
        updates, to_status = None, "published"
        if decision.outcome == "rejected":
            outcome, to_status = "withdrawn", "withdrawn"
            reason = "withdrawn at a second look: " + (", ".join(decision.details["reasons"]) or "no reason given")
            details |= decision.details
        elif (decision.reviewed["review_answer"], decision.reviewed["review_dimension_id"]) == (answer, dimension):
            outcome, reason = "confirmed", f"answer {LETTERS[answer]} confirmed at a second look"
        else:
            outcome, updates = "changed", decision.reviewed
            new_answer, new_dimension = updates["review_answer"], updates["review_dimension_id"]
            reason = change_text(answer, dimension, new_answer, new_dimension, self.registry) + " at a second look"
            details |= {"from_answer": LETTERS[answer], "to_answer": LETTERS[new_answer],
                        "from_dimension": dimension, "to_dimension": new_dimension}
        # the history event says why the models put it in doubt too, for the next release's CHANGELOG
        if look.flags and outcome != "confirmed":
            reason += f" (flagged by the models: {', '.join(look.flags)})"
        return lifecycle.Move(outcome, to_status, reason, outcome != "withdrawn", updates, details | {"outcome": outcome})


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
    from benchsmith.dimensions import registry

    outcomes = Counter(v.details.get("outcome") for v in decisions(store).values())
    return {"second looks waiting for annotators": len(SecondLooks(review, registry()).open(store)),
            **{f"second looks {outcome}": outcomes[outcome] for outcome in ("confirmed", "changed", "withdrawn")}}
