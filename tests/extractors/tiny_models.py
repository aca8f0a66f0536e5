"""Tiny random models of the production classes, saved to a folder and loaded back by the code under test.

Their outputs are random; the tests check that the production path loads and drives them, and what our
code does with whatever they produce.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import torch

WORDS = ["a", "photo", "of", "red", "blue", "green", "circle", "square", "sign", "on", "the", "with", "and",
         "what", "does", "image", "describe", "?", "locate", "objects", "category", "name", "in", ".", "detail",
         "is", "shown", "their", "descriptions", ",", "car", "dog", "small", "large", "wooden", "metal"]


def _word_level(specials: list[str], unk: str):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(dict.fromkeys(specials + WORDS))}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer, vocab


def blip(folder: Path) -> Path:
    from transformers import (BertTokenizerFast, BlipConfig, BlipForConditionalGeneration, BlipImageProcessor,
                              BlipProcessor)

    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS)}
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    processor = BlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tokenizer)
    config = BlipConfig(
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8),
        text_config=dict(vocab_size=len(vocab) + 2, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, encoder_hidden_size=32, max_position_embeddings=64,
                         bos_token_id=len(vocab), pad_token_id=0, sep_token_id=3),
        projection_dim=32)
    torch.manual_seed(0)
    BlipForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def clip(folder: Path) -> Path:
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, PreTrainedTokenizerFast

    backend, vocab = _word_level(["<|startoftext|>", "<|endoftext|>", "[UNK]"], "[UNK]")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|startoftext|>",
                                        eos_token="<|endoftext|>", pad_token="<|endoftext|>", unk_token="[UNK]")
    processor = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                                 crop_size={"height": 32, "width": 32}),
                              tokenizer=tokenizer)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=32, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8),
        projection_dim=16)
    torch.manual_seed(0)
    CLIPModel(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def florence2(folder: Path) -> Path:
    from transformers import (BartConfig, CLIPImageProcessor, Florence2Config, Florence2ForConditionalGeneration,
                              Florence2Processor, PreTrainedTokenizerFast)

    locations = [f"<loc_{i}>" for i in range(1000)]
    backend, vocab = _word_level(["<s>", "<pad>", "</s>", "<unk>", "<image>"] + locations, "<unk>")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>", unk_token="<unk>",
                                        extra_special_tokens={"image_token": "<image>"})
    tokenizer.add_special_tokens({"additional_special_tokens": locations})
    image_processor = CLIPImageProcessor(size={"height": 64, "width": 64}, crop_size={"height": 64, "width": 64},
                                         do_center_crop=False, image_seq_length=5)  # (64/32)^2 patches + 1
    processor = Florence2Processor(image_processor=image_processor, tokenizer=tokenizer,
                                   post_processor_config={"pure_text": {}, "description_with_bboxes": {}, "ocr": {}})
    config = Florence2Config(
        vision_config=dict(depths=(1, 1, 1, 1), embed_dim=(8, 16, 16, 32), num_heads=(1, 1, 1, 1),
                           num_groups=(1, 1, 1, 1), window_size=2, projection_dim=32),
        text_config=BartConfig(vocab_size=len(vocab), d_model=32, encoder_layers=1, decoder_layers=1,
                               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
                               decoder_ffn_dim=37, max_position_embeddings=64, bos_token_id=0, pad_token_id=1,
                               eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2),
        image_token_id=vocab["<image>"])
    torch.manual_seed(0)
    Florence2ForConditionalGeneration(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def sam_transformers(folder: Path) -> Path:
    from transformers import SamConfig, SamImageProcessor, SamModel, SamProcessor

    config = SamConfig(
        vision_config=dict(hidden_size=32, output_channels=16, num_hidden_layers=2, num_attention_heads=2,
                           image_size=64, patch_size=8, mlp_dim=37, global_attn_indexes=[1], window_size=4,
                           num_pos_feats=8),
        prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=8),
        mask_decoder_config=dict(hidden_size=16, mlp_dim=32, num_attention_heads=2, iou_head_hidden_dim=16))
    processor = SamProcessor(image_processor=SamImageProcessor(
        size={"longest_edge": 64}, pad_size={"height": 64, "width": 64}, mask_size={"longest_edge": 16},
        mask_pad_size={"height": 16, "width": 16}))
    torch.manual_seed(0)
    SamModel(config).eval().save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


# --- segment-anything -------------------------------------------------------------------------------
# segment-anything imports four torchvision functions; torchvision has no working CPU build here, so the
# tests provide pure-torch stand-ins as a `torchvision` module (test scaffolding only).

def _box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _nms(boxes, scores, threshold):
    order = scores.argsort(descending=True)
    keep = []
    while order.numel():
        first = order[0]
        keep.append(int(first))
        if order.numel() == 1:
            break
        rest = boxes[order[1:]]
        lt = torch.maximum(boxes[first, :2], rest[:, :2])
        rb = torch.minimum(boxes[first, 2:], rest[:, 2:])
        inter = (rb - lt).clamp(min=0).prod(dim=1)
        iou = inter / (_box_area(boxes[first:first + 1]) + _box_area(rest) - inter)
        order = order[1:][iou <= threshold]
    return torch.tensor(keep, dtype=torch.long)


def _batched_nms(boxes, scores, idxs, iou_threshold):
    offsets = idxs.to(boxes) * (boxes.max() + 1)
    return _nms(boxes + offsets[:, None], scores, iou_threshold)


def _resize(image, size, **_):
    import numpy as np
    from PIL import Image

    if isinstance(image, torch.Tensor):
        return torch.nn.functional.interpolate(image, size=tuple(size), mode="bilinear", align_corners=False)
    return Image.fromarray(np.asarray(image)).resize((size[1], size[0]), Image.BILINEAR)


def _to_pil_image(array):
    from PIL import Image

    return Image.fromarray(array)


def provide_torchvision(monkeypatch) -> None:
    """Put a minimal `torchvision` (the four functions segment-anything imports) into sys.modules."""
    root = types.ModuleType("torchvision")
    ops, boxes = types.ModuleType("torchvision.ops"), types.ModuleType("torchvision.ops.boxes")
    transforms = types.ModuleType("torchvision.transforms")
    functional = types.ModuleType("torchvision.transforms.functional")
    boxes.batched_nms, boxes.box_area = _batched_nms, _box_area
    functional.resize, functional.to_pil_image = _resize, _to_pil_image
    root.ops, ops.boxes, root.transforms, transforms.functional = ops, boxes, transforms, functional
    for name, module in {"torchvision": root, "torchvision.ops": ops, "torchvision.ops.boxes": boxes,
                         "torchvision.transforms": transforms, "torchvision.transforms.functional": functional}.items():
        monkeypatch.setitem(sys.modules, name, module)
    for name in [n for n in sys.modules if n.startswith("segment_anything")]:
        monkeypatch.delitem(sys.modules, name)


def tiny_sam(image_size: int = 64):
    """A segment-anything `Sam` built from its modeling parts, small enough for a CPU test."""
    from functools import partial

    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    embed, patch = 16, 8
    grid = image_size // patch
    torch.manual_seed(0)
    return Sam(
        image_encoder=ImageEncoderViT(img_size=image_size, patch_size=patch, embed_dim=32, depth=1, num_heads=2,
                                      out_chans=embed, norm_layer=partial(torch.nn.LayerNorm, eps=1e-6),
                                      use_rel_pos=True, window_size=4, global_attn_indexes=[0]),
        prompt_encoder=PromptEncoder(embed_dim=embed, image_embedding_size=(grid, grid),
                                     input_image_size=(image_size, image_size), mask_in_chans=4),
        mask_decoder=MaskDecoder(num_multimask_outputs=3, transformer=TwoWayTransformer(
            depth=1, embedding_dim=embed, mlp_dim=32, num_heads=2), transformer_dim=embed,
            iou_head_depth=2, iou_head_hidden_dim=16),
        pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375]).eval()
