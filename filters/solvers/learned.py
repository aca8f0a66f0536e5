"""A text-only model trained on the question pool itself: the strongest blind adversary we can run offline.

Each option of a question becomes one row of features that a model without the image could use: its
words, its words crossed with the question's words (so a template's favourite answer is learnable), its
length and numeric rank among the four, its overlap with the question, and how much it shares with the
other three options (the "centroid" artefact). A logistic regression learns which row is the key. No
feature depends on where an option is shown, so the scores do not change when the options rotate.

Cross-fitting: the pool is split into folds by image, and each question is scored by the model trained
on the other folds, so no image's questions ever judge themselves. The same code is the `learned` solver
of the blind filter (`LearnedSolver`) and the adversary of `benchmarks/blind_adversary.py`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from benchsmith.similarity import matching_ratio
from filters.solvers.base import BaseSolver, Prediction, Query

if TYPE_CHECKING:  # annotations only: the settings model builds this solver
    from filters.solvers import LearnedConfig

_WORD = re.compile(r"[a-z0-9]+")
CHUNK = 10_000  # questions hashed at a time while fitting


@dataclass(frozen=True)
class Labelled:
    """A question as the learner sees it: only text, options, which option is the key, and its image."""

    text: str
    options: tuple[str, ...]
    answer: int
    group: str


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


@lru_cache(maxsize=1 << 16)
def _likeness(a: str, b: str) -> float:
    """How alike two options are, character by character. Kept: the filter asks about each question in
    every rotation of its options after fitting on them, the same pairs every time (most of its features' cost)."""
    return matching_ratio(a, b)


def option_features(text: str, options: Sequence[str]) -> list[dict[str, float]]:
    """One feature dict per option, from the question and the options alone, independent of order."""
    question_words = _words(text)
    template = " ".join(w for w in question_words if not w.isdigit())[:80]
    words = [_words(o) for o in options]
    lengths = [len(o) for o in options]
    numbers = [_number(o) for o in options]
    numeric = all(n is not None for n in numbers)
    rows = []
    for i, option in enumerate(options):
        own = set(words[i])
        others = [set(w) for j, w in enumerate(words) if j != i]
        row: dict[str, float] = {"bias": 1.0}
        for word in own:
            row[f"w={word}"] = 1.0
            row[f"t={template}|w={word}"] = 1.0
        row[f"t={template}|o={option.lower()[:40]}"] = 1.0
        row["length_rank"] = sorted(lengths).index(lengths[i]) / 3
        row["longest"] = float(lengths[i] == max(lengths))
        row["shortest"] = float(lengths[i] == min(lengths))
        row["question_overlap"] = len(own & set(question_words)) / max(1, len(own))
        row["shared_words"] = sum(len(own & o) for o in others) / max(1, len(own))
        row["char_agreement"] = sum(_likeness(option.lower(), options[j].lower())
                                    for j in range(len(options)) if j != i) / 3
        if numeric:
            rank = sorted(numbers).index(numbers[i])
            row[f"t={template}|numeric_rank={rank}"] = 1.0
            row["numeric_rank"] = rank / 3
            row[f"t={template}|value={min(numbers[i], 20):g}"] = 1.0
        rows.append(row)
    return rows


class PoolModel:
    """Logistic regressions fitted on folds of a labelled pool; `scores` uses the one that never saw
    the question's image."""

    def __init__(self, config: LearnedConfig) -> None:
        self.config = config
        self.models: dict[int, tuple[object, np.ndarray]] = {}  # fold -> (its model, the columns it was fitted on)
        self.fold_of_group: dict[str, int] = {}
        self.group_of: dict[tuple[str, tuple[str, ...]], str] = {}

    def _vectorise(self, rows: list[dict[str, float]]):
        from sklearn.feature_extraction import FeatureHasher
        return FeatureHasher(n_features=2 ** self.config.hash_bits, alternate_sign=False).transform(rows)

    def fit(self, pool: Sequence[Labelled]) -> PoolModel:
        self.models.clear()
        if len(pool) < self.config.min_pool:
            return self
        groups = sorted({q.group for q in pool})
        order = np.random.default_rng(0).permutation(len(groups))
        self.fold_of_group = {groups[i]: rank % self.config.folds for rank, i in enumerate(order)}
        self.group_of = {(q.text, tuple(sorted(q.options))): q.group for q in pool}
        from scipy.sparse import vstack

        labels, folds, blocks = [], [], []
        for start in range(0, len(pool), CHUNK):  # hashed a chunk at a time: 100,000 questions' dicts never coexist
            rows = []
            for q in pool[start:start + CHUNK]:
                for i, row in enumerate(option_features(q.text, q.options)):
                    rows.append(row)
                    labels.append(int(i == q.answer))
                    folds.append(self.fold_of_group[q.group])
            blocks.append(self._vectorise(rows))
        features, labels, folds = vstack(blocks).tocsr(), np.array(labels, dtype=np.int8), np.array(folds)
        from threadpoolctl import threadpool_limits

        # L-BFGS works on vectors of a few thousand weights: BLAS threads would only wait on one another
        # (ten times the time of one thread on a busy 2-core machine, for the same sums)
        with threadpool_limits(1, user_api="blas"):
            self._fit_folds(features, labels, folds)
        return self

    def _fit_folds(self, features, labels: np.ndarray, folds: np.ndarray) -> None:
        from sklearn.linear_model import LogisticRegression

        for fold in range(self.config.folds):
            train = folds != fold
            if labels[train].min() == labels[train].max():
                continue
            # Fitted on the buckets its rows use only: an unused bucket's weight has zero gradient from the
            # start and stays 0 under the L2 penalty, so the model is the same, but L-BFGS no longer walks
            # 2**hash_bits weights each step (most of the blind filter's time with the full width).
            rows = features[train]
            columns = np.unique(rows.indices)
            model = LogisticRegression(C=self.config.regularisation, max_iter=500)
            self.models[fold] = (model.fit(rows[:, columns], labels[train]), columns)

    def scores(self, text: str, options: Sequence[str], group: str | None = None) -> list[float]:
        """The key probability of each option from the model that did not train on this question's image;
        equal scores when there is no such model (an unknown question, or too small a pool)."""
        return self.scores_many([(text, tuple(options), group)])[0]

    def scores_many(self, questions: Sequence[tuple[str, tuple[str, ...], str | None]]) -> list[list[float]]:
        """`scores` for many questions at once: one hashing pass and one prediction per fold model."""
        out: list[list[float]] = [[0.0] * len(options) for _text, options, _group in questions]
        by_fold: dict[int, list[int]] = {}
        for index, (text, options, group) in enumerate(questions):
            group = group or self.group_of.get((text, tuple(sorted(options))))
            fold = self.fold_of_group.get(group, -1) if group is not None else -1
            if fold in self.models:
                by_fold.setdefault(fold, []).append(index)
        for fold, indices in by_fold.items():
            rows = [row for i in indices for row in option_features(questions[i][0], questions[i][1])]
            model, columns = self.models[fold]
            probabilities = model.predict_proba(self._vectorise(rows)[:, columns])[:, 1]
            at = 0
            for i in indices:
                n = len(questions[i][1])
                out[i] = [float(p) for p in probabilities[at:at + n]]
                at += n
        return out


class LearnedSolver(BaseSolver):
    """The blind filter's `learned` solver: `fit` on the pool first (every question past the quality gate), then `answer`."""

    def __init__(self, config: LearnedConfig) -> None:
        super().__init__(config)
        self.model = PoolModel(config)

    def fit(self, pool: Sequence[Labelled]) -> None:
        self.model.fit(pool)

    def answer(self, queries: Sequence[Query]) -> list[Prediction | None]:
        return list(map(self.predict, self.model.scores_many([(q.text, q.options, None) for q in queries])))
