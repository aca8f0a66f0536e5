"""The one protocol every extractor backend follows, its settings, and choosing backends by name.

An extractor is configured under `extract.extractors.<name>` with a `backend` and that backend's own
parameters; `extract.use` lists the names that run. Building an extractor is cheap and loads nothing:
the runner asks for its `key` first; only when some image still lacks its facts does it call `check()`
(device and weights present, cheaply) and then `load()`.

The key names what produced a fact (`backend:model:hash-of-params`), so the store can tell which images
an extractor with exactly these settings has already seen; changing a threshold makes a new key and new
work, while batch size and device, which change speed rather than what is found, stay out of it (they
are marked `UNKEYED`, as is the backend, which the key names already).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from PIL.Image import Image as Pixels
from pydantic import Field, ValidationError, model_validator

from benchsmith import models, plugins
from benchsmith.errors import BenchsmithError
from benchsmith.records import Fact, Image, Provenance, stable_hash
from benchsmith.settings import UNKEYED, Settings, SettingsError, Strict, keyed


class ExtractorError(BenchsmithError, RuntimeError):
    """An extractor cannot run as configured: missing weights, device or package."""


@lru_cache(maxsize=4)
def class_names(path: Path, count: int | None = None) -> tuple[str, ...]:
    """A model's class names, one a line (`#` lines are notes), checked to be the `count` its head has
    (None: any number)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    names = tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    if count is not None and len(names) != count:
        raise ExtractorError(f"{path}: {len(names)} class names, the model has {count} classes")
    return names


class BackendParams(Strict):
    """Parameters every backend accepts."""

    backend: str = Field(json_schema_extra=UNKEYED)
    batch_size: int = Field(8, ge=1, json_schema_extra=UNKEYED)
    device: str = Field("auto", json_schema_extra=UNKEYED)   # auto: CUDA when present, else CPU


class ExtractSettings(Strict):
    use: list[str] = Field(default_factory=list)
    extractors: dict[str, dict[str, Any]] = Field(default_factory=dict)
    gpu_concurrency: int = Field(1, ge=1)
    retry_failed: bool = False

    @model_validator(mode="after")
    def _every_extractor_valid(self) -> "ExtractSettings":
        """Each configured extractor (used or not) names an installed backend and passes its parameters,
        so a typo anywhere is found when the settings load."""
        for name in self.use:
            if name not in self.extractors:
                known = ", ".join(sorted(self.extractors)) or "none"
                raise ValueError(f"use: no extractor named '{name}' under extract.extractors (configured: {known})")
        for name in self.extractors:
            backend_params(name, self.extractors[name])
        return self


def backend_class(name: str, raw: Any) -> type["Backend"]:
    """The backend class that `extract.extractors.<name>` names."""
    backend = raw.get("backend") if isinstance(raw, dict) else None
    if not isinstance(backend, str):
        raise SettingsError(f"extract.extractors.{name}.backend: missing (choose one of: "
                            f"{', '.join(plugins.names('extractors'))})")
    return plugins.load("extractors", backend, where=f"extract.extractors.{name}.backend")


def backend_params(name: str, raw: Any) -> "BackendParams":
    """`extract.extractors.<name>` checked against its backend's parameters (ValueError naming the key)."""
    try:
        return backend_class(name, raw).Params.model_validate(raw)
    except ValidationError as exc:
        raise ValueError("; ".join(f"extractors.{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                   for e in exc.errors())) from None


@dataclass(frozen=True)
class Loaded:
    """One image handed to an extractor: its record and, for backends that look at pixels, the RGB image."""

    image: Image
    pixels: Pixels | None


class Backend:
    """The one protocol of an extractor, with the shared plumbing: the key, provenance and fact
    construction. Subclasses set Params and implement `load` (models loaded; ExtractorError saying what
    is missing and how to supply it) and `extract` (facts for each image, in the order given)."""

    Params: ClassVar[type[BackendParams]] = BackendParams
    needs_pixels: ClassVar[bool] = True
    uses_gpu: ClassVar[bool] = False

    def __init__(self, name: str, params: BackendParams, settings: Settings) -> None:
        self.name, self.params, self.settings = name, params, settings
        self.batch_size = params.batch_size

    @property
    def model_name(self) -> str:
        return str(getattr(self.params, "model", "") or self.params.backend)

    @property
    def identity(self) -> dict[str, Any]:
        return keyed(self.params)

    @property
    def key(self) -> str:
        return f"{self.params.backend}:{self.model_name}:{stable_hash(self.identity, length=8)}"

    @property
    def provenance(self) -> Provenance:
        return Provenance(backend=self.params.backend, model=self.model_name, params=self.identity)

    def fact(self, image: Image, kind: str, text: str, **shape: Any) -> Fact:
        return Fact(item_id=image.id, kind=kind, text=text, provenance=self.provenance, **shape)

    def check(self) -> None:
        """Cheap checks run for every pending extractor before any of them works: a GPU backend's device,
        and the weights its `model` names, are there."""
        if self.uses_gpu:
            models.pick_device(self.params.device)
        if model := getattr(self.params, "model", None):
            require_model(model, self.name)

    def load(self) -> None:
        return None


def build_extractors(settings: Settings, only: Sequence[str] | None = None) -> list[Backend]:
    """The configured extractors that `extract.use` (or `only`) names, in that order; nothing is loaded."""
    section = settings.section("extract", ExtractSettings)
    names = list(only) if only else section.use
    built = []
    for name in names:
        if name not in section.extractors:
            known = ", ".join(sorted(section.extractors)) or "none"
            raise SettingsError(f"extract: no extractor named '{name}' under extract.extractors (configured: {known})")
        raw = section.extractors[name]  # checked when the settings loaded
        cls = backend_class(name, raw)
        built.append(cls(name, cls.Params.model_validate(raw), settings))
    return built


# ---------------------------------------------------------------------------------------------------
# Helpers the model backends share.

def load_pretrained(model_class: str, model: str, name: str, settings: Settings, *, device: str = "auto",
                    field: str = "model", processor_class: str = "AutoProcessor") -> tuple[Any, Any, Any, Any]:
    """(processor, model, device, dtype) for extractor `name`, loaded through benchsmith.models; `field` is the
    setting that names the model (`model`, `labeller`, ...), so a message can say what to change."""
    token = settings.secrets.hf_token.get_secret_value() if settings.secrets.hf_token else None
    processor, loaded = models.load_pretrained(model_class, model, device=device, processor_class=processor_class,
                                               token=token, **_where(name, field))
    return processor, loaded, loaded.device, loaded.dtype


def require_model(model: str, name: str, field: str = "model") -> None:
    models.require_model(model, **_where(name, field))


def _where(name: str, field: str) -> dict[str, str]:
    return {"owner": f"extractor '{name}'", "setting": f"extract.extractors.{name}.{field}"}

