"""Draw your own: a sketch pad in the world's colours, whose drawing becomes the race's picture.

The pad hands over its strokes on a transparent canvas; `sketch_file` composites them on white
(the built-in pair's canvases are light) and saves a PNG, which the page puts in the image input,
so a race on a drawing is a race on a picture like any other.

What arrives is checked before anything is decoded or saved (the event takes a visitor's data
outside the queue): a picture more than `MAX_SCALE` times the pad's size on a side is refused in
one sentence from its header alone; a smaller one larger than the pad (a high-density screen) is
shrunk to the pad's size; at most `DECODING` drawings are decoded at once; each is saved as a
palette PNG of the pad's size (at most ~130 kB, noise included), and removed after `MAX_AGE`.
"""

from __future__ import annotations

import io
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import gradio as gr
import numpy as np
from PIL import Image

from sage_world.scenes import COLOURS
from sage_world.world import on_white

from .gradio_patches import around_preprocess
from .inputs import remove_older
from .notes import INFO_MARK
from .render import error_html, status_html

SKETCH_DIR = Path(tempfile.gettempdir()) / "sage-app-sketches"
#: The canvas the visitor draws on (px), and the brush: thick enough to survive the pair's 128 px budget.
CANVAS = (480, 360)
BRUSH_SIZE = 14
SKETCH_PROMPT = "describe the image in detail."
#: Drawings saved for races are removed after this many seconds.
MAX_AGE = 3600.0
#: A drawing may be at most this many times the pad's size on a side (a screen's pixel density); larger is refused.
MAX_SCALE = 4
#: Drawings decoded at once, in the whole server (the others wait their turn).
DECODING = threading.BoundedSemaphore(2)
#: A saved drawing's colours at most (the pad's six and white, plus their edges; exact for the six).
PALETTE_COLOURS = 64
TOO_LARGE = (
    "the drawing is {w} × {h} pixels, larger than the pad ({cw} × {ch}) allows: draw on the pad, or upload "
    "the picture in the Image tab"
)


class TooLarge(ValueError):
    """What the pad sent is larger than any screen's pad could be."""


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def sketch_pad() -> gr.Sketchpad:
    """The pad: a white canvas, a brush in the six colours of the built-in world (red first)."""
    colours: list[str | tuple[str, float]] = [hex_colour(rgb) for rgb in COLOURS.values()]
    pad = gr.Sketchpad(
        label="Draw circles, squares, triangles or crosses",
        type="pil",
        image_mode="RGBA",
        canvas_size=CANVAS,
        height=300,
        elem_id="sketch",
        layers=False,
        transforms=(),
        brush=gr.Brush(
            default_size=BRUSH_SIZE, colors=colours, default_color=hex_colour(COLOURS["red"]), color_mode="fixed"
        ),
    )
    return checked(pad)


def checked(pad: gr.Sketchpad) -> gr.Sketchpad:
    """The pad, its pictures' sizes read from their headers before Gradio decodes them: a picture too large
    becomes a `TooLarge` for `use_sketch` to say; the decoding itself waits for one of `DECODING`."""

    def preprocess(stock: Any, payload: Any) -> Any:
        try:
            for picture in sent_pictures(pad, payload):
                check_size(picture)
        except TooLarge as error:
            return error
        with DECODING:
            return stock(payload)

    return around_preprocess(pad, preprocess)


def sent_pictures(pad: gr.Sketchpad, payload: Any) -> list[Any]:
    """The files or bytes of what the pad sent (its background, layers and composite), none decoded."""
    if payload is None:
        return []
    sent = pad.blob_storage.get(payload.id) if getattr(payload, "id", None) is not None else payload
    if sent is None:
        return []
    return [p for p in (sent.background, *(sent.layers or []), sent.composite) if p is not None]


def check_size(picture: Any) -> None:
    """Refuse a picture larger than `MAX_SCALE` pads on a side, from its header (nothing decoded)."""
    source = getattr(picture, "path", None) or io.BytesIO(bytes(picture))
    with Image.open(source) as opened:
        width, height = opened.size
    if width > MAX_SCALE * CANVAS[0] or height > MAX_SCALE * CANVAS[1]:
        raise TooLarge(TOO_LARGE.format(w=width, h=height, cw=CANVAS[0], ch=CANVAS[1]))


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
    if picture.width > CANVAS[0] or picture.height > CANVAS[1]:
        picture = picture.resize(CANVAS, Image.Resampling.BILINEAR)  # a high-density screen's pad
    return on_white(picture)


def sketch_file(value: Any, folder: Path = SKETCH_DIR) -> str | None:
    """The drawing saved as a PNG for the race (None when nothing is drawn)."""
    picture = drawn_picture(value)
    if picture is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    remove_older(folder, "sketch-*.png", MAX_AGE)
    path = folder / f"sketch-{uuid.uuid4().hex[:10]}.png"
    # a palette of the drawing's most used colours: the pad's own are kept exact, the file stays small
    picture.quantize(PALETTE_COLOURS, Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path)
    return str(path)


def forget_sketch(path: Any, folder: Path = SKETCH_DIR) -> None:
    """Remove a visitor's saved drawing (their state's `delete_callback`, and when they draw the next one);
    only a file of the drawings' folder is ever removed."""
    if isinstance(path, str) and Path(path).parent == folder:
        Path(path).unlink(missing_ok=True)


def use_sketch(value: Any, prompt: Any, previous: Any = None) -> tuple[Any, Any, Any, Any, Any]:
    """The image input, the video input, the prompt, the status and the visitor's saved drawing after a
    stroke: the drawing, no clip, a description asked for when the prompt is empty, and the status
    unchanged (a drawing too large leaves the inputs as they were and says why; a cleared pad clears the
    picture and says the pad is empty). The visitor's previous
    drawing is removed, so a visitor holds one file at most, and it goes with their state."""
    if isinstance(value, TooLarge):
        return gr.update(), gr.update(), gr.update(), error_html(str(value)), previous
    path = sketch_file(value)
    forget_sketch(previous)
    if path is None:  # cleared: no picture until the next stroke, and the page says so
        return None, None, prompt, status_html(CLEARED_PAD, "info"), None
    wanted = prompt if isinstance(prompt, str) and prompt.strip() else SKETCH_PROMPT
    return path, None, wanted, gr.update(), path


#: What the page says of an empty pad when the Draw tab opens: Start races the picture the image input holds.
EMPTY_PAD = (
    f"{INFO_MARK}The pad is empty: draw on it to race your drawing. Until you do, Start races the picture in the "
    "Image tab."
)
#: ... and once the pad was cleared: the picture goes with it.
CLEARED_PAD = (
    f"{INFO_MARK}The pad is empty: draw on it to race your drawing (there is no picture to race until you do)."
)


def empty_pad_note(value: Any) -> Any:
    """The Draw tab opened: the status says so when the pad is empty (else it is left as it is)."""
    if isinstance(value, TooLarge) or drawn_picture(value) is not None:
        return gr.skip()
    return status_html(EMPTY_PAD, "info")
