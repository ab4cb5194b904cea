"""The LLaVA families: 1-D positions, `<image>` / `<video>` tokens expanded by the processor."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .family import Family, VisualBox, grid_box


@dataclass(frozen=True)
class LlavaOnevision(Family):
    """LLaVA-OneVision: anyres crops for an image (only the base grid is placed), pooled frames for a video."""

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        vision = config.vision_config
        side = vision.image_size // vision.patch_size
        if "pixel_values_videos" in inputs:  # per frame a pooled grid, then one newline token
            pooled = math.ceil(side / 2)
            frames = (count - 1) // (pooled * pooled)
            boxes: list[VisualBox | None] = [
                grid_box(frame, frame, index, pooled, pooled)
                for frame in range(frames)
                for index in range(pooled * pooled)
            ]
            return boxes + [None] * (count - len(boxes))
        base = [grid_box(0, 0, index, side, side) for index in range(min(count, side * side))]
        return [*base, *([None] * (count - len(base)))]


LLAVA_ONEVISION = LlavaOnevision("llava_onevision", "LlavaOnevisionForConditionalGeneration")


def _base_grid(config: Any, count: int) -> list[VisualBox | None]:
    """The vision tower's base grid first (one crop of the whole image), the rest without a place."""
    vision = config.vision_config
    side = vision.image_size // vision.patch_size
    base = [grid_box(0, 0, index, side, side) for index in range(min(count, side * side))]
    return [*base, *([None] * (count - len(base)))]


@dataclass(frozen=True)
class Llava(Family):
    """LLaVA 1.5: one CLIP crop, one `<image>` token per patch; images only."""

    video: bool = False

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        return _base_grid(config, count)


@dataclass(frozen=True)
class LlavaNext(Family):
    """LLaVA-NeXT (1.6) and NeXT-Video: anyres (the base grid first, then the crops with row ends);
    NeXT-Video's frames pooled by `spatial_pool_stride`, one grid per frame."""

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        if "pixel_values_videos" not in inputs:
            return _base_grid(config, count)
        vision = config.vision_config
        pooled = math.ceil(vision.image_size // vision.patch_size / config.spatial_pool_stride)
        frames = count // (pooled * pooled)
        boxes: list[VisualBox | None] = [
            grid_box(frame, frame, index, pooled, pooled) for frame in range(frames) for index in range(pooled * pooled)
        ]
        return boxes[:count] + [None] * (count - len(boxes))


@dataclass(frozen=True)
class Mistral3(Family):
    """Mistral 3 (Pixtral tower): merged patches row by row, `[IMG_BREAK]` after each row and `[IMG_END]`
    (only `[IMG]` tokens are visual); images only."""

    video: bool = False

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        height, width = (int(v) for v in inputs["image_sizes"][0])
        step = config.vision_config.patch_size * config.spatial_merge_size
        rows, cols = max(1, height // step), max(1, width // step)
        boxes: list[VisualBox | None] = [grid_box(0, 0, index, rows, cols) for index in range(rows * cols)]
        return boxes[:count] + [None] * (count - len(boxes))


LLAVA = Llava("llava", "LlavaForConditionalGeneration")
LLAVA_NEXT = LlavaNext("llava_next", "LlavaNextForConditionalGeneration", video=False)
LLAVA_NEXT_VIDEO = LlavaNext("llava_next_video", "LlavaNextVideoForConditionalGeneration")
MISTRAL3 = Mistral3("mistral3", "Mistral3ForConditionalGeneration")
