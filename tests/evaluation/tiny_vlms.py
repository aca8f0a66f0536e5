"""Tiny random vision-language models of real classes, saved to a folder so tests load them through the
production path (AutoModelForImageTextToText + AutoProcessor).

Qwen2-VL's model loads that way, but its processor does not without torchvision (which does not work on
CPU here): Qwen2VLProcessor always has a video processor, the video processors need torchvision, and
even `video_processor=None` fails its class check. `qwen2_vl_images_only` builds the same processor
code without the video part, from the saved image processor and tokenizer."""

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


QWEN_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def save_tiny_qwen2_vl(folder: Path, *, seed: int = 0) -> Path:
    """Qwen2-VL with multimodal rotary positions, saved as a checkpoint is: model, image processor,
    tokenizer with a chat template, and the processor class that names them."""
    import json

    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    tokenizer = byte_level_tokenizer(bos_eos=False)
    tokenizer.add_special_tokens({"additional_special_tokens": QWEN_TOKENS})
    ids = dict(zip(("vision_start_token_id", "vision_end_token_id", "image_token_id", "video_token_id"),
                   tokenizer.convert_tokens_to_ids(QWEN_TOKENS)))
    torch.manual_seed(seed)
    config = Qwen2VLConfig(
        text_config={"vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
                     "rope_scaling": {"type": "mrope", "mrope_section": [2, 1, 1]}, "pad_token_id": 0,
                     "bos_token_id": 1, "eos_token_id": 2},
        vision_config={"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "mlp_ratio": 2, "patch_size": 14,
                       "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3},
        **ids)
    Qwen2VLForConditionalGeneration(config).save_pretrained(folder)
    Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=56 * 56 * 4, patch_size=14, merge_size=2,
                             temporal_patch_size=2).save_pretrained(folder)
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}{% if c['type'] == 'image' %}"
        "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    tokenizer.save_pretrained(folder)
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen2VLProcessor"}))
    return folder


def qwen2_vl_images_only(folder: Path):
    """Qwen2VLProcessor's own code over the saved image processor and tokenizer, without a video processor."""
    from transformers import AutoTokenizer, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.processing_utils import ProcessorMixin

    class ImagesOnly(Qwen2VLProcessor):
        @classmethod
        def get_attributes(cls) -> list[str]:
            return ["image_processor", "tokenizer"]

        def __init__(self, image_processor, tokenizer, chat_template=None) -> None:
            self.image_token, self.video_token = "<|image_pad|>", "<|video_pad|>"
            self.image_token_id, self.video_token_id = tokenizer.convert_tokens_to_ids([self.image_token,
                                                                                     self.video_token])
            ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template)

    tokenizer = AutoTokenizer.from_pretrained(folder)
    return ImagesOnly(Qwen2VLImageProcessorPil.from_pretrained(folder), tokenizer, tokenizer.chat_template)
