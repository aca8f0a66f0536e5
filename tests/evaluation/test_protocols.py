import math

from evaluation.protocols import ProtocolSettings, entropy, passes, question_score
from evaluation.records import EvalQuestion, Pass

Q = EvalQuestion("q1", "What colour is the sign?", ("red", "blue", "green", "white"), 2, "instance_attributes",
                 content_hash="c0ffee")


def test_single_shows_the_published_order_once():
    [only] = passes([Q], "single", ProtocolSettings())
    assert only.options == Q.options and only.key_shown == 2 and only.template == 0


def test_circular_shows_every_rotation_with_the_key_in_every_place():
    rotations = passes([Q], "circular", ProtocolSettings())
    assert [p.key for p in rotations] == ["rot0", "rot1", "rot2", "rot3"]
    assert sorted(p.key_shown for p in rotations) == [0, 1, 2, 3]
    assert all(p.options[p.key_shown] == "green" for p in rotations)
    assert rotations[1].options == ("blue", "green", "white", "red")


def test_instability_crosses_templates_with_seeded_shuffles():
    settings = ProtocolSettings(templates=3, shuffles=2, seed=5)
    made = passes([Q], "instability", settings)
    assert [(p.template, p.key) for p in made] == [(t, f"t{t}s{s}") for t in range(3) for s in range(2)]
    assert all(sorted(p.order) == [0, 1, 2, 3] for p in made)
    assert [p.order for p in made] == [p.order for p in passes([Q], "instability", settings)]
    assert len({p.order for p in made}) > 1
    assert [p.order for p in made] != [p.order for p in passes([Q], "instability", ProtocolSettings(seed=6,
                                                                                                    templates=3))]


def test_a_pass_maps_shown_positions_back_to_the_original_options():
    shown = Pass(Q, "rot1", (1, 2, 3, 0))
    assert shown.original(0) == 1 and shown.original(3) == 0 and shown.original(None) is None
    assert shown.options_block() == "A. blue\nB. green\nC. white\nD. red"


def test_circular_needs_every_rotation_right():
    assert question_score("circular", [True, True, True, True]) == 1.0
    assert question_score("circular", [True, True, False, True]) == 0.0
    assert question_score("single", [True]) == 1.0
    assert question_score("instability", [True, False, True, True, False, True]) == 4 / 6
    assert question_score("circular", []) is None


def test_instability_entropy_by_hand():
    assert entropy([2, 2, 2, 2, 2, 2]) == 0.0
    assert math.isclose(entropy([0, 1, 2, 3]), math.log(4))
    # 3 x option 2, 2 x option 0, 1 format miss: -(1/2 ln 1/2 + 1/3 ln 1/3 + 1/6 ln 1/6)
    expected = -(0.5 * math.log(0.5) + (1 / 3) * math.log(1 / 3) + (1 / 6) * math.log(1 / 6))
    assert math.isclose(entropy([2, 2, 2, 0, 0, None]), expected)
