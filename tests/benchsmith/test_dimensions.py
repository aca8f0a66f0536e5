"""The dimension registry is data: SEED-Bench's twelve, and room for more."""

from __future__ import annotations

import pytest

from benchsmith.dimensions import load_registry, registry


def test_the_registry_holds_seed_benchs_twelve_dimensions_with_their_ids():
    names = {d.id: d.name for d in registry() if d.id <= 12}
    assert names == {1: "Scene Understanding", 2: "Instance Identity", 3: "Instance Attributes",
                     4: "Instance Location", 5: "Instances Counting", 6: "Spatial Relation",
                     7: "Instance Interaction", 8: "Visual Reasoning", 9: "Text Understanding",
                     10: "Action Recognition", 11: "Action Prediction", 12: "Procedure Understanding"}
    assert [d.id for d in registry().for_modality("video")] == [10, 11, 12]
    assert all(len(d.definition) > 30 for d in registry())


def test_dimensions_added_after_seed_benchs_follow_them():
    added = {d.id: d.key for d in registry() if d.id > 12}
    assert added == {13: "visual_question_answering", 14: "image_text_matching", 15: "visual_grounding",
                     16: "chart_retrieval", 17: "chart_comparison", 18: "chart_arithmetic", 19: "chart_reading",
                     20: "chart_layout", 21: "map_reading", 22: "map_routes", 23: "map_spatial",
                     24: "web_reading", 25: "web_comparison", 26: "web_layout", 27: "image_differences",
                     28: "image_comparison", 29: "visual_correspondence"}
    assert {d.id for d in registry() if d.id > 12 and d.modality != "image"} == {27, 28, 29}
    assert {d.id for d in registry().for_modality("image_set")} == {27, 28, 29}


def test_dimensions_are_found_by_id_or_key():
    assert registry().get(6).key == "spatial_relation"
    assert registry().get("text_understanding").id == 9
    with pytest.raises(KeyError, match="unknown dimension"):
        registry().get(99)


def test_a_maintainer_adds_a_dimension_by_adding_an_entry(tmp_path):
    from benchsmith.paths import DATA_DIR

    text = (DATA_DIR / "dimensions.yaml").read_text() + (
        "  - id: 99\n    key: floor_plans\n    name: Floor Plans\n    modality: image\n    group: maps\n"
        "    definition: Reading rooms, doors and corridors off a floor plan shown in the image.\n")
    (tmp_path / "dims.yaml").write_text(text)
    extended = load_registry(tmp_path / "dims.yaml")
    assert len(extended) == len(registry()) + 1 and extended.get(99).name == "Floor Plans"
    assert extended.get(99).group == "maps"
