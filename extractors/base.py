"""The one protocol every extractor backend follows, its settings, and choosing backends by name.

An extractor is configured under `extract.extractors.<name>` with a `backend` and that backend's own
parameters; `extract.use` lists the names that run. Building an extractor is cheap and loads nothing:
the runner asks for its `key` first; only when some image still lacks its facts does it call `check()`
(device and weights present, cheaply) and then `load()`.

The key names what produced a fact (`backend:model:hash-of-params`), so the store can tell which images
an extractor with exactly these settings has already seen; changing a threshold makes a new key and new
work, while batch size and device, which change speed rather than what is found, stay out of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from PIL.Image import Image as Pixels
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from benchsmith import plugins
from benchsmith.errors import BenchsmithError
from benchsmith.records import Fact, Image, Provenance, stable_hash
from benchsmith.settings import Settings, SettingsError

# Parameters that change speed but not the facts produced; they are left out of the extractor key.
NOT_IDENTITY = ("backend", "batch_size", "device")


class ExtractorError(BenchsmithError, RuntimeError):
    """An extractor cannot run as configured: missing weights, device or package."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class BackendParams(Strict):
    """Parameters every backend accepts."""

    backend: str
    batch_size: int = Field(8, ge=1)
    device: str = "auto"   # auto: CUDA when present, else CPU


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


class Extractor(Protocol):
    name: str
    key: str
    needs_pixels: bool
    uses_gpu: bool
    batch_size: int

    def check(self) -> None:
        """Cheap checks (device, weights on disk) run for every pending extractor before any of them works."""

    def load(self) -> None:
        """Load models; raise ExtractorError saying what is missing and how to supply it."""

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        """Facts for each image, in the order given."""


class Backend:
    """Shared plumbing: the key, provenance and fact construction. Subclasses set Params and implement
    `load` and `extract`."""

    Params: ClassVar[type[BackendParams]] = BackendParams
    needs_pixels: ClassVar[bool] = True
    uses_gpu: ClassVar[bool] = False

    def __init__(self, name: str, params: BackendParams, settings: Settings) -> None:
        self.name = name
        self.params = params
        self.settings = settings
        self.batch_size = params.batch_size

    @property
    def model_name(self) -> str:
        return str(getattr(self.params, "model", "") or self.params.backend)

    @property
    def identity(self) -> dict[str, Any]:
        return self.params.model_dump(mode="json", exclude=set(NOT_IDENTITY))

    @property
    def key(self) -> str:
        return f"{self.params.backend}:{self.model_name}:{stable_hash(self.identity, length=8)}"

    @property
    def provenance(self) -> Provenance:
        return Provenance(backend=self.params.backend, model=self.model_name, params=self.identity)

    def fact(self, image: Image, kind: str, text: str, **shape: Any) -> Fact:
        return Fact(item_id=image.id, kind=kind, text=text, provenance=self.provenance, **shape)

    def check(self) -> None:
        return None

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

def torch_device(name: str, model: str) -> tuple[Any, Any]:
    """(device, dtype): CUDA in half precision when present (or asked for), else CPU in float32."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ExtractorError(f"model {model} is configured for device '{name}', but torch sees no CUDA device "
                             "here; set its `device: auto` (or cpu), or run on a machine with a GPU")
    device = torch.device(name)
    return device, torch.float16 if device.type == "cuda" else torch.float32


def from_pretrained(loader, model: str, name: str, settings: Settings, field: str = "model", **kwargs):
    """`loader.from_pretrained(model)`, turning a missing model into one clear line.

    `field` is the setting that names the model (`model`, `labeller`, ...), so the message can say what to change.
    """
    token = settings.secrets.hf_token.get_secret_value() if settings.secrets.hf_token else None
    try:
        return loader.from_pretrained(model, token=token, **kwargs)
    except (OSError, ValueError) as exc:
        if Path(model).expanduser().is_dir() or not _looks_missing(exc):
            raise ExtractorError(f"extractor '{name}' cannot load model {model}: {_first_line(exc)}") from None
        raise ExtractorError(_missing_weights(model, name, field)) from None


def load_pretrained(model_class: str, model: str, name: str, settings: Settings, *, device: str = "auto",
                    field: str = "model", processor_class: str = "AutoProcessor") -> tuple[Any, Any, Any, Any]:
    """(processor, model, device, dtype) for a transformers model class named by `model_class`, loaded on
    the chosen device in eval mode; a missing library or model is one clear line."""
    try:
        import transformers
    except ImportError as exc:
        raise ExtractorError(f"extractor '{name}' needs transformers and torch ({exc}): "
                             "the CUDA lock (README, Production setup)") from None
    torch_dev, dtype = torch_device(device, model)
    processor = from_pretrained(getattr(transformers, processor_class), model, name, settings, field)
    loaded = from_pretrained(getattr(transformers, model_class), model, name, settings, field, dtype=dtype)
    return processor, loaded.to(torch_dev).eval(), torch_dev, dtype


def require_model(model: str, name: str, field: str = "model") -> None:
    """Fail early, before any extractor runs, when a model folder is missing or, offline, a hub model
    is not in the local cache. Online, the hub decides at load time."""
    local = Path(model).expanduser()
    if local.is_dir():
        return
    if model.startswith((".", "/", "~")) or local.exists():
        raise ExtractorError(f"extractor '{name}': model folder {model} does not exist "
                             f"(extract.extractors.{name}.{field})")
    if _offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(model, "config.json"), str):
            raise ExtractorError(_missing_weights(model, name, field))


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() not in ("", "0", "false", "no")


def _missing_weights(model: str, name: str, field: str) -> str:
    return (f"extractor '{name}': model weights for {model} are not available here; set "
            f"extract.extractors.{name}.{field} to a local folder holding them (save_pretrained, or "
            f"`hf download {model} --local-dir DIR`), or allow access to the Hugging Face Hub"
            + (" (unset HF_HUB_OFFLINE)" if _offline() else "") + " with HF_TOKEN set for gated models")


def _looks_missing(exc: Exception) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("does not appear to have", "is not a local folder", "offline",
                                    "couldn't connect", "cannot find the requested files", "not found",
                                    "repository not found", "gated", "we couldn't connect", "is not a valid model"))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def unit_box(x1: float, y1: float, x2: float, y2: float, width: int, height: int) -> tuple[float, ...]:
    """Pixel xyxy to unit xyxy, clipped to the image and rounded."""
    def clip(value: float, size: int) -> float:
        return round(min(max(value / size, 0.0), 1.0), 5)
    ux1, uy1, ux2, uy2 = clip(x1, width), clip(y1, height), clip(x2, width), clip(y2, height)
    return (min(ux1, ux2), min(uy1, uy2), max(ux1, ux2), max(uy1, uy2))

