"""The local profile's offline solvers on the oracle: they catch deliberate leaks and spare fair questions.

The sets come from benchmarks/blind_leaks.py (run it for the full-size figures); here a small run
guards the issue's targets.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).parents[2] / "benchmarks" / "blind_leaks.py"


def test_offline_solvers_drop_leaks_spare_programmatic_questions_and_keep_them_at_chance():
    spec = importlib.util.spec_from_file_location("blind_leaks", BENCHMARK)
    blind_leaks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blind_leaks)

    result = blind_leaks.run(scenes=20, seed=11)
    assert result["blind_answerable"]["drop_rate"] >= 0.8
    assert min(result["blind_answerable"]["drop_rate_by_kind"].values()) >= 0.6
    # misspelt distractors: the real-word solver knows most of them (a misspelling can be a real word too)
    # and catches some that no other solver does
    assert result["blind_answerable"]["known_by_solver_by_kind"]["misspelt_distractors"]["real_word"] >= 0.75
    assert result["blind_answerable"]["caught_only_by_by_kind"]["misspelt_distractors"]["real_word"] > 0
    # with balanced keys little is left for the learned solver to find: every dimension keeps most
    assert result["programmatic"]["drop_rate"] <= 0.12
    assert max(result["programmatic"]["drop_rate_by_dimension"].values()) <= 0.3
    assert max(result["programmatic"]["accuracy_after"].values()) <= 0.28
    assert result["programmatic"]["n"] > 100
