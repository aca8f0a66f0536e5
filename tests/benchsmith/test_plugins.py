"""The one registry of pluggable parts: our own parts are found by name, and another installed package adds
a part of its own (here a blind solver, and a question generator) without any change to benchsmith."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from benchsmith import plugins


def run_beside(tmp_path, package: str, module: str, entry_points: str, settings_yaml: str, script: str) -> list[str]:
    """Install `module` as the package `package` (a module of that name and its dist-info with
    `entry_points`) in tmp_path, then run `script` there with the settings file s.yaml; return what it
    printed, split on whitespace."""
    name = package.replace("-", "_")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(module))
    dist = tmp_path / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(entry_points)
    (tmp_path / "s.yaml").write_text(settings_yaml)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


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
    module = '''
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
    '''
    script = '''
        from benchsmith.settings import load_settings
        from filters.blind import blind_settings, solvers_from
        from filters.solvers import Query

        settings = load_settings("s.yaml", env={"BENCHSMITH_WORKSPACE": "bench"})
        (solver,) = solvers_from(blind_settings(settings), settings=settings)
        print(solver.name, solver.answer([Query("q?", ("a", "b", "c", "d"))])[0].choice)
    '''
    printed = run_beside(tmp_path, "always-first", module, "[benchsmith.solvers]\nfirst = always_first:FirstConfig\n",
                         "filter:\n  blind:\n    solvers: [{kind: first, name: plugged}]\n", script)
    assert printed == ["plugged", "0"]


def test_a_generator_from_another_package_writes_gated_questions_through_the_runner(tmp_path):
    """A package `size_questions` registers the generator `size`: a QuestionStage subclass that names only
    its settings model, what it supports, what shapes a dimension's questions and how a window of jobs is
    done. Its questions
    are gated, stored and recorded in the ledger like ours, and a second run does nothing."""
    module = '''
        from pydantic import BaseModel
        from benchsmith.records import Provenance, Question
        from generators.stage import Outcome, QuestionStage

        class SizeSettings(BaseModel):
            wording: str = "Which is the width of this image in pixels?"

        class SizeStage(QuestionStage):
            generator = "size"
            settings_model = SizeSettings

            def supports(self, dimension):
                return dimension.key == "instance_attributes"

            def dimension_key(self, dimension):
                return "v1"

            def process(self, jobs):
                for job in jobs:
                    width = job.item.width
                    options = [str(width), str(width * 2), str(width + 7), str(width // 3)]
                    yield job, Outcome([Question(item_id=job.item.id, dimension_id=job.dimension.id,
                                                 text=self.own.wording, options=options, answer=0,
                                                 provenance=Provenance(backend="size"),
                                                 meta={"generator": "size"})])
    '''
    script = '''
        from benchsmith.records import Image
        from benchsmith.settings import load_settings
        from benchsmith.store import Store
        from generators.stage import run_generate

        settings = load_settings("s.yaml", env={"BENCHSMITH_WORKSPACE": "bench"})
        with Store(settings.db_url) as store:
            store.add_items([Image(id=f"img{n}", path=f"img{n}.png", width=100 + n, height=50) for n in range(3)])
            first, again = run_generate(store, settings), run_generate(store, settings)
            stored = store.get_questions()
            done = store.ledger_rows("generate:size")
        print(first["jobs"], first["new_questions"], again["jobs"], len(stored), len(done),
              sorted({q.options[q.answer] for q in stored}) == ["100", "101", "102"])
    '''
    printed = run_beside(tmp_path, "size-questions", module, "[benchsmith.generators]\nsize = size_questions:SizeStage\n",
                         "generate:\n  generators: [size]\n", script)
    assert printed == ["3", "3", "0", "3", "3", "True"]
