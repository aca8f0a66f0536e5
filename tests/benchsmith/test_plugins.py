"""The one registry of pluggable parts: our own parts are found by name, and another installed package adds
a part of its own (here a blind solver, and a question generator) without any change to benchsmith."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchsmith import plugins


def install_beside(tmp_path, package: str, modules: dict[str, str], entry_points: str) -> dict[str, str]:
    """Install `modules` (name: source) as the package `package` (the modules and its dist-info with
    `entry_points`) in tmp_path; return an environment whose Python finds it beside benchsmith."""
    name = package.replace("-", "_")
    for module, source in modules.items():
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    dist = tmp_path / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(entry_points)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BENCHSMITH", "OPENAI")) and k != "HF_TOKEN"}
    return env | {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "COLUMNS": "200"}


def run_beside(tmp_path, package: str, module: str, entry_points: str, settings_yaml: str, script: str) -> list[str]:
    """Install the package as `install_beside` does, then run `script` there with the settings file s.yaml;
    return what it printed, split on whitespace."""
    env = install_beside(tmp_path, package, {package.replace("-", "_"): module}, entry_points)
    (tmp_path / "s.yaml").write_text(settings_yaml)
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

            def process(self, jobs, context):
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


ORIENTATION_PACKAGE = '''
    from pydantic import BaseModel, ConfigDict
    from benchsmith.records import Provenance, Question
    from evaluation.protocols import Protocol
    from evaluation.records import Pass
    from generators.stage import Outcome, QuestionStage

    LAYOUTS = ["landscape", "portrait", "square", "panorama"]

    class OrientationSettings(BaseModel):
        model_config = ConfigDict(extra="forbid")
        wording: str = "Which way is this picture laid out?"

    class OrientationStage(QuestionStage):
        """One question per image: is it wider or taller than it is high?"""
        generator = "orientation"
        settings_model = OrientationSettings

        def supports(self, dimension):
            return dimension.key == "scene_understanding"

        def dimension_key(self, dimension):
            return "v1"

        def process(self, jobs, context):
            for job in jobs:
                wide = job.item.width > job.item.height
                yield job, Outcome([Question(item_id=job.item.id, dimension_id=job.dimension.id,
                                             text=self.own.wording, options=LAYOUTS, answer=0 if wide else 1,
                                             provenance=Provenance(backend="orientation"),
                                             meta={"generator": "orientation"})])

    class MirrorSettings(BaseModel):
        model_config = ConfigDict(extra="forbid")
        strict: bool = True     # right only when right in both orders; false: the share of the two

    class Mirror(Protocol):
        """Each question in its published order and reversed."""
        settings_model = MirrorSettings

        def passes(self, question):
            n = len(question.options)
            return [Pass(question, "forward"), Pass(question, "reversed", tuple(range(n))[::-1])]

        def score(self, correct):
            return float(all(correct)) if self.settings.strict else sum(correct) / len(correct)
'''

# A module of its own: the solvers' settings union imports every solver, so a solver cannot share a module
# with a part that imports `filters.solvers` (the generator does, through the stage).
FIRST_SOLVER = '''
    from typing import Literal
    from filters.solvers import Prediction, SolverConfig

    class FirstConfig(SolverConfig):
        kind: Literal["first"]

        def build(self, **context):
            return FirstSolver()

    class FirstSolver:
        """Picks whatever option is shown first."""
        name = "first"

        def answer(self, queries):
            return [Prediction(0, tuple([1.0] + [0.0] * (len(q.options) - 1))) for q in queries]

        def release(self):
            pass
'''

ORIENTATION_ENTRY_POINTS = """\
[benchsmith.generators]
orientation = orientation_questions:OrientationStage
[benchsmith.protocols]
mirror = orientation_questions:Mirror
[benchsmith.solvers]
first = first_solver:FirstConfig
"""


def test_a_plugin_generator_and_protocol_configured_in_benchsmith_yaml_run_through_the_cli(tmp_path):
    """A package installed beside benchsmith brings a generator with its own settings section
    (`generate.orientation`), an evaluation protocol with its own (`evaluate.mirror`) and a solver that
    always picks the first option shown. The user's benchsmith.yaml configures them like ours, and the
    benchsmith command runs them: the questions carry the configured wording and the right layout, and the
    board scores each question by the protocol's own rule under its settings."""
    from PIL import Image as PILImage

    env = install_beside(tmp_path, "orientation-questions",
                         {"orientation_questions": ORIENTATION_PACKAGE, "first_solver": FIRST_SOLVER},
                         ORIENTATION_ENTRY_POINTS)
    photos = tmp_path / "photos"
    photos.mkdir()
    for name, size in {"wide": (120, 60), "tall": (60, 120), "wider": (200, 90)}.items():
        PILImage.new("RGB", size, (40 * len(name), 90, 160)).save(photos / f"{name}.png")
    (tmp_path / "benchsmith.yaml").write_text(textwrap.dedent("""\
        workspace: bench
        ingest: {richness: {enabled: false}}
        generate:
          generators: [orientation]
          orientation: {wording: "Is this picture laid out wide or tall?"}
        evaluate:
          protocol: mirror
          mirror: {strict: false}
          models:
            first: {kind: blind, solver: {kind: first}}
    """))
    cli = str(Path(sys.executable).with_name("benchsmith"))

    def benchsmith(*args: str) -> str:
        done = subprocess.run([cli, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"benchsmith {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    benchsmith("ingest", str(photos))
    benchsmith("generate")
    benchsmith("eval", "run", "--candidates", "-m", "first", "--json")
    board = json.loads(benchsmith("eval", "board", "--candidates", "--json"))

    from benchsmith.store import Store
    with Store(f"sqlite:///{tmp_path / 'bench' / 'benchsmith.db'}") as store:
        questions = store.get_questions(status="candidate")
        widths = {item.id: item.width > item.height for item in store.get_items(kind="image")}
    assert len(questions) == 3 and {q.text for q in questions} == {"Is this picture laid out wide or tall?"}
    assert all(q.options[q.answer] == ("landscape" if widths[q.item_id] else "portrait") for q in questions)
    # `first` is right in the published order when the key is shown first, and reversed when it is shown last;
    # not strict, a question scores the share of its two passes that were right
    expected = [((q.answer == 0) + (q.answer == len(q.options) - 1)) / 2 for q in questions]
    [row] = board["rows"]
    assert (row["protocol"], row["questions"]) == ("mirror", 3)
    assert row["overall"] == pytest.approx(sum(expected) / 3)

    # the plugin's own models validate its sections: a typo is refused before anything runs
    for typo, message in {"generate:\n  orientation: {wordng: x}\n": "generate.orientation.wordng: Extra inputs",
                          "evaluate:\n  mirror: {strict: maybe}\n": "evaluate.mirror.strict: Input should be a valid "
                                                                    "boolean"}.items():
        (tmp_path / "benchsmith.yaml").write_text(typo)
        done = subprocess.run([cli, "status"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 2 and done.stderr.startswith(f"error: invalid settings: {message}"), done.stderr
