"""The quality gate every generated question passes before it is stored as a candidate.

Rules, each a small function returning a reason when the question fails it:

- `unbalanced_key`: the generator itself chose not to ask it (`meta["dropped"]` says why: a programmatic
  key already asked about more often than the others of its template would be a prior a blind model learns;
  a generator may name another rule in `meta["drop_rule"]`, e.g. `text_not_read`);
- `ambiguous_draft`: an item's drafts that ask the same text and contradict each other (each offers the
  other's key as a wrong option) are all dropped: a model that wrote one question twice with two keys is
  trusted with neither;
- `options`: exactly four distinct, non-empty options and an answer that indexes one of them;
- `catch_all_option`: no "all of the above" / "none of the above" style option;
- `answer_in_question`: the question does not give its answer away by containing it;
- `distractors_from_key`: the wrong options were not made out of the correct one, which a model that
  cannot see the image spots: every distractor the key with one word changed, where every change is a
  misspelling of the key's word or the changed words sit in different places ("blue star", "white circle"
  around "blue circle"), or the key the option most like the other three by a clear margin
  (`centroid_margin`). Options that name four values of one slot ("left side" / "top side", "Route 59" /
  "Route 12") are honest alternatives, not edits;
- `mentions_source`: the question and options speak of the image, never of the captions, boxes or OCR
  the generator was given;
- `near_duplicate`: the same item has no question already that asks the same thing with the same answer;
- `per_item_cap`: an item gets at most `max_per_item` questions.

Conversations (multi-turn items) pass `conversation_gate`, with rules of their own:

- `turns`: three turns, perception then reasoning then creation;
- `empty_field`: every turn has an instruction, a reference answer and at least one focus point;
- `leaked_reference`: no instruction gives away the reference answer of an earlier turn (a run of
  `leak_ngram` words copied from it, or most of its content words), since a later turn must need what
  the model itself answered before;
- `mentions_source`: instructions speak of the image, never of the captions or OCR behind them.

A question that fails is kept as a dropped question with a verdict naming the rule and the reason;
nothing is deleted. `balance_answers` then places the correct options so the letters A-D come out
uniform, seeded by the questions themselves so any run, batching or shard places them the same way.
"""

from __future__ import annotations

import itertools
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache

from pydantic import Field

from benchsmith.records import GATE_STAGE, LEVELS, Conversation, Question, Verdict, normalise_text, stable_hash
from benchsmith.settings import Strict
from benchsmith.similarity import jaccard, levenshtein, matching_ratio, word_set

STAGE = GATE_STAGE
# the words the option priors leave out: this gate's centroid rule and, by default, the blind filter's priors
PRIOR_IGNORE_WORDS = tuple(("a an the of in on at to is are and or it its this that there what which who where how "
                            "image picture photo shown").split())


class QualitySettings(Strict):
    max_per_item: int = Field(40, ge=1)                   # questions kept per item, all dimensions together
    near_duplicate_overlap: float = Field(0.9, gt=0, le=1)  # shared content words that make two questions one
    function_words: list[str] = Field(default_factory=lambda: (
        "a an the is are was were be of in on at to for with by from this that these those there it its "
        "which what who whom whose do does did can could shown seen visible image picture photo").split())
    centroid_margin: float = Field(0.15, gt=0)  # the key this much more like the others than any option: dropped
    catch_all_pattern: str = r"\b(all|none|both|neither)\s+of\s+(the\s+)?(above|these|them|options)\b"
    source_pattern: str = (r"\b(captions?|bounding box(es)?|ocr|the (given |provided )?description|"
                           r"image facts|according to the (text|data))\b")
    leak_ngram: int = Field(6, ge=2)                      # words copied in a row from an earlier reference
    leak_overlap: float = Field(0.7, gt=0, le=1)          # share of an earlier reference's content words


def options_rule(question: Question) -> str:
    cleaned = [normalise_text(o) for o in question.options]
    if len(cleaned) != 4:
        return f"needs 4 options, has {len(cleaned)}"
    if any(not o for o in cleaned):
        return "an option is empty"
    if len(set(cleaned)) != 4:
        return "two options are the same"
    if not 0 <= question.answer < 4:
        return f"answer index {question.answer} is not 0-3"
    return ""


