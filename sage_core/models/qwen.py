"""The Qwen-VL families (and GLM-4.1V / 4.5V, built the same way): M-RoPE positions (the prefill's
`rope_deltas`), merged patch grids, and
video frames grouped by the temporal patch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .family import Family, VisualBox, grid_box

#: The Qwen-VL chat's special tokens, in the order the built-in pair's tokenizer and the test kit's tiny
#: Qwen models give them ids: pad, the turn's start and end (end: eos), the media's brackets and pads.
QWEN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
)


@dataclass(frozen=True)
class QwenVL(Family):
    """Qwen2-VL, Qwen2.5-VL, Qwen3-VL: M-RoPE, `image_grid_thw` / `video_grid_thw`."""

    rope_deltas: bool = True

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        vision = config.vision_config
        merge = vision.spatial_merge_size
        video = "video_grid_thw" in inputs
        time, height, width = (int(v) for v in inputs["video_grid_thw" if video else "image_grid_thw"][0])
        rows, cols = height // merge, width // merge
        step = vision.temporal_patch_size if video else 1
        placed: list[VisualBox | None] = [
            grid_box(group * step, group * step + step - 1, index, rows, cols)
            for group in range(time)
            for index in range(rows * cols)
        ]
        return placed[:count]


QWEN2_VL = QwenVL("qwen2_vl", "Qwen2VLForConditionalGeneration")
QWEN2_5_VL = QwenVL("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration")
QWEN3_VL = QwenVL("qwen3_vl", "Qwen3VLForConditionalGeneration")
# Experts in the text layers: each token (each tree node) is routed on its own hidden state, top-k of a
# softmax with no capacity limit, so a node's experts never depend on the other nodes of its tree.
QWEN3_VL_MOE = QwenVL("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration")


# GLM-4.1V / GLM-4.5V: Qwen-VL's grids and M-RoPE (on part of each head); a video's frames are images
# (`<|image|>` tokens, told apart by `mm_token_type_ids`) between `<|begin_of_video|>` and `<|end_of_video|>`.
@dataclass(frozen=True)
class Glm4v(QwenVL):
    """GLM-4.1V: RoPE on the first part of each head (`partial_rotary_factor`), its pairs interleaved."""

    def rotary(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        width = cos.shape[-1]
        part, rest = x[..., :width], x[..., width:]
        turned = torch.stack((-part[..., 1::2], part[..., 0::2]), dim=-1).flatten(-2)
        return torch.cat((part * cos + turned * sin, rest), dim=-1)


GLM4V = Glm4v("glm4v", "Glm4vForConditionalGeneration")
GLM46V = Glm4v("glm46v", "Glm46VForConditionalGeneration")  # GLM-4.6V: GLM-4.1V's text and vision models
