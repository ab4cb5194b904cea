"""Is a picture from the built-in pair's world? An image statistic, measured.

The built-in pair knows only its synthetic world (`scenes`): flat shapes and bars in six colours
on a white, grey or cream canvas, dark text, grey grid lines. Nearly every pixel of such a picture
(and of a visitor's drawing in those colours on white) is close to one of those few colours; a
photo's are not. :func:`world_share` is the share of pixels within ``TOLERANCE`` (RGB distance)
of the world's palette, on the picture reduced to 128 px a side; :func:`outside_world` says a
picture is outside the world below ``IN_WORLD_SHARE``.

Measured (2026-12-01): 600 fresh scenes (200 each drawn as in training, at shifted scales and
canvas sizes, and by hand) 0.927 at least; the shipped examples 0.964 to 1.0; the photos that
ship with gradio (bus, cheetah, lion, tower, groot) 0.035 to 0.528, its logos 0.572 to 0.921.
The target's own entropy would say the same more slowly (a prefill and a few steps): the
statistic needs no model.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from sage_core.media import Media

from .scenes import BACKGROUNDS, COLOURS

#: Every colour the world draws with: the shapes' and bars', the canvases', the texts', the grid's.
TEXT_COLOURS = ((0, 0, 0), (40, 40, 90), (90, 30, 30))
GRID_COLOUR = (200, 200, 200)
PALETTE = np.array([*COLOURS.values(), *BACKGROUNDS.values(), *TEXT_COLOURS, GRID_COLOUR], dtype=np.float32)
TOLERANCE = 48.0
IN_WORLD_SHARE = 0.85
SIDE = 128


def on_white(image: Image.Image) -> Image.Image:
    """An RGB picture; a transparent one composited on white (a sketch pad's strokes)."""
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def world_share(picture: Image.Image | np.ndarray) -> float:
    """The share of the picture's pixels close to a colour of the world (0 to 1)."""
    image = Image.fromarray(picture) if isinstance(picture, np.ndarray) else picture
    image = on_white(image)
    image.thumbnail((SIDE, SIDE), Image.Resampling.BOX)
    pixels = np.asarray(image, dtype=np.float32).reshape(-1, 1, 3)
    distance = np.sqrt(((pixels - PALETTE[None]) ** 2).sum(-1)).min(axis=1)
    return float((distance <= TOLERANCE).mean())


def outside_world(media: Media) -> bool:
    """True when the picture (or, for a clip, its frames on average: up to 4 of them) is not from
    the built-in pair's world."""
    if media.kind == "image" and media.image is not None:
        return world_share(media.image) < IN_WORLD_SHARE
    if media.frames is not None and len(media.frames):
        picks = np.linspace(0, len(media.frames) - 1, min(4, len(media.frames))).round().astype(int)
        return float(np.mean([world_share(media.frames[i]) for i in picks])) < IN_WORLD_SHARE
    return False
