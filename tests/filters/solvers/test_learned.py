"""The learned blind solver: trained on the pool, each question judged by a model that never saw its image."""

from __future__ import annotations

import random

from benchsmith.records import Provenance, Question
from filters import blind
from filters.blind import BlindSettings
from filters.solvers import LearnedConfig, Query, build_solver
from filters.solvers.learned import Labelled, PoolModel, option_features


def leaky_pool(n_images: int, seed: int = 0) -> list[Labelled]:
    """A template prior a text-only model can learn: 'how many wheels' is always 4, whatever is shown."""
    rng = random.Random(seed)
    pool = []
    for i in range(n_images):
        options = ["4", *rng.sample(["1", "2", "3", "5", "6", "7"], 3)]
        rng.shuffle(options)
        pool.append(Labelled("How many wheels does the car have?", tuple(options), options.index("4"), f"img{i}"))
        colours = rng.sample(["red", "blue", "green", "pink", "white", "black"], 4)
        pool.append(Labelled("What colour is the car?", tuple(colours), rng.randrange(4), f"img{i}"))
    return pool


def test_features_do_not_depend_on_the_order_options_are_shown_in():
    options = ("blue star", "white circle", "blue circle", "blue hexagon")
    rotated = options[1:] + options[:1]
    by_option = dict(zip(options, option_features("Which of these can be seen?", options)))
    assert all(by_option[o] == f for o, f in zip(rotated, option_features("Which of these can be seen?", rotated)))


def test_a_template_prior_is_learned_and_a_fair_question_stays_at_chance():
    pool = leaky_pool(150)
    model = PoolModel(LearnedConfig(kind="learned", min_pool=50)).fit(pool)
    right = {"wheels": 0, "colour": 0}
    for q in pool:
        scores = model.scores(q.text, q.options)
        kind = "wheels" if "wheels" in q.text else "colour"
        right[kind] += max(range(4), key=scores.__getitem__) == q.answer
    assert right["wheels"] / 150 > 0.9
    assert right["colour"] / 150 < 0.4


def test_no_question_is_judged_by_a_model_that_trained_on_its_image():
    pool = leaky_pool(100)
    model = PoolModel(LearnedConfig(kind="learned", min_pool=50, folds=5)).fit(pool)
    assert len(set(model.fold_of_group.values())) == 5
    for q in pool:  # each image's fold model was fitted without that fold
        assert model.fold_of_group[q.group] in model.models
    # a question from an image the pool never had gets no model at all: every option ties
    assert model.scores("How many wheels does the car have?", ("1", "2", "3", "4"), group="unseen") == [0.0] * 4


def test_the_blind_filter_drops_template_priors_with_the_learned_solver(store):
    questions = [Question(item_id=q.group, dimension_id=5 if "wheels" in q.text else 3, text=q.text,
                          options=list(q.options), answer=q.answer, provenance=Provenance(backend="test"))
                 for q in leaky_pool(120)]
    store.add_questions(questions, stage="generate")
    config = BlindSettings(solvers=[LearnedConfig(kind="learned", min_pool=50)])
    run = blind.apply(store, config, blind.solvers_from(config))
    assert run.done == 240
    dropped = store.get_questions(status="dropped")
    wheels = [q for q in dropped if "wheels" in q.text]
    assert len(wheels) >= 100 and len(dropped) - len(wheels) <= 12


def test_too_small_a_pool_trains_nothing_and_knows_nothing():
    solver = build_solver(LearnedConfig(kind="learned"))
    solver.fit(leaky_pool(10))
    [prediction] = solver.answer([Query("How many wheels does the car have?", ("1", "2", "3", "4"))])
    assert prediction.scores == (0.0, 0.0, 0.0, 0.0)


def test_each_fold_model_scores_as_one_fitted_on_every_hash_bucket():
    """Fitting on the buckets a fold's rows use is a shortcut, not another model: a logistic regression
    fitted on all 2**hash_bits buckets gives the same probabilities."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    pool = leaky_pool(60)
    config = LearnedConfig(kind="learned", min_pool=50, hash_bits=12)
    model = PoolModel(config).fit(pool)
    fold = model.fold_of_group[pool[0].group]
    train = [q for q in pool if model.fold_of_group[q.group] != fold]
    rows = [row for q in train for row in option_features(q.text, q.options)]
    labels = [int(i == q.answer) for q in train for i in range(len(q.options))]
    wide = LogisticRegression(C=config.regularisation, max_iter=500).fit(model._vectorise(rows), labels)
    assert wide.coef_.shape[1] == 2 ** 12 > len(model.models[fold][1])
    judged = [q for q in pool if model.fold_of_group[q.group] == fold]
    expected = wide.predict_proba(model._vectorise(
        [row for q in judged for row in option_features(q.text, q.options)]))[:, 1]
    got = [p for q in judged for p in model.scores(q.text, q.options, group=q.group)]
    assert np.allclose(got, expected, rtol=0, atol=1e-9)
