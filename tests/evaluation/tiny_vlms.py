"""Tiny random vision-language models of real classes, saved to a folder so tests load them through the
production path (AutoModelForImageTextToText + AutoProcessor)."""

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
