"""The Draw tab's drawing and the landing replay, without a browser."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from app import landing, sketch
from app.race import load_race
from sage_core.builtin.scenes import COLOURS


def strokes() -> Image.Image:
    """A red ring on a transparent canvas, as the sketch pad hands it over."""
    canvas = Image.new("RGBA", sketch.CANVAS, (0, 0, 0, 0))
    ImageDraw.Draw(canvas).ellipse((150, 100, 280, 230), outline=(*COLOURS["red"], 255), width=14)
    return canvas


def test_a_drawing_is_composited_on_white_and_saved_for_the_race(tmp_path):
    path = sketch.sketch_file({"background": None, "layers": [], "composite": strokes()}, tmp_path)
    assert path is not None
    picture = Image.open(path)
    assert picture.mode == "RGB" and picture.size == sketch.CANVAS
    assert picture.getpixel((5, 5)) == (255, 255, 255)  # transparent became white, not black
    assert picture.getpixel((215, 100 + 7)) == COLOURS["red"]


def test_nothing_drawn_is_no_picture_and_a_prompt_is_asked_for_only_when_empty(tmp_path):
    empty = Image.new("RGBA", sketch.CANVAS, (0, 0, 0, 0))
    assert sketch.sketch_file({"composite": empty, "layers": []}, tmp_path) is None
    assert sketch.sketch_file(None, tmp_path) is None
    as_array = {"composite": np.asarray(strokes()), "layers": []}
    image, video, prompt = sketch.use_sketch(as_array, "")
    assert image is not None and video is None and prompt == sketch.SKETCH_PROMPT
    assert sketch.use_sketch(as_array, "how many shapes are there?")[2] == "how many shapes are there?"
    assert sketch.use_sketch({"composite": empty}, "")[:2] == (None, None)


def test_the_brush_offers_the_world_colours():
    pad = sketch.sketch_pad()
    colours = {c.lower() for c in pad.brush.colors}
    assert colours == {sketch.hex_colour(rgb) for rgb in COLOURS.values()}
    assert pad.brush.default_color == sketch.hex_colour(COLOURS["red"])


def test_the_landing_trace_is_a_small_long_race_of_the_built_in_pair():
    race = load_race(landing.LANDING_TRACE)
    assert landing.LANDING_TRACE.stat().st_size < 200_000
    assert {"sage", "static"} <= set(race.methods)
    sage = race.lane("sage")
    assert sage is not None and sage.header is not None and sage.header.target == "builtin"
    assert len(sage.records) >= 6 and len(sage.token_ids) >= 40  # a long answer, many rounds
    texts = {lane.text for lane in race.lanes}
    assert len(texts) == 1  # lossless, as recorded