def catch_all_rule(question: Question, pattern: str) -> str:
    for option in question.options:
        if re.search(pattern, normalise_text(option)):
            return f"option {option!r} refers to the other options"
    return ""


def mentions_source_rule(texts: Sequence[str], pattern: str) -> str:
    for text in texts:
        if found := re.search(pattern, normalise_text(text)):
            return f"speaks of {found.group(0)!r} instead of the image"
    return ""


def answer_in_question_rule(question: Question) -> str:
    answer, text = normalise_text(question.options[question.answer]), normalise_text(question.text)
    # the substring test first: a pattern per answer is compiled only when it can match
    if answer and answer in text and re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text):
        return f"the question contains its answer {question.options[question.answer]!r}"
    return ""


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", normalise_text(text))


def misspelt(a: str, b: str) -> bool:
    """`b` is `a` spelt wrongly: two words of letters, four or more, at most two characters apart.
    Numbers never are (3 and 4 are different counts, Route 12 and Route 59 different routes)."""
    return a.isalpha() and b.isalpha() and min(len(a), len(b)) >= 4 and levenshtein(a, b) <= 2


def edit_of(key: str, option: str, ignore: frozenset[str] = frozenset()) -> tuple[str, int] | None:
    """How `option` was made from `key` when it differs from it in one word alone (words in `ignore`
    left out): ("misspelt", position) when that word is a misspelling of the key's, ("swapped", position)
    when it is another word; None when it differs in more than that."""
    words_key, words_option = ([w for w in _words(text) if w not in ignore] for text in (key, option))
    if len(words_key) != len(words_option):
        return None
    differ = [i for i, (x, y) in enumerate(zip(words_key, words_option)) if x != y]
    if len(differ) != 1:
        return None
    at = differ[0]
    return ("misspelt" if misspelt(words_key[at], words_option[at]) else "swapped", at)


def words(text: str, ignore: frozenset[str]) -> frozenset[str]:
    return word_set(text) - ignore


def centroid(options: Sequence[str], ignore: frozenset[str]) -> list[float]:
    """Shared words plus character agreement with the other options: when every distractor is the key
    with one thing changed ("blue star / blue circle / white circle"), the key is the most like the rest.
    The blind filter's `centroid` prior solver scores options with it too."""
    sets = [words(o, ignore) for o in options]
    texts = [o.casefold().strip() for o in options]
    n = len(texts)
    shared = [[0.0] * n for _ in range(n)]  # word overlap is symmetric: each pair once
    for i, j in itertools.combinations(range(n), 2):
        shared[i][j] = shared[j][i] = jaccard(sets[i], sets[j])
    return [sum(shared[i][j] + _char_agreement(texts[i], texts[j]) for j in range(n) if j != i) / (n - 1)
            for i in range(n)]


@lru_cache(maxsize=1 << 15)
def _char_agreement(a: str, b: str) -> float:
    # the gate scores every generated question: options drawn from one pool meet again and again
    return matching_ratio(a, b)


def distractors_from_key_rule(question: Question, centroid_margin: float) -> str:
    ignore = frozenset(PRIOR_IGNORE_WORDS)
    key = question.options[question.answer]
    others = [o for i, o in enumerate(question.options) if i != question.answer]
    edits = [edit_of(key, o, ignore) for o in others]
    # four values of one slot ("left side" / "top side", "Route 59" / "Route 12") are honest alternatives;
    # the key is given away when every distractor misspells it, or they change different parts of it
    if all(edits) and (all(how == "misspelt" for how, _at in edits) or len({at for _how, at in edits}) > 1):
        return f"every wrong option is a small edit of the answer {key!r}: {', '.join(map(repr, others))}"
    scores = centroid(question.options, ignore)
    margin = scores[question.answer] - max(s for i, s in enumerate(scores) if i != question.answer)
    if margin >= centroid_margin:
        return f"the answer {key!r} is the option most like the other three (by {margin:.2f})"
    return ""


def content_words(text: str, function_words: set[str]) -> set[str]:
    return set(_words(text)) - function_words


