import pytest

from benchsmith.geometry import OutsideImage, iou, unit_box


def test_every_supplied_form_reads_as_the_same_unit_box():
    same = (0.25, 0.5, 0.75, 1.0)
    assert unit_box(200, 100, box=same) == same
    assert unit_box(200, 100, box_px=(50, 50, 150, 100)) == same
    assert unit_box(200, 100, bbox=(50, 50, 100, 50)) == same
    assert unit_box(200, 100) is None


def test_pixel_boxes_are_clipped_to_the_image_and_unit_boxes_must_already_lie_in_it():
    assert unit_box(200, 100, box_px=(-20, 50, 260, 120)) == (0.0, 0.5, 1.0, 1.0)
    with pytest.raises(ValueError, match="not normalised"):
        unit_box(200, 100, box=(0.1, 0.1, 1.5, 0.5))


def test_a_box_with_nothing_inside_the_image_or_swapped_corners_is_an_error():
    with pytest.raises(OutsideImage, match="no area inside the 200x100 image"):
        unit_box(200, 100, box_px=(210, 10, 260, 50))
    with pytest.raises(ValueError, match="x2<x1"):
        unit_box(200, 100, box_px=(150, 10, 50, 50))


def test_iou_of_disjoint_nested_and_equal_boxes():
    assert iou((0, 0, 1, 1), (2, 2, 3, 3)) == 0.0
    assert iou((0, 0, 4, 4), (0, 0, 2, 2)) == 0.25
    assert iou((0.1, 0.1, 0.5, 0.5), (0.1, 0.1, 0.5, 0.5)) == 1.0


def test_a_detectors_box_is_put_in_order_and_kept_even_when_empty():
    assert unit_box(200, 100, box_px=(150, 50, 50, 10), model_output=True, ndigits=2) == (0.25, 0.1, 0.75, 0.5)
    assert unit_box(200, 100, box_px=(210, 10, 260, 50), model_output=True) == (1.0, 0.1, 1.0, 0.5)
    assert unit_box(300, 300, box_px=(0, 0, 100, 200), ndigits=3) == (0.0, 0.0, 0.333, 0.667)
