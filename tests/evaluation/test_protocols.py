import math

import pytest

from benchsmith.plugins import UnknownPart
from benchsmith.settings import SettingsError, load_settings
from evaluation.board import entropy, question_score
from evaluation.contract import protocol
from evaluation.protocols import Instability, InstabilitySettings
from evaluation.stage import passes
from evaluation.settings import EvalSettings
from evaluation.records import EvalQuestion, Pass

Q = EvalQuestion("q1", "What colour is the sign?", ("red", "blue", "green", "white"), 2, "instance_attributes",
                 content_hash="c0ffee")


def test_single_shows_the_published_order_once():
    [only] = passes([Q], protocol("single"))
    assert only.options == Q.options and only.key_shown == 2 and only.template == 0


def test_circular_shows_every_rotation_with_the_key_in_every_place():
    rotations = passes([Q], protocol("circular"))
    assert [p.key for p in rotations] == ["rot0", "rot1", "rot2", "rot3"]
    assert sorted(p.key_shown for p in rotations) == [0, 1, 2, 3]
    assert all(p.options[p.key_shown] == "green" for p in rotations)
    assert rotations[1].options == ("blue", "green", "white", "red")


def test_instability_crosses_templates_with_seeded_shuffles():
    shown = Instability(InstabilitySettings(templates=3, shuffles=2, seed=5))
    made = passes([Q], shown)
    assert [(p.template, p.key) for p in made] == [(t, f"t{t}s{s}") for t in range(3) for s in range(2)]
    assert all(sorted(p.order) == [0, 1, 2, 3] for p in made)
    assert [p.order for p in made] == [p.order for p in passes([Q], shown)]
    assert len({p.order for p in made}) > 1
    assert [p.order for p in made] != [p.order for p in passes([Q], Instability(
        InstabilitySettings(seed=6, templates=3)))]


def test_a_pass_maps_shown_positions_back_to_the_original_options():
    shown = Pass(Q, "rot1", (1, 2, 3, 0))
    assert shown.original(0) == 1 and shown.original(3) == 0 and shown.original(None) is None
    assert shown.options_block() == "A. blue\nB. green\nC. white\nD. red"


def test_circular_needs_every_rotation_right():
    circular = protocol("circular")
    assert question_score(circular, [True, True, True, True]) == 1.0
    assert question_score(circular, [True, True, False, True]) == 0.0
    assert question_score(protocol("single"), [True]) == 1.0
    assert question_score(protocol("instability"), [True, False, True, True, False, True]) == 4 / 6
    assert question_score(circular, []) is None


def test_instability_entropy_by_hand():
    assert entropy([2, 2, 2, 2, 2, 2]) == 0.0
    assert math.isclose(entropy([0, 1, 2, 3]), math.log(4))
    # 3 x option 2, 2 x option 0, 1 format miss: -(1/2 ln 1/2 + 1/3 ln 1/3 + 1/6 ln 1/6)
    expected = -(0.5 * math.log(0.5) + (1 / 3) * math.log(1 / 3) + (1 / 6) * math.log(1 / 6))
    assert math.isclose(entropy([2, 2, 2, 0, 0, None]), expected)


def test_a_protocol_reads_its_own_settings_under_its_name_in_the_evaluate_section(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("evaluate:\n  protocol: instability\n  instability: {templates: 2, shuffles: 3}\n")
    options = load_settings(path, env={}).section("evaluate", EvalSettings)
    shown = protocol(options.protocol, options.part(options.protocol).model_dump())
    assert [p.key for p in passes([Q], shown)] == [
        f"t{t}s{s}" for t in range(2) for s in range(3)]


@pytest.mark.parametrize("text, message", [
    ("evaluate:\n  protocol: circulr\n", r"evaluate\.protocol: circulr: not an installed protocol \(installed: "
                                          r"circular, conveval, instability, single\)"),
    ("evaluate:\n  instability: {templats: 2}\n", r"evaluate\.instability\.templats: Extra inputs"),
    ("evaluate:\n  circular: {rotations: 2}\n", r"evaluate\.circular\.rotations: Extra inputs"),
    ("evaluate:\n  windw: 8\n", r"evaluate\.windw: 'windw' is neither a setting here \(protocol, .*\) nor one of "
                                 r"the installed protocols \(circular, conveval, instability, single\)"),
    ("evaluate:\n  conveval: {judge_modl: j}\n", r"evaluate\.conveval\.judge_modl: Extra inputs"),
    ("evaluate:\n  conversations: {judge_model: j}\n", r"evaluate: .*the key `conversations` is now `conveval`"),
])
def test_a_typo_in_a_protocol_or_its_settings_is_refused_when_settings_load(tmp_path, text, message):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=message):
        load_settings(path, env={})


def test_an_unknown_protocol_asked_for_by_name_lists_the_installed_ones():
    with pytest.raises(UnknownPart, match=r"'circulr' is not one of the installed protocols \(circular, conveval, "):
        protocol("circulr")
