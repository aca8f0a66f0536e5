"""One registry for every pluggable part, on Python entry points.

Each kind of part is an entry-point group named `benchsmith.<kind>`:
- `sections`: a top-level settings section -> the pydantic model that validates it when settings load;
- `extractors`: an extractor backend (`extract.extractors.<name>.backend`) -> its class;
- `generators`: a generator (`generate.generators`) -> its stage class (`generators.base.GeneratorStage`);
- `solvers`: a blind solver kind (`filter.blind.solvers[].kind`) -> its settings model, which builds it;
- `adapters`: an evaluation model kind (`evaluate.models.<name>.kind`) -> its settings model, which
  builds it;
- `protocols`: an evaluation protocol (`evaluate.protocol`) -> its class (a subclass of
  `evaluation.contract.BaseProtocol`);
- `renderers`: a kind of text-rich page (`benchsmith scenes make --kind`) -> its render function.

A generator's or a protocol's class names its own settings model (`settings_model`), which validates the
key under its name (`generate.<name>`, `evaluate.<name>`: `benchsmith.settings.WithParts`).

benchsmith's own parts are declared in its pyproject.toml; another installed package adds parts of
its own the same way, without touching benchsmith. A part is imported only when it is asked for by
name, so the offline profile never imports the GPU stacks. The kernel names no stage package here:
it only reads the groups.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from benchsmith.errors import BenchsmithError

KINDS = ("sections", "extractors", "generators", "solvers", "adapters", "protocols", "renderers")


class UnknownPart(BenchsmithError, KeyError):
    """A settings value names a part that no installed package provides."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@cache
def _installed() -> dict[str, dict[str, EntryPoint]]:
    """Every kind's parts, from one scan of the installed packages' metadata (each scan costs ~50 ms)."""
    points = entry_points()
    return {kind: {point.name: point for point in points.select(group=f"benchsmith.{kind}")} for kind in KINDS}


def _group(kind: str) -> dict[str, EntryPoint]:
    if kind not in KINDS:
        raise ValueError(f"no kind of part named {kind!r}; kinds: {', '.join(KINDS)}")
    return _installed()[kind]


def names(kind: str) -> list[str]:
    """The names of every installed part of this kind, sorted."""
    return sorted(_group(kind))


def load(kind: str, name: str, *, where: str = "") -> Any:
    """The part registered under `name` (imported now). `where` names the setting that asked for it, for
    the error an unknown name gets."""
    point = _group(kind).get(name)
    if point is None:
        known = ", ".join(names(kind)) or "none installed"
        raise UnknownPart(f"{where + ': ' if where else ''}'{name}' is not one of the installed {kind} ({known})")
    return point.load()


def load_all(kind: str) -> tuple[Any, ...]:
    """Every installed part of this kind, each once (several names may share one part), in name order."""
    return tuple(dict.fromkeys(load(kind, name) for name in names(kind)))