def same_question(a: Question, b: Question, settings: QualitySettings) -> bool:
    """The same correct answer, at least three shared options, and (nearly) the same content words:
    'What colour is the car?' and 'What is the colour of the car?' are one question; 'the large
    circle' and 'the small circle' are two."""
    if normalise_text(a.options[a.answer]) != normalise_text(b.options[b.answer]):
        return False
    shared = {normalise_text(o) for o in a.options} & {normalise_text(o) for o in b.options}
    if len(shared) < 3:
        return False
    function_words = set(settings.function_words)
    words_a, words_b = content_words(a.text, function_words), content_words(b.text, function_words)
    return not (words_a or words_b) or jaccard(words_a, words_b) >= settings.near_duplicate_overlap


def ambiguous_drafts(questions: Sequence[Question]) -> dict[str, str]:
    """Question id -> why, for the drafts of one item that ask the same text and contradict each other: each
    offers the other's key as a wrong option (a model writing one question twice in a reply, with two
    keys). Neither can be trusted, so both go. Drafts of one text over other options ("Which of these can
    be seen?", "Which of these lies farthest up?" over other places) are other questions."""
    by_text: dict[tuple[str, str], list[tuple[str, str, set[str]]]] = defaultdict(list)
    for q in questions:
        options = {normalise_text(o) for o in q.options}
        by_text[(q.item_id, normalise_text(q.text))].append((q.id, normalise_text(q.options[q.answer]), options))
    out = {}
    for (_item, text), drafts in by_text.items():
        for (id_a, key_a, options_a), (id_b, key_b, options_b) in itertools.combinations(drafts, 2):
            if key_a != key_b and key_a in options_b and key_b in options_a:
                reason = f"asked twice with different answers ({', '.join(map(repr, sorted((key_a, key_b))))}): {text!r}"
                out[id_a] = out[id_b] = reason
    return out


def gate(questions: Sequence[Question], existing: dict[str, list[Question]],
         settings: QualitySettings) -> tuple[list[Question], list[tuple[Question, Verdict]]]:
    """Split new questions into kept ones and dropped ones with their verdicts.

    `existing` maps an item id to the questions it already has that still count (not dropped);
    questions kept earlier in this same call count too. Drafts of one item that ask the same text with
    contradicting answers are all dropped (`ambiguous_draft`); a draft given twice (one id) is gated once.
    The per-item rules keep the first of competing siblings, so a caller hands an item's questions over in
    one stable order (a generator: an image's jobs together, in job order), never in their order of arrival.
    """
    kept: list[Question] = []
    dropped: list[tuple[Question, Verdict]] = []
    seen = {item: list(qs) for item, qs in existing.items()}
    ambiguous = ambiguous_drafts(questions)
    firsts: dict[str, Question] = {}
    for question in questions:  # a draft written twice is one draft (one id, one row)
        firsts.setdefault(question.id, question)
    questions = list(firsts.values())
    for question in questions:
        if question.id in ambiguous:
            dropped.append(_dropped(question, "question", "ambiguous_draft", ambiguous[question.id]))
            continue
        siblings = seen.setdefault(question.item_id, [])
        checks = ((question.meta.get("drop_rule", "unbalanced_key"), lambda q: q.meta.get("dropped", "")),
                  ("options", options_rule),
                  ("catch_all_option", lambda q: catch_all_rule(q, settings.catch_all_pattern)),
                  ("answer_in_question", answer_in_question_rule),
                  ("distractors_from_key", lambda q: distractors_from_key_rule(q, settings.centroid_margin)),
                  ("mentions_source", lambda q: mentions_source_rule([q.text, *q.options], settings.source_pattern)))
        rule, reason = next(((name, why) for name, check in checks if (why := check(question))), ("", ""))
        if not rule:
            # the twin named is the one with the least id, so the reason is the same whatever the siblings' order
            twin = min((s for s in siblings if same_question(s, question, settings)),
                       key=lambda s: s.id, default=None)
            if twin is not None:
                rule, reason = "near_duplicate", f"asks the same as question {twin.id}: {twin.text!r}"
            elif len(siblings) >= settings.max_per_item:
                rule, reason = "per_item_cap", f"the item already has {len(siblings)} questions"
        if rule:
            dropped.append(_dropped(question, "question", rule, reason))
        else:
            kept.append(question)
            siblings.append(question)
    return kept, dropped


