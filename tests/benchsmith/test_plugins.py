"""The one registry of pluggable parts: our own parts are found by name, and another installed package adds
a part of its own (here a blind solver) without any change to benchsmith."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from benchsmith import plugins


def test_each_kind_lists_our_own_parts():
    assert {"extract", "generate", "filter", "review", "publish", "evaluate"} <= set(plugins.names("sections"))
    assert {"supplied", "rapidocr", "sam"} <= set(plugins.names("extractors"))
    assert {"longest", "centroid", "learned", "openai"} <= set(plugins.names("solvers"))
    assert {"likelihood", "generate", "openai", "blind"} <= set(plugins.names("adapters"))
    assert {"programmatic", "llm", "temporal", "reform", "conversation"} <= set(plugins.names("generators"))


def test_an_unknown_name_is_a_one_line_error_listing_what_is_installed():
    with pytest.raises(plugins.UnknownPart) as caught:
        plugins.load("solvers", "psychic", where="filter.blind.solvers[0].kind")
    message = str(caught.value)
    assert message.startswith("filter.blind.solvers[0].kind: 'psychic' is not one of the installed solvers (")
    assert "centroid" in message and "\n" not in message


def test_several_names_may_share_one_part():
    from filters.solvers import PriorConfig

    assert plugins.load_all("solvers").count(PriorConfig) == 1


def test_a_solver_from_another_package_takes_part_in_the_blind_filter(tmp_path):
    """A package `always_first` installed beside benchsmith registers the solver kind `first` under the
    entry-point group benchsmith.solvers; the settings accept it and the blind filter builds it."""
    (tmp_path / "always_first.py").write_text(textwrap.dedent('''
        from typing import Literal
        from filters.solvers import Prediction, SolverConfig

        class FirstConfig(SolverConfig):
            kind: Literal["first"]

            def build(self, **context):
                return FirstSolver(self)

        class FirstSolver:
            def __init__(self, config):
                self.name = config.label

            def answer(self, queries):
                return [Prediction(0, tuple([1.0] + [0.0] * (len(q.options) - 1))) for q in queries]

            def release(self):
                pass
    '''))
    dist = tmp_path / "always_first-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: always-first\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[benchsmith.solvers]\nfirst = always_first:FirstConfig\n")
    (tmp_path / "s.yaml").write_text("filter:\n  blind:\n    solvers: [{kind: first, name: plugged}]\n")
    script = textwrap.dedent('''
        from benchsmith.settings import load_settings
        from filters.blind import blind_settings, solvers_from
        from filters.solvers import Query

        settings = load_settings("s.yaml", env={"BENCHSMITH_WORKSPACE": "bench"})
        (solver,) = solvers_from(blind_settings(settings), settings=settings)
        print(solver.name, solver.answer([Query("q?", ("a", "b", "c", "d"))])[0].choice)
    ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["plugged", "0"]
