"""Tiny random language models, saved to a folder so tests load them through the production path."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "Question: What colour is the large circle?\nAnswer: red blue green yellow orange purple black pink",
    "Question: How many squares are there?\nAnswer: one two three four five six seven eight nine",
    "Question: Where is the star?\nAnswer: top left, bottom right, in the middle, next to the hexagon",
    "The quick brown fox jumps over the lazy dog. A cat sits on a mat near the window.",
]


def byte_level_tokenizer(bos_eos: bool):
    """A byte-level BPE tokenizer trained on a few lines: any text tokenizes, nothing is downloaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    raw.train_from_iterator(CORPUS * 4, trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos_eos:  # T5 style: every sequence ends with </s>
        raw.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def save_tiny_causal(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = byte_level_tokenizer(bos_eos=False)
    tokenizer.pad_token = None  # like GPT-2 and LLaMA: the solver must cope without one
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, pad_token_id=None)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_gpt2(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = byte_level_tokenizer(bos_eos=False)
    tokenizer.pad_token = None
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=256,
                        bos_token_id=1, eos_token_id=2)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def save_tiny_t5(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer = byte_level_tokenizer(bos_eos=True)
    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(tokenizer), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder



def save_tiny_sentence_bert(folder: Path, *, pooling: str = "mean", normalize: bool = True,
                            legacy_config: bool = False, encoder: str = "bert", seed: int = 0) -> Path:
    """A sentence-transformers directory (random BERT, pooling, optionally Normalize) written by the real
    sentence-transformers classes. `legacy_config` rewrites its module configs the way sentence-transformers
    2 wrote them (the packaged MiniLM's, with the old pooling flags) and has sentence-transformers
    lowercase (`do_lower_case`) for a cased tokenizer. `encoder="distilbert"`: the same around another
    architecture."""
    import json

    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, BertTokenizer, DistilBertConfig, DistilBertModel

    raw = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    raw.normalizer = normalizers.BertNormalizer(lowercase=not legacy_config)
    raw.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    raw.train_from_iterator(CORPUS * 4, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    tokenizer = BertTokenizer(vocab=raw.get_vocab(), do_lower_case=not legacy_config)
    torch.manual_seed(seed)
    if encoder == "bert":
        model = BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64))
    else:
        model = DistilBertModel(DistilBertConfig(vocab_size=len(tokenizer), dim=32, hidden_dim=64, n_layers=2,
                                                 n_heads=4, max_position_embeddings=64))
    backbone = folder.with_name(folder.name + "-backbone")
    model.save_pretrained(backbone)
    tokenizer.save_pretrained(backbone)
    modules = [Transformer(str(backbone), max_seq_length=24), Pooling(32, pooling)]
    SentenceTransformer(modules=modules + [Normalize()] * normalize, device="cpu").save(str(folder))
    if legacy_config:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24, "do_lower_case": True}))
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({
            "word_embedding_dimension": 32, "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False}))
        listed = json.loads((folder / "modules.json").read_text())
        for module in listed:
            module["type"] = "sentence_transformers.models." + module["type"].rsplit(".", 1)[-1]
        (folder / "modules.json").write_text(json.dumps(listed))
    return folder