def balance_answers(questions: Sequence[Question], seed: int = 0) -> list[Question]:
    """Reorder each question's options so the letters of the keys come out uniform. The questions made
    together (one item and dimension: a generator's job) are dealt letters from a shuffled block of four,
    so they differ from each other; the block is seeded by `seed` and the group's ids alone. A question
    thus gets the same letter whatever else is balanced with it, so batch sizes, resumed runs and shards
    of a distributed run place every key alike; across groups each letter is equally likely. The
    distractors' order is shuffled too."""
    groups: dict[tuple[str, int], list[Question]] = defaultdict(list)
    for question in questions:
        groups[(question.item_id, question.dimension_id)].append(question)
    placed: dict[str, Question] = {}
    for group in groups.values():
        ordered = sorted(group, key=lambda q: q.id)
        rng = random.Random(stable_hash(seed, [q.id for q in ordered]))
        letters: list[int] = []
        for question in ordered:
            if not letters:
                letters = rng.sample(range(4), 4)
            target = letters.pop()
            options = [o for i, o in enumerate(question.options) if i != question.answer]
            rng.shuffle(options)
            options.insert(target, question.options[question.answer])
            placed[question.id] = question.model_copy(update={"options": options, "answer": target})
    return [placed[q.id] for q in questions]


def leak_reason(instruction: str, reference: str, settings: QualitySettings) -> str:
    """Why `instruction` gives `reference` away, or ''. A short reference leaks when it appears whole;
    a longer one when `leak_ngram` of its words appear in a row, or when the instruction holds at least
    `leak_overlap` of its content words (and at least three of them)."""
    said, answer = _words(instruction), _words(reference)
    if not answer:
        return ""
    n = min(settings.leak_ngram, len(answer))
    grams = {tuple(said[i:i + n]) for i in range(len(said) - n + 1)}
    for i in range(len(answer) - n + 1):
        if tuple(answer[i:i + n]) in grams:
            return f"repeats {' '.join(answer[i:i + n])!r}"
    key = set(answer) - set(settings.function_words)
    shared = key & set(said)
    if len(key) >= 3 and len(shared) / len(key) >= settings.leak_overlap:
        return f"holds {len(shared)} of its {len(key)} content words"
    return ""


def conversation_rule(conversation: Conversation, settings: QualitySettings) -> tuple[str, str]:
    """(rule, reason) of the first rule `conversation` fails, or ('', '')."""
    turns = conversation.final_turns
    levels = tuple(t.level for t in turns)
    if levels != LEVELS:
        return "turns", f"needs turns {', '.join(LEVELS)} in that order, has {', '.join(levels) or 'none'}"
    for number, turn in enumerate(turns, 1):
        if not turn.instruction.strip():
            return "empty_field", f"turn {number} has no instruction"
        if not turn.reference.strip():
            return "empty_field", f"turn {number} has no reference answer"
        if not any(p.strip() for p in turn.focus_points):
            return "empty_field", f"turn {number} has no focus points"
    for later, turn in enumerate(turns[1:], 2):
        for earlier, before in enumerate(turns[:later - 1], 1):
            if reason := leak_reason(turn.instruction, before.reference, settings):
                return "leaked_reference", f"turn {later}'s instruction gives away turn {earlier}'s answer: {reason}"
    for number, turn in enumerate(turns, 1):
        if reason := mentions_source_rule([turn.instruction], settings.source_pattern):
            return "mentions_source", f"turn {number} {reason}"
    return "", ""


def conversation_gate(conversations: Sequence[Conversation], settings: QualitySettings
                      ) -> tuple[list[Conversation], list[tuple[Conversation, Verdict]]]:
    """Split conversations into kept ones and dropped ones with the verdict that explains each drop."""
    kept: list[Conversation] = []
    dropped: list[tuple[Conversation, Verdict]] = []
    for conversation in conversations:
        rule, reason = conversation_rule(conversation, settings)
        if rule:
            dropped.append(_dropped(conversation, "conversation", rule, reason))
        else:
            kept.append(conversation)
    return kept, dropped


def _dropped(record: Question | Conversation, kind: str, rule: str, reason: str) -> tuple:
    """`record` as dropped, with the verdict naming the rule it failed and why."""
    drop = record.model_copy(update={"status": "dropped"})
    return drop, Verdict(subject_id=drop.id, subject_kind=kind, stage=STAGE, rule=rule, passed=False, reason=reason)
