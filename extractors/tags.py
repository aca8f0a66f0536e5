"""Zero-shot tags, box labels and attributes with a CLIP-class model over vocabularies kept in `data/`.

- Tags: each image is scored against every label of a vocabulary (`data/vocabularies/objects.txt` by
  default); the top-k labels whose probability reaches the threshold become tag facts.
- Box labels and attributes (used by the SAM backends): a crop gets the best label of the vocabulary,
  and for each attribute of `data/vocabularies/attributes.yaml` (colour, material, shape, size...)
  the value that best completes "a photo of a {value} {label}", kept when it is probable enough.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from PIL.Image import Image as Pixels
from pydantic import Field

from benchsmith.paths import DATA_DIR
from benchsmith.records import Fact, stable_hash
from benchsmith.settings import UNKEYED, Settings, parse_yaml
from extractors.base import Backend, BackendParams, ExtractorError, Loaded, load_pretrained

VOCABULARY_DIR = DATA_DIR / "vocabularies"


def _vocabulary_path(name_or_path: str, suffix: str) -> Path:
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    packaged = VOCABULARY_DIR / f"{name_or_path}{suffix}"
    if packaged.is_file():
        return packaged
    raise ExtractorError(f"vocabulary '{name_or_path}' not found: give a file path or one of "
                         f"{', '.join(sorted(p.stem for p in VOCABULARY_DIR.glob('*' + suffix)))} ({VOCABULARY_DIR})")


@lru_cache(maxsize=8)
def load_vocabulary(name_or_path: str) -> tuple[str, ...]:
    """Labels of a vocabulary file: one per line, `#` comments and blank lines skipped, duplicates dropped."""
    lines = _vocabulary_path(name_or_path, ".txt").read_text(encoding="utf-8").splitlines()
    return tuple(dict.fromkeys(line.strip() for line in lines if line.strip() and not line.startswith("#")))


@lru_cache(maxsize=8)
def load_attributes(name_or_path: str) -> dict[str, tuple[str, ...]]:
    """Attribute name -> its values, from a YAML mapping."""
    path = _vocabulary_path(name_or_path, ".yaml")
    data = parse_yaml(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict) or not all(isinstance(v, list) and len(v) >= 2 for v in data.values()):
        raise ExtractorError(f"attribute vocabulary {path} must map each attribute to a list of 2 or more values")
    return {str(k): tuple(str(v) for v in values) for k, values in data.items()}


class ClipScorer:
    """A loaded CLIP-class model scoring images against text prompts; text embeddings are cached."""

    def __init__(self, model: str, name: str, settings: Settings, *, device: str = "auto",
                 template: str = "a photo of a {}.", field: str = "model") -> None:
        self.processor, self.model, self.device, self.dtype = load_pretrained(
            "AutoModel", model, name, settings, device=device, field=field)
        self.template = template
        self._texts: dict[tuple[str, ...], object] = {}

    def _text_embeddings(self, prompts: tuple[str, ...]):
        import torch

        if prompts not in self._texts:
            chunks = []
            for start in range(0, len(prompts), 256):
                inputs = self.processor(text=list(prompts[start:start + 256]), return_tensors="pt", padding=True,
                                        truncation=True).to(self.device)
                with torch.inference_mode():
                    chunks.append(_features(self.model.get_text_features(**inputs)))
            self._texts[prompts] = torch.nn.functional.normalize(torch.cat(chunks).float(), dim=-1)
        return self._texts[prompts]

    def image_embeddings(self, pixels: Sequence[Pixels]):
        import torch

        inputs = self.processor(images=list(pixels), return_tensors="pt")
        inputs = {k: v.to(self.device, self.dtype) for k, v in inputs.items()}
        with torch.inference_mode():
            return torch.nn.functional.normalize(_features(self.model.get_image_features(**inputs)).float(), dim=-1)

    def probabilities(self, images, prompts: Sequence[str]):
        """Softmax over `prompts` for each image embedding: a tensor [images, prompts]."""
        import torch

        texts = self._text_embeddings(tuple(prompts))
        with torch.inference_mode():
            scale = self.model.logit_scale.exp().float()
            return (scale * images @ texts.T).softmax(dim=-1)

    def label(self, images, labels: Sequence[str]) -> list[tuple[str, float]]:
        """The best label of `labels` for each image embedding, with its probability."""
        probs = self.probabilities(images, [self.template.format(label) for label in labels])
        best = probs.max(dim=-1)
        return [(labels[i], round(float(p), 4)) for p, i in zip(best.values.tolist(), best.indices.tolist())]

    def attributes(self, images, labels: Sequence[str], vocabulary: dict[str, tuple[str, ...]],
                   min_score: float) -> list[dict[str, str]]:
        """For each image embedding and its label, the most probable value of every attribute."""
        out: list[dict[str, str]] = [{} for _ in labels]
        for index, label in enumerate(labels):
            for attribute, values in vocabulary.items():
                probs = self.probabilities(images[index:index + 1], [f"a photo of a {v} {label}." for v in values])[0]
                best = int(probs.argmax())
                if float(probs[best]) >= min_score:
                    out[index][attribute] = values[best]
        return out


def _features(output):
    """transformers 5 returns model outputs from get_*_features (the projection in pooler_output)."""
    return output if hasattr(output, "shape") else output.pooler_output


class ClipTagParams(BackendParams):
    model: str
    vocabulary: str = "objects"                   # a file in data/vocabularies (without .txt) or a path
    template: str = "a photo of a {}."
    top_k: int = Field(10, ge=1)
    threshold: float = Field(0.05, ge=0, le=1)    # minimum softmax probability over the vocabulary
    batch_size: int = Field(32, ge=1, json_schema_extra=UNKEYED)


class ClipTagExtractor(Backend):
    Params = ClipTagParams
    uses_gpu = True

    @property
    def identity(self) -> dict:
        # the vocabulary's content, not just its name, decides the tags: an edited list is new work
        return super().identity | {"vocabulary_hash": stable_hash(load_vocabulary(self.params.vocabulary), length=8)}

    def check(self) -> None:
        load_vocabulary(self.params.vocabulary)
        super().check()

    def load(self) -> None:
        self.labels = load_vocabulary(self.params.vocabulary)
        self.scorer = ClipScorer(self.params.model, self.name, self.settings, device=self.params.device,
                                 template=self.params.template)

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        embeddings = self.scorer.image_embeddings([loaded.pixels for loaded in images])
        probs = self.scorer.probabilities(embeddings, [self.params.template.format(label) for label in self.labels])
        top = probs.topk(min(self.params.top_k, len(self.labels)), dim=-1)
        return [[self.fact(loaded.image, "tag", self.labels[i], score=round(p, 4))
                 for p, i in zip(values, indices) if p >= self.params.threshold]
                for loaded, values, indices in zip(images, top.values.tolist(), top.indices.tolist())]
