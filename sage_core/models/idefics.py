"""Idefics3 and SmolVLM: a LLaMA text model behind `model.model.text_model`, images split into crops
(each `image_seq_len` `<image>` tokens after a `<row_i_col_j>` tag) followed by the whole image after
`<global-img>`; SmolVLM reads a video as one global image per frame, with timestamps in the text."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .family import Family, VisualBox, grid_box


def seq_len_of(config: Any) -> int:
    """The `<image>` tokens of one crop: the patch grid after the pixel shuffle by `scale_factor`."""
    vision = config.vision_config
    return (vision.image_size // vision.patch_size) ** 2 // config.scale_factor**2


@dataclass(frozen=True)
class Idefics3(Family):
    """Idefics3 (images only) and SmolVLM (images and videos)."""

    video: bool = False

    def language_model(self, model: Any) -> Any:
        return model.model.text_model

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        """The global images are placed (one per frame of a video); the crops are not."""
        size = seq_len_of(config)
        side = math.isqrt(size)
        tag = getattr(processor, "global_image_token", None) or getattr(processor, "global_image_tag", "<global-img>")
        global_id = processor.tokenizer.convert_tokens_to_ids(tag)
        ids = inputs["input_ids"][0].tolist()
        visual = self.visual_token_ids(config)
        boxes: list[VisualBox | None] = []
        frame = 0
        for index, token in enumerate(ids):
            if token not in visual:
                continue
            if (len(boxes)) % size == 0:  # the first token of a crop: the tag before it says which
                is_global = ids[index - 1] == global_id
                placed_frame = frame if is_global else -1
                frame += int(is_global)
            cell = len(boxes) % size
            boxes.append(grid_box(placed_frame, placed_frame, cell, side, side) if placed_frame >= 0 else None)
        return boxes[:count]


IDEFICS3 = Idefics3("idefics3", "Idefics3ForConditionalGeneration")
SMOLVLM = Idefics3("smolvlm", "SmolVLMForConditionalGeneration", video=True, videos_per_text=True)
