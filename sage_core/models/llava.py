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

    def visual_boxes(self, config: Any, inputs: Mapping[str, Any], count: int) -> list[VisualBox | None]:
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
