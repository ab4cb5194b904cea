"""What the draft sees under draft-side visual token pruning: the picture with the patches it did not read
dimmed, and its caption (`app/pruning_panel.py` shows them after a race)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from sage_core import Media, RunHeader
from sage_core.media import thumbnail
from sage_core.models import VisualBox

DIMMED = 0.22  # brightness of a pruned patch
FRAME_HEIGHT = 150


def draft_view_image(media: Media, boxes: Sequence[VisualBox | None], kept: Sequence[int]) -> Image.Image:
    """The image, or each sampled frame side by side, with the visual tokens the draft did not read
    dimmed: each token's box (`VLM.visual_token_boxes`) is lit when the token is in `kept`."""
    media = thumbnail(media, FRAME_HEIGHT)  # shrunk first: an 8K frame is never turned to floats
    if media.kind == "image":
        assert media.image is not None
        frames = [np.asarray(media.image.convert("RGB"), dtype=np.float32)]
    else:
        assert media.frames is not None
        frames = [frame.astype(np.float32) for frame in media.frames]
    light: list[Any] = [np.ones(frame.shape[:2], dtype=np.float32) for frame in frames]
    covered = {f for box in boxes if box is not None for f in range(box[0], min(box[1], len(frames) - 1) + 1)}
    for f in covered:
        light[f][:] = DIMMED
    kept_set = set(kept)
    for index, box in enumerate(boxes):
        if box is None or index not in kept_set:
            continue
        first, last, x0, y0, x1, y1 = box
        for f in range(first, min(last, len(frames) - 1) + 1):
            height, width = light[f].shape[0], light[f].shape[1]
            light[f][round(y0 * height) : round(y1 * height), round(x0 * width) : round(x1 * width)] = 1.0
    tiles = []
    for frame, lit in zip(frames, light, strict=True):
        shown = Image.fromarray((frame * lit[..., None]).clip(0, 255).astype(np.uint8))
        width = max(1, round(shown.width * FRAME_HEIGHT / shown.height))
        tiles.append(shown.resize((width, FRAME_HEIGHT), Image.Resampling.NEAREST))
    sheet = Image.new("RGB", (sum(t.width for t in tiles) + 4 * (len(tiles) - 1), FRAME_HEIGHT), "white")
    x = 0
    for tile in tiles:
        sheet.paste(tile, (x, 0))
        x += tile.width + 4
    return sheet


def draft_view_caption(header: RunHeader | None) -> str:
    """The share of the visual tokens the draft read, from a run's header."""
    if header is None or header.kept_visual_indices is None or not header.visual_tokens:
        return "The draft reads every visual token (pruning off)."
    kept = len(header.kept_visual_indices)
    return (
        f"The draft reads {kept} of {header.visual_tokens} visual tokens ({kept / header.visual_tokens:.0%}; "
        f"pruning ratio {header.prune_ratio:g}); the target reads all of them. Dimmed: pruned patches."
    )
