"""Sentence-transformers BERT models (Transformer + Pooling, optionally Normalize) run with torch alone.

Importing sentence-transformers (and with it transformers) costs ~8 s and ~500 MB before the first
vector; this reads the model directory itself: `tokenizers` for the tokenizer, `safetensors` for the
weights, torch for the math. It does the same float operations in the same order as the installed
sentence-transformers 6 over transformers 5 `BertModel` (sdpa attention, exact GELU, the boolean padding
mask, mean pooling summed in float32, Normalize, then `normalize_embeddings`), so its vectors equal
theirs bit for bit at the same batch size; tests/benchsmith/test_bert_sentence.py checks that
against the installed libraries. A directory of any other shape is left to sentence-transformers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from benchsmith.errors import BenchsmithError

# sentence_bert_config.json keys whose values say "plain text through BertModel.forward"; any other
# key (processor or model kwargs, prompts, query lengths...) changes what sentence-transformers does
PLAIN_TRANSFORMER = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}
LEGACY_POOLING = {  # sentence-transformers' order, which is also the order it concatenates them in
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                  "mask_token": "[MASK]"}
OTHER_WEIGHTS = ("pytorch_model.bin", "model.safetensors.index.json", "pytorch_model.bin.index.json")
WHOLE_NUMBERS = {"I64", "I32", "I16", "I8", "U8", "BOOL"}  # safetensors dtypes of buffers such as position_ids
VERY_LARGE_INTEGER = int(1e30)  # transformers' model_max_length when the tokenizer sets none


@dataclass(frozen=True)
class BertLayout:
    """What a sentence-transformers directory of the supported shape says, read before any weight."""

    folder: Path            # the Transformer module's folder: config.json, tokenizer.json, model.safetensors
    config: dict            # config.json
    max_length: int         # tokens per text, [CLS] and [SEP] included
    do_lower_case: bool     # sentence-transformers' own lowercasing on top of the tokenizer's
    pad_token: str
    pooling: str            # "mean" or "cls"
    normalize: bool         # a Normalize module follows the pooling


def _cannot_load(name: str, why: str) -> BenchsmithError:
    return BenchsmithError(f"cannot load sentence-embedding model {name!r}: {why}")


def _read_json(path: Path, name: str) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _cannot_load(name, f"{path.name} is unreadable ({exc})") from None


def _module_kind(entry: dict) -> str:
    kind = str(entry.get("type", ""))
    return kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else kind


def read_layout(directory: Path, name: str) -> BertLayout | None:
    """The layout of a sentence-transformers BERT directory; None when the directory has another
    shape (another architecture or module list, a legacy weights file, settings this encoder does not
    reproduce), which sentence-transformers loads instead. A directory of this shape that is broken
    (unreadable JSON, no weights) is a BenchsmithError."""
    modules_file = directory / "modules.json"
    if not modules_file.is_file():
        return None
    modules = _read_json(modules_file, name)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise _cannot_load(name, "modules.json is not a list of modules")
    kinds = [_module_kind(m) for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    folder = directory / str(modules[0].get("path", ""))
    if not (folder / "config.json").is_file():
        raise _cannot_load(name, f"no config.json in {folder}")
    config = _read_json(folder / "config.json", name)
    if not isinstance(config, dict) or config.get("model_type") != "bert" or not _plain_bert(config):
        return None
    if not (folder / "model.safetensors").is_file():
        if any((folder / other).is_file() for other in OTHER_WEIGHTS):
            return None
        raise _cannot_load(name, f"no model weights (model.safetensors) in {folder}")
    if _stored_dtypes(folder / "model.safetensors", name) - WHOLE_NUMBERS != {"F32"}:
        return None  # transformers would run half-precision weights in half precision
    if not (folder / "tokenizer.json").is_file():
        return None

    st_config = _optional_json(folder / "sentence_bert_config.json", name)
    if not set(st_config) <= {"max_seq_length", "do_lower_case", *PLAIN_TRANSFORMER} or any(
            key in st_config and st_config[key] != value for key, value in PLAIN_TRANSFORMER.items()):
        return None
    tokenizer_config = _optional_json(folder / "tokenizer_config.json", name)
    if tokenizer_config.get("tokenizer_class", "BertTokenizer") not in ("BertTokenizer", "BertTokenizerFast"):
        return None
    specials = {key: str(tokenizer_config.get(key) or default) for key, default in SPECIAL_TOKENS.items()}
    if not _tokenizer_fits(_read_json(folder / "tokenizer.json", name), tokenizer_config, specials):
        return None
    top = _optional_json(directory / "config_sentence_transformers.json", name)
    if (top.get("default_prompt_name") or top.get("truncate_dim") is not None
            or top.get("model_type", "SentenceTransformer") != "SentenceTransformer"):
        return None

    pooling = _pooling_mode(_optional_json(directory / str(modules[1].get("path", "")) / "config.json", name))
    if pooling not in ("mean", "cls"):
        return None
    if len(modules) == 3:
        normalize_config = _optional_json(directory / str(modules[2].get("path", "")) / "config.json", name)
        if any(normalize_config.get(key, "sentence_embedding") != "sentence_embedding"
               for key in ("module_input_name", "module_output_name")):
            return None

    max_length = st_config.get("max_seq_length")
    if max_length is None:  # the tokenizer's own limit, capped at the model's positions, as transformers does
        max_length = min(int(tokenizer_config.get("model_max_length") or VERY_LARGE_INTEGER),
                         int(config.get("max_position_embeddings", 512)))
    return BertLayout(folder=folder, config=config, max_length=int(max_length),
                      do_lower_case=bool(st_config.get("do_lower_case", False)),
                      pad_token=specials["pad_token"], pooling=pooling, normalize=len(modules) == 3)


def _optional_json(path: Path, name: str) -> dict:
    if not path.is_file():
        return {}
    found = _read_json(path, name)
    if not isinstance(found, dict):
        raise _cannot_load(name, f"{path} is not a JSON object")
    return found


def _stored_dtypes(path: Path, name: str) -> set[str]:
    """The tensor types a safetensors file holds, read from its JSON header alone."""
    try:
        with path.open("rb") as stored:
            size = int.from_bytes(stored.read(8), "little")
            header = json.loads(stored.read(size)) if 0 < size <= 100_000_000 else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise _cannot_load(name, f"{path.name} is unreadable (no safetensors header)")
    return {str(entry.get("dtype")) for key, entry in header.items()
            if key != "__metadata__" and isinstance(entry, dict)}


def _plain_bert(config: dict) -> bool:
    """A float32 BERT encoder as transformers' BertModel runs it by default: no decoder, no relative
    positions, exact GELU, no feed-forward chunking, no attention implementation asked for."""
    dtype = config.get("dtype", config.get("torch_dtype"))
    return (dtype in (None, "float32")
            and not config.get("is_decoder", False) and not config.get("add_cross_attention", False)
            and config.get("position_embedding_type", "absolute") == "absolute"
            and config.get("hidden_act", "gelu") == "gelu"
            and not config.get("chunk_size_feed_forward", 0)
            and config.get("attn_implementation", config.get("_attn_implementation")) in (None, "sdpa"))


def _tokenizer_fits(tokenizer: dict, tokenizer_config: dict, specials: dict[str, str]) -> bool:
    """Whether tokenizer.json tokenizes as transformers 5's BertTokenizer does, which rebuilds its
    normalizer, pre-tokenizer, WordPiece model and [CLS] ... [SEP] template from tokenizer_config.json
    and keeps only the vocabulary of tokenizer.json."""
    model = tokenizer.get("model") if isinstance(tokenizer, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("vocab"), dict):
        return False
    vocab = model["vocab"]
    normalizer = {"type": "BertNormalizer", "clean_text": True,
                  "handle_chinese_chars": tokenizer_config.get("tokenize_chinese_chars", True),
                  "strip_accents": tokenizer_config.get("strip_accents"),
                  "lowercase": tokenizer_config.get("do_lower_case", True)}
    added = tokenizer.get("added_tokens") or []
    plain_special = all(t.get("special") and not (t.get("normalized") or t.get("lstrip") or t.get("rstrip")
                                                  or t.get("single_word")) for t in added)
    cls, sep = specials["cls_token"], specials["sep_token"]
    post = tokenizer.get("post_processor") or {}
    if post.get("type") == "TemplateProcessing":
        template = [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                    {"SpecialToken": {"id": sep, "type_id": 0}}]
        ids = {token: spec.get("ids") for token, spec in (post.get("special_tokens") or {}).items()}
        framed = post.get("single") == template and ids.get(cls) == [vocab.get(cls)] \
            and ids.get(sep) == [vocab.get(sep)]
    else:
        framed = post.get("type") == "BertProcessing" and post.get("cls") == [cls, vocab.get(cls)] \
            and post.get("sep") == [sep, vocab.get(sep)]
    return (framed and model.get("type") == "WordPiece"
            and model.get("unk_token") == specials["unk_token"]
            and model.get("continuing_subword_prefix", "##") == "##"
            and model.get("max_input_chars_per_word", 100) == 100
            and tokenizer.get("normalizer") == normalizer
            and tokenizer.get("pre_tokenizer") == {"type": "BertPreTokenizer"}
            and plain_special and {t.get("content") for t in added} == set(specials.values())
            and all(token in vocab for token in specials.values())
            and tokenizer_config.get("padding_side", "right") == "right"
            and tokenizer_config.get("truncation_side", "right") == "right"
            and not tokenizer_config.get("additional_special_tokens")
            and not tokenizer_config.get("extra_special_tokens"))


def _pooling_mode(pooling: dict) -> str | tuple | None:
    mode = pooling.get("pooling_mode")
    if mode is None:  # the legacy flags; none set means mean
        mode = [m for key, m in LEGACY_POOLING.items() if pooling.get(key, False)] or ["mean"]
    if isinstance(mode, list):
        mode = mode[0] if len(mode) == 1 else tuple(mode)
    return mode


class BertSentenceEncoder:
    """`encode` as `SentenceTransformer.encode` does it for this model, with the same vectors."""

    def __init__(self, layout: BertLayout, device: str, name: str) -> None:
        import torch

        self.layout = layout
        self.device = torch.device(device)
        self.tokenizer = self._tokenizer(layout, name)
        config = layout.config
        try:
            self.hidden = int(config["hidden_size"])
            self.heads = int(config["num_attention_heads"])
            self.layers = int(config["num_hidden_layers"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
        except (KeyError, TypeError, ValueError) as exc:
            raise _cannot_load(name, f"config.json lacks a usable {exc}") from None
        if self.hidden % self.heads:
            raise _cannot_load(name, f"hidden_size {self.hidden} is not a multiple of num_attention_heads "
                                     f"{self.heads}")
        self.head_size = self.hidden // self.heads
        self.scaling = self.head_size ** -0.5  # as BertSelfAttention computes it, a Python float
        self.weights = self._weights(layout.folder / "model.safetensors", name)

    # -- loading ---------------------------------------------------------------------------------------

    def _tokenizer(self, layout: BertLayout, name: str):
        from tokenizers import Tokenizer
        from tokenizers.normalizers import Lowercase, Sequence

        try:
            tokenizer = Tokenizer.from_file(str(layout.folder / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises a bare Exception for a malformed file
            raise _cannot_load(name, f"tokenizer.json is unreadable ({exc})") from None
        pad_id = tokenizer.token_to_id(layout.pad_token)
        if pad_id is None:
            raise _cannot_load(name, f"the pad token {layout.pad_token!r} is not in tokenizer.json")
        # per call, transformers truncates to the model's length and pads to the longest text, whatever
        # tokenizer.json says (the packaged MiniLM's says 128, fixed)
        tokenizer.enable_truncation(layout.max_length, stride=0, strategy="longest_first", direction="right")
        tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_type_id=0, pad_token=layout.pad_token)
        # sentence-transformers' do_lower_case: a Lowercase in front, unless one is there already (it
        # does not count BertNormalizer's own lowercasing)
        normalizer = tokenizer.normalizer
        inner = list(normalizer) if isinstance(normalizer, Sequence) else [] if normalizer is None else [normalizer]
        if layout.do_lower_case and not any(isinstance(n, Lowercase) for n in inner):
            tokenizer.normalizer = Sequence([Lowercase(), *inner])
        return tokenizer

    def _weights(self, path: Path, name: str) -> dict:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            stored = load_file(str(path), device=str(self.device))
        except (OSError, SafetensorError) as exc:
            raise _cannot_load(name, f"{path.name} is unreadable ({exc})") from None
        # checkpoints saved from BertForMaskedLM and the like carry a "bert." prefix; old ones name the
        # layer norms' parameters gamma and beta (transformers renames both on loading)
        stored = {key.removeprefix("bert.").replace("LayerNorm.gamma", "LayerNorm.weight")
                  .replace("LayerNorm.beta", "LayerNorm.bias"): tensor for key, tensor in stored.items()}
        wanted = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                  "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
                  "embeddings.LayerNorm.bias"]
        wanted += [f"encoder.layer.{i}.{part}.{end}" for i in range(self.layers)
                   for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                                "output.dense", "output.LayerNorm") for end in ("weight", "bias")]
        missing = [key for key in wanted if key not in stored]
        if missing:
            raise _cannot_load(name, f"{path.name} lacks {len(missing)} tensors, e.g. {missing[0]}")
        return {key: stored[key] for key in wanted}

    # -- encoding --------------------------------------------------------------------------------------

    def encode(self, sentences, batch_size: int = 32, *, normalize_embeddings: bool = False,
               convert_to_numpy: bool = True, show_progress_bar: bool = False):
        """Float32 vectors, one row per text (one vector for a single string). Texts are sorted longest
        first (by characters, numpy's default argsort) and cut into batches, as sentence-transformers
        does, since the padding a batch gets changes the float sums. `show_progress_bar` is accepted for
        sentence-transformers' signature and ignored."""
        import numpy as np
        import torch

        if not convert_to_numpy:
            raise ValueError("BertSentenceEncoder.encode returns numpy arrays only (convert_to_numpy=True)")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size}.")
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        if not texts:
            return np.array([])
        order = np.argsort([-len(text) for text in texts])
        rows = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [texts[i] for i in order[start:start + batch_size]]
                vectors = self._embed(batch)
                if normalize_embeddings:
                    vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
                rows.append(vectors.cpu())
            stacked = torch.cat(rows)[torch.from_numpy(np.argsort(order))]
        out = stacked.numpy()
        return out[0] if single else out

    def _embed(self, texts: list[str]):
        import numpy as np
        import torch

        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=True)
        ids, type_ids, mask = (torch.from_numpy(np.array([getattr(e, field) for e in encodings], dtype=np.int64))
                               .to(self.device) for field in ("ids", "type_ids", "attention_mask"))
        tokens = self._bert(ids, type_ids, mask)
        if self.layout.pooling == "cls":
            pooled = tokens[:, 0]  # right padding: the first token is always [CLS]
        else:
            weights = mask.unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * weights).sum(dim=1, dtype=torch.float32)
            counts = torch.clamp(weights.sum(dim=1, dtype=torch.float32), min=1e-9)
            pooled = (summed / counts).to(tokens.dtype)
        if self.layout.normalize:
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
        return pooled

    def _bert(self, ids, type_ids, mask):
        """transformers' BertModel.forward (eval, sdpa) up to last_hidden_state, op for op."""
        import torch
        from torch.nn import functional as F

        w = self.weights

        def dense(x, name: str):
            return F.linear(x, w[name + ".weight"], w[name + ".bias"])

        def norm(x, name: str):
            return F.layer_norm(x, (self.hidden,), w[name + ".weight"], w[name + ".bias"], self.eps)

        batch, length = ids.shape
        positions = torch.arange(length, device=ids.device).unsqueeze(0)
        x = F.embedding(ids, w["embeddings.word_embeddings.weight"])
        x = x + F.embedding(type_ids, w["embeddings.token_type_embeddings.weight"])
        x = norm(x + F.embedding(positions, w["embeddings.position_embeddings.weight"]), "embeddings.LayerNorm")
        # no mask at all when nothing is padded; else a boolean (batch, 1, query, key) mask
        padded = mask.to(torch.bool)
        attention_mask = None if padded.all() else padded[:, None, None, :].expand(
            batch, 1, length, length).contiguous()
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            query, key, value = (dense(x, f"{p}attention.self.{part}").view(batch, length, -1, self.head_size)
                                 .transpose(1, 2) for part in ("query", "key", "value"))
            attended = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=0.0,
                                                      scale=self.scaling, is_causal=False)
            attended = attended.transpose(1, 2).contiguous().reshape(batch, length, -1).contiguous()
            x = norm(dense(attended, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            x = norm(dense(F.gelu(dense(x, p + "intermediate.dense")), p + "output.dense") + x, p + "output.LayerNorm")
        return x
