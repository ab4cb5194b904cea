"""InternVL: a Qwen2 (or other) text model, images as up to `max_patches` tiles and a thumbnail, each
tile `image_seq_length` `<IMG_CONTEXT>` tokens between `<img>` and `</img>`; a video as one tile per frame."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .family import Family, VisualBox, grid_box


@dataclass(frozen=True)
class InternVL(Family):
    """InternVL 3 / 3.5 in transformers' own classes."""

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        """A video's frames, or an image's thumbnail (the last tile) are placed; the other tiles are not."""
        size = int(config.image_seq_length)
        side = math.isqrt(size)
        tiles = count // size
        ids = inputs["input_ids"][0].tolist()
        video = "Frame1:" in processor.tokenizer.decode(ids[: ids.index(config.image_token_id)])
        boxes: list[VisualBox | None] = []
        for tile in range(tiles):
            frame = tile if video else (0 if tile == tiles - 1 else -1)
            boxes += [grid_box(frame, frame, cell, side, side) if frame >= 0 else None for cell in range(size)]
        return boxes + [None] * (count - len(boxes))


INTERNVL = InternVL("internvl", "InternVLForConditionalGeneration")
