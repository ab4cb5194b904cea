"""Gemma 3: sliding-window layers between full ones, images only (a pan-and-scan crop set or one
image, each `mm_tokens_per_image` soft tokens between `<start_of_image>` and `<end_of_image>`).

The sliding-window layers keep every cache row (a window's own layer drops old rows, which a
tree's scratch and its commit cannot live with); the tree masks give each node only the entries
inside its window by position, as the model's own decoding does (`Family.layer_masks`). The
prefill is transformers' own, so the bidirectional attention inside an image stays what it is."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ModelLoadError
from .family import Family, VisualBox, grid_box


@dataclass(frozen=True)
class Gemma3(Family):
    video: bool = False
    windows_by_mask: bool = True

    def check_config(self, config: Any, name: str) -> None:
        layer_types = getattr(config.get_text_config(), "layer_types", None) or ()
        other = sorted(set(layer_types) - {"full_attention", "sliding_attention"})
        if other:
            raise ModelLoadError(f"{name}: {', '.join(other)} layers are not supported")

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        """Each image's pooled grid (the first is the whole image; pan-and-scan crops are not placed)."""
        size = int(config.mm_tokens_per_image)
        side = math.isqrt(size)
        boxes: list[VisualBox | None] = [grid_box(0, 0, cell, side, side) for cell in range(min(size, count))]
        return boxes + [None] * (count - len(boxes))


GEMMA3 = Gemma3("gemma3", "Gemma3ForConditionalGeneration")


@dataclass(frozen=True)
class Gemma4(Gemma3):
    """Gemma 4: Gemma 3's sliding windows, plus shared-KV layers (the last layers read the cache of an
    earlier layer of their kind: their cache layers are placeholders, left as transformers makes them),
    per-layer inputs (one more embedding per token and layer, cut with the prompt when the draft is
    pruned: visual.py), and videos."""

    video: bool = True

    def scored_rows(self, config: Any, trailing: int) -> int:
        """The text after the last visual token: the shared-KV layers compute only the `logits_to_keep` last
        rows of a prompt, and the pruning scores read those layers' queries of all that text."""
        shared = int(getattr(config.get_text_config(), "num_kv_shared_layers", 0) or 0)
        return max(1, trailing) if shared else 1

    def visual_boxes(
        self, config: Any, inputs: Mapping[str, Any], count: int, processor: Any
    ) -> list[VisualBox | None]:
        """The pooled patch grid of the image (or of each frame), read off the patches' positions."""
        key = "video_position_ids" if "video_position_ids" in inputs else "image_position_ids"
        if key not in inputs:
            return [None] * count
        positions = inputs[key].reshape(-1, inputs[key].shape[-2], 2)  # (images or frames, patches, 2)
        pool = int(config.vision_config.pooling_kernel_size)
        boxes: list[VisualBox | None] = []
        for frame, patches in enumerate(positions):
            valid = patches[(patches >= 0).all(-1)]
            cols, rows = (int(valid[:, axis].max()) // pool + 1 for axis in (0, 1))
            boxes += [grid_box(frame, frame, cell, rows, cols) for cell in range(rows * cols)]
        return boxes[:count] if len(boxes) >= count else [None] * count


GEMMA4 = Gemma4("gemma4", "Gemma4ForConditionalGeneration")
