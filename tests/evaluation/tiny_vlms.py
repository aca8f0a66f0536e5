"""Tiny random vision-language models of real classes, saved to a folder so tests load them through the
production path (AutoModelForImageTextToText + AutoProcessor).

Qwen2-VL is not among them: its processor cannot be built without torchvision (it checks its video
processor's class, and the video processors import torchvision), which does not work on CPU here."""

from __future__ import annotations

from pathlib import Path

from tests.filters.solvers.tiny_models import byte_level_tokenizer


def save_tiny_llava(folder: Path, *, seed: int = 0) -> Path:
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tokenizer = byte_level_tokenizer(bos_eos=False)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    torch.manual_seed(seed)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=4, image_size=32, patch_size=8, projection_dim=32),
        text_config=LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                max_position_embeddings=512, bos_token_id=1, eos_token_id=2, pad_token_id=0),
        image_token_id=image_token_id, vision_feature_select_strategy="default", vision_feature_layer=-1)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default", image_token="<image>",
        num_additional_image_tokens=1)
    processor.save_pretrained(folder)
    return folder


def save_tiny_idefics3(folder: Path, *, seed: int = 0) -> Path:
    """Idefics3 with a chat template: several images per prompt, each a run of image tokens between
    marker tokens; no image splitting, so one 32-pixel view per image."""
    import torch
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
    from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

    tokenizer = byte_level_tokenizer(bos_eos=False)
    tokenizer.add_special_tokens({"additional_special_tokens": [
        "<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]})
    torch.manual_seed(seed)
    config = Idefics3Config(
        text_config={"model_type": "llama", "vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                     "max_position_embeddings": 1024, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": 32, "patch_size": 8},
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"), scale_factor=2)
    Idefics3ForConditionalGeneration(config).save_pretrained(folder)
    chat_template = ("{% for m in messages %}{{ m['role'] | capitalize }}:{% for c in m['content'] %}"
                     "{% if c['type'] == 'image' %}<image>{% else %} {{ c['text'] }}{% endif %}{% endfor %}"
                     "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}")
    image_processor = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 32},
                                                max_image_size={"longest_edge": 32})
    Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_len=4,
                      chat_template=chat_template).save_pretrained(folder)
    return folder


def force_reply(folder: Path, token: str) -> Path:
    """Rewire a saved tiny VLM so that greedy decoding gives `token` (one token of its tokenizer) at
    every step, whatever the images and the prompt: one residual dimension is held at 1 (every token
    embedding sets it, no attention or MLP writes to it), the final norm keeps only that dimension, and
    the output head reads it into `token`'s logit alone."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(folder)
    [token_id] = AutoProcessor.from_pretrained(folder).tokenizer(token, add_special_tokens=False)["input_ids"]
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    assert head.weight.data_ptr() != decoder.embed_tokens.weight.data_ptr(), "tied embeddings cannot be rewired"
    with torch.no_grad():
        decoder.embed_tokens.weight[:, 0] = 1.0
        for layer in decoder.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        decoder.norm.weight.zero_()
        decoder.norm.weight[0] = 1.0
        head.weight.zero_()
        head.weight[token_id, 0] = 1.0
    model.save_pretrained(folder)
    return folder
