"""Draw your own: a sketch pad in the world's colours, whose drawing becomes the race's picture.

The pad hands over its strokes on a transparent canvas; `sketch_file` composites them on white
(the built-in pair's canvases are light) and saves a PNG, which the page puts in the image input,
so a race on a drawing is a race on a picture like any other.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr
import numpy as np
from PIL import Image

from sage_core.builtin.scenes import COLOURS
from sage_core.builtin.world import on_white

from .inputs import remove_older

if TYPE_CHECKING:
    from .page import Page

SKETCH_DIR = Path(tempfile.gettempdir()) / "sage-app-sketches"
#: The canvas the visitor draws on (px), and the brush: thick enough to survive the pair's 128 px budget.
CANVAS = (480, 360)
BRUSH_SIZE = 14
SKETCH_PROMPT = "describe the image in detail."
#: Drawings saved for races are removed after this many seconds.
MAX_AGE = 3600.0


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def sketch_pad() -> gr.Sketchpad:
    """The pad: a white canvas, a brush in the six colours of the built-in world (red first)."""
    colours: list[str | tuple[str, float]] = [hex_colour(rgb) for rgb in COLOURS.values()]
    return gr.Sketchpad(
        label="Draw circles, squares, triangles or crosses", type="pil",
        image_mode="RGBA", canvas_size=CANVAS, height=300, elem_id="sketch", layers=False, transforms=(),
        brush=gr.Brush(default_size=BRUSH_SIZE, colors=colours, default_color=hex_colour(COLOURS["red"]),
                       color_mode="fixed"),
    )  # fmt: skip


def drawn_picture(value: Any) -> Image.Image | None:
    """The drawing on white (None when nothing is drawn): the editor's composite, or its layers."""
    if not isinstance(value, dict):
        return None
    picture = value.get("composite")
    if picture is None and value.get("layers"):
        picture = value["layers"][0]
    if isinstance(picture, np.ndarray):
        picture = Image.fromarray(picture)
    if not isinstance(picture, Image.Image):
        return None
    if picture.mode in ("RGBA", "LA") and not picture.getchannel("A").getbbox():
        return None  # a transparent canvas: nothing drawn yet
    return on_white(picture)


def sketch_file(value: Any, folder: Path = SKETCH_DIR) -> str | None:
    """The drawing saved as a PNG for the race (None when nothing is drawn)."""
    picture = drawn_picture(value)
    if picture is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    remove_older(folder, "sketch-*.png", MAX_AGE)
    path = folder / f"sketch-{uuid.uuid4().hex[:10]}.png"
    picture.save(path)
    return str(path)


def use_sketch(value: Any, prompt: Any) -> tuple[Any, Any, Any]:
    """The image input, the video input and the prompt after a stroke: the drawing, no clip, and
    a description asked for when the prompt is empty."""
    path = sketch_file(value)
    wanted = prompt if isinstance(prompt, str) and prompt.strip() else (SKETCH_PROMPT if path else prompt)
    return path, None, wanted


def wire_sketch(page: Page, sketch: gr.Sketchpad) -> None:
    """Each change of the drawing becomes the race's picture."""
    sketch.change(use_sketch, [sketch, page.prompt], [page.image, page.video, page.prompt], queue=False,
                  api_visibility="private")  # fmt: skip
