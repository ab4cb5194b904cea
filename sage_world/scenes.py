"""Synthetic visual question answering data for the built-in model pair (generation 2).

Everything here is deterministic given a :class:`random.Random` instance, so a seed
reproduces a data set exactly.

The world:

* **Shape scenes**: 1-6 objects on a light canvas of varied size and aspect ratio (white,
  grey or cream). Each object has one of 6 colours (unique within a scene), one of 4 shapes,
  a size (``small`` or ``large``, relative to its cell) and a place: the canvas is split into a
  3x3 grid (``top left`` ... ``bottom right``), each object sits in its own cell at a random
  offset and scale, so the model has to learn shapes, not slots.
* **Bar charts**: 3-6 bars of distinct colours with values 1-5 on grid lines.
* **Text**: a rendered word or a number (10-999) at a random size and place.
* **Video clips** of 8-16 frames: a shape moves, grows or shrinks, appears, disappears or
  changes colour.

Questions (``Example.kind``):

``shape``     "what shape is the red object?"              -> "the red object is a circle."
``colour``    "what colour is the shape in the top left?"  -> "the shape in the top left is red."
``count``     "how many shapes are there?"                 -> "there are four shapes."
``position``  "where is the red circle?"                   -> "the red circle is in the top left."
``size``      "is the red circle large or small?"          -> "the red circle is large."
``describe``  "describe the image in detail."  -> every object with its size, colour, shape and
              place in reading order, then the count (30-90 tokens). Graded per object: its colour
              and shape in the right place is one fact, its size another; the count is a third
``bar``       highest / lowest bar, a bar's value, or how many bars
``chart``     "describe the chart."  -> every bar's value, then the highest and the lowest
``text``      "what does it say?"                          -> "it says 42."
``video``     "what happens in the video?"                 -> "the red circle moves to the right."
``narrate``   "describe the video."  -> what is there at first, what happens, what is there at
              the end
``row``       "read the shapes."  -> two rows of 4-6 small shapes of one colour each, read left to
              right: "the red shapes in the top read : circle cross cross square triangle." Not in
              ``KINDS`` (the fresh-scene checks stay as they were); training draws it with ``--rows``.
              Its answers are *stretches*: 4-6 shape words in a row, every one of which needs
              looking, between long sentences of template the draft predicts word for word.

Long answers mix words the draft is sure of (the template) with words it is not (colours,
places, counts, values): that is what makes its entropy rise and fall within one answer.

:func:`fact_score` grades an answer fact by fact (each fact is a phrase that must appear;
short answers are one fact, which also fails on a contradicting word); :func:`grade` is
"every fact right".  :class:`Style` holds the drawing ranges; :data:`SHIFTED` draws at
scales, offsets and canvas sizes outside the training ranges (the robustness check).
"""

from __future__ import annotations

import io
import itertools
import math
import os
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from PIL import Image, ImageDraw, ImageFont

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 200, 20),
    "purple": (140, 50, 190),
    "orange": (250, 130, 10),
}
SHAPES = ("circle", "square", "triangle", "cross")
SIZES = ("small", "large")
BACKGROUNDS: dict[str, tuple[int, int, int]] = {
    "white": (255, 255, 255),
    "grey": (225, 225, 225),
    "cream": (250, 243, 220),
}
#: The 3x3 grid, row by row: the reading order of a description.
PLACES = (
    "top left",
    "top middle",
    "top right",
    "middle left",
    "center",
    "middle right",
    "bottom left",
    "bottom middle",
    "bottom right",
)
WORDS = ("cat", "dog", "sun", "tree", "bird", "fish", "car", "book", "moon", "star", "cake", "ship", "hat", "box")
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
#: How a description names the canvas (``aspect_name``).
ASPECTS = ("wide", "tall", "square")
DIRECTIONS = {(0, 1): "right", (0, -1): "left", (1, 0): "down", (-1, 0): "up"}
KINDS = (
    "shape",
    "colour",
    "count",
    "position",
    "size",
    "describe",
    "bar",
    "chart",
    "text",
    "video",
    "narrate",
)
#: The kinds whose answers are long (graded fact by fact).
LONG_KINDS = ("describe", "chart", "narrate")
#: Two rows of small shapes read left to right (``row_scene``): a long answer whose hard words come in
#: stretches. Kept out of ``KINDS`` and ``LONG_KINDS`` so that every seeded set of examples made before
#: it stays as it was.
ROW_KIND = "row"
#: Shapes per row (inclusive) and the canvas's aspect ratios (width / height) of a row picture.
ROW_LENGTH = (4, 6)
ROW_ASPECTS = (1.5, 1.75, 2.0)
VIDEO_KINDS = ("video", "narrate")
VIDEO_FPS = 4.0
MAX_OBJECTS = 6
#: The words that carry a fact (the rest of an answer is template).
CONTENT_WORDS = frozenset(
    {*COLOURS, *SHAPES, *SIZES, *BACKGROUNDS, *WORDS, *NUMBER_WORDS.values(), *DIRECTIONS.values()}
    | {w for p in PLACES for w in p.split()}
    | {*ASPECTS, "grows", "shrinks", "appears", "disappears", "turns"}
)


@dataclass(frozen=True)
class Style:
    """Drawing ranges: canvas sides (px), aspect ratios (width / height), object size as a share
    of its grid cell (an object sits anywhere in its cell that it fits), frames per clip, and the
    side of a clip's square frames (px)."""

    canvas: tuple[int, int] = (112, 240)
    aspects: tuple[float, ...] = (1.0, 1.0, 4 / 3, 3 / 4, 3 / 2, 2 / 3)
    small: tuple[float, float] = (0.36, 0.5)
    large: tuple[float, float] = (0.72, 0.9)
    frames: tuple[int, int] = (8, 16)
    clip_side: tuple[int, int] = (112, 176)
    #: Shapes drawn as by hand (``_draw_hand``): wobbly strokes of varied thickness, outlines
    #: with or without fill, as a visitor draws them with a mouse.
    hand: bool = False


#: The training ranges.
DEFAULT = Style()
#: Other scales, positions and canvas sizes: canvases much smaller or larger and more elongated,
#: objects at the edges of (and outside) the trained size ranges.
SHIFTED = Style(
    canvas=(72, 400),
    aspects=(1.0, 16 / 9, 9 / 16, 2.0, 0.5),
    small=(0.3, 0.4),
    large=(0.84, 0.96),
    frames=(9, 20),
    clip_side=(80, 260),
)
#: The training ranges with shapes drawn as by hand (a visitor's sketch).
HAND_DRAWN = Style(hand=True)

# --------------------------------------------------------------------------- templates
SHAPE_Q = ("what shape is the {colour} object?", "which shape is {colour}?")
SHAPE_A = "the {colour} object is a {shape}."
COLOUR_Q = ("what colour is the shape in the {place}?", "what color is the shape in the {place}?")
COLOUR_A = "the shape in the {place} is {colour}."
COUNT_Q = ("how many shapes are there?", "how many objects can you see?", "count the shapes.")
COUNT_A1 = "there is one shape."
COUNT_AN = "there are {n} shapes."
POSITION_Q = ("where is the {colour} {shape}?", "in which part of the image is the {colour} {shape}?")
POSITION_A = "the {colour} {shape} is in the {place}."
SIZE_Q = ("is the {colour} {shape} large or small?", "how big is the {colour} {shape}?")
SIZE_A = "the {colour} {shape} is {size}."
DESCRIBE_Q = ("describe the image in detail.", "describe the image.", "what is in this picture? give details.")
DESCRIBE_OPEN = "this is a {aspect} picture with a {background} background."
DESCRIBE_ONE = "it shows a {o}."
DESCRIBE_MANY = "it shows {objects}."
DESCRIBE_OBJECT = "{size} {colour} {shape} in the {place}"
DESCRIBE_COUNT1 = "there is one shape in total."
DESCRIBE_COUNTN = "there are {n} shapes in total."
BAR_Q_HIGH = ("which bar is the highest?", "which bar is the tallest?")
BAR_Q_LOW = ("which bar is the lowest?", "which bar is the shortest?")
BAR_Q_VALUE = ("what is the value of the {colour} bar?", "how high is the {colour} bar?")
BAR_Q_COUNT = ("how many bars are there?",)
BAR_A_HIGH = "the {colour} bar is the highest."
BAR_A_LOW = "the {colour} bar is the lowest."
BAR_A_VALUE = "the {colour} bar is {value}."
BAR_A_COUNT = "there are {n} bars."
CHART_Q = ("describe the chart.", "describe the chart in detail.", "read the chart.")
CHART_OPEN = "this is a bar chart with {n} bars."
CHART_VALUE = "the {colour} bar is {value}"
CHART_CLOSE = "the {high} bar is the highest and the {low} bar is the lowest."
TEXT_Q = ("what does it say?", "what is written here?", "read the text.")
TEXT_A = "it says {text}."
VIDEO_Q = ("what happens in the video?", "what changes in the video?")
NARRATE_Q = ("describe the video.", "describe the video in detail.", "tell me what happens in the video.")
VIDEO_A = {
    "move": "the {colour} {shape} moves {direction}.",
    "grow": "the {colour} {shape} grows.",
    "shrink": "the {colour} {shape} shrinks.",
    "appear": "a {colour} {shape} appears.",
    "disappear": "the {colour} {shape} disappears.",
    "recolour": "the {colour} {shape} turns {new}.",
}
NARRATE_FIRST1 = "at first there is a {o}."
NARRATE_FIRST2 = "at first there are two shapes, a {o1} and a {o2}."
NARRATE_THEN = {
    "move": "then the {colour} {shape} moves {direction}.",
    "grow": "then the {colour} {shape} grows.",
    "shrink": "then the {colour} {shape} shrinks.",
    "appear": "then a {colour} {shape} appears in the {place}.",
    "disappear": "then the {colour} {shape} disappears.",
    "recolour": "then the {colour} {shape} turns {new}.",
}
ROW_Q = ("read the shapes.", "read the shapes in this picture.", "what shapes are there? read the picture.")
ROW_LINE = "the {colour} shapes in the {row} read : {shapes}."
ROW_CLOSE = "the top shapes are {top} and the bottom shapes are {bottom}."
NARRATE_END1 = "at the end there is a {o}."
NARRATE_END2 = "at the end there are two shapes, a {o1} and a {o2}."

ALL_TEMPLATES = (
    *SHAPE_Q, SHAPE_A, *COLOUR_Q, COLOUR_A, *COUNT_Q, COUNT_A1, COUNT_AN, *POSITION_Q, POSITION_A,
    *SIZE_Q, SIZE_A, *DESCRIBE_Q, DESCRIBE_OPEN, DESCRIBE_ONE, DESCRIBE_MANY, DESCRIBE_OBJECT,
    DESCRIBE_COUNT1, DESCRIBE_COUNTN, *BAR_Q_HIGH, *BAR_Q_LOW, *BAR_Q_VALUE, *BAR_Q_COUNT, BAR_A_HIGH,
    BAR_A_LOW, BAR_A_VALUE, BAR_A_COUNT, *CHART_Q, CHART_OPEN, CHART_VALUE, CHART_CLOSE, *TEXT_Q, TEXT_A,
    *VIDEO_Q, *NARRATE_Q, *VIDEO_A.values(), NARRATE_FIRST1, NARRATE_FIRST2, *NARRATE_THEN.values(),
    NARRATE_END1, NARRATE_END2, *ROW_Q, ROW_LINE, ROW_CLOSE,
)  # fmt: skip


# --------------------------------------------------------------------------- example
@dataclass(frozen=True)
class Thing:
    """One object of a shape scene: what it is, and which 3x3 cell (0-8, row by row) it is in."""

    colour: str
    shape: str
    size: str
    cell: int

    @property
    def place(self) -> str:
        return PLACES[self.cell]

    def phrase(self) -> str:
        return DESCRIBE_OBJECT.format(size=self.size, colour=self.colour, shape=self.shape, place=self.place)

    def facts(self) -> tuple[str, str]:
        """The two facts a description states about it: what it is and where; and its size."""
        return f"{self.colour} {self.shape} in the {self.place}", f"{self.size} {self.colour} {self.shape}"


@dataclass(frozen=True)
class Example:
    """One question about one synthetic image or clip.

    ``facts``: the phrases a correct answer states (each one fact, checked independently, in any
    order); for a short answer the one fact is all of them in order, and ``forbidden`` words make
    it wrong.  ``objects``: what was drawn (a tuple of :class:`Thing`, bar ``(colour, value)``
    pairs, the rendered text, or a video's event).  ``frames``: a clip's frames (``image`` is then
    its first frame); empty for an image.
    """

    image: Image.Image = field(repr=False, compare=False)
    question: str
    answer: str
    kind: str
    facts: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    objects: tuple = ()
    frames: tuple[Image.Image, ...] = field(default=(), repr=False, compare=False)
    #: For a shape scene or a chart: a map the size of ``image`` whose pixel is 1 + the index in
    #: ``objects`` of the object or bar drawn there (0: background). Training uses it for
    #: per-token labels.
    labels: Image.Image | None = field(default=None, repr=False, compare=False)

    @property
    def long(self) -> bool:
        return self.kind in LONG_KINDS or self.kind == ROW_KIND


def _norm_tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+|[0-9]+", text.lower())


def _find(tokens: list[str], phrase: str, start: int = 0) -> int:
    """Index just past the first occurrence of ``phrase`` in ``tokens`` at or after ``start``, or -1."""
    p = _norm_tokens(phrase)
    for i in range(start, len(tokens) - len(p) + 1):
        if tokens[i : i + len(p)] == p:
            return i + len(p)
    return -1


#: Kinds whose answer may name what it looked at first and conclude after its last "so" (``sage_world.visitors``'
#: count of a shape and whether a thing is there, runs 14 and 15): graded on that conclusion alone.
CONCLUDING_KINDS = ("count_kind", "exists")


def fact_score(example: Example, generated_answer: str) -> tuple[int, int]:
    """(facts right, facts) for ``generated_answer``.

    Long answers: each fact phrase counts on its own wherever it appears.  Short answers: one
    fact, right when every phrase appears in order and no forbidden word does.
    """
    toks = _norm_tokens(generated_answer)
    if example.kind in CONCLUDING_KINDS and "so" in toks:  # what it looked at first, then its answer
        toks = toks[len(toks) - toks[::-1].index("so") :]
    if example.kind == ROW_KIND:
        return _row_score(example, toks)
    if example.long:
        return sum(_find(toks, f) >= 0 for f in example.facts), len(example.facts)
    if any(f in toks for f in example.forbidden):
        return 0, 1
    pos = 0
    for phrase in example.facts:
        pos = _find(toks, phrase, pos)
        if pos < 0:
            return 0, 1
    return 1, 1


def rows_of(example: Example) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A row picture's rows, top then bottom: (colour, shapes left to right)."""
    colours = list(dict.fromkeys(t.colour for t in example.objects))
    return tuple((c, tuple(t.shape for t in example.objects if t.colour == c)) for c in colours)


def _row_score(example: Example, toks: list[str]) -> tuple[int, int]:
    """Per row: its colour named with it (one fact), each shape in its place (one fact each) and
    the row's length (one fact)."""
    right = total = 0
    for name, (colour, shapes) in zip(("top", "bottom"), rows_of(example), strict=True):
        total += 2 + len(shapes)
        right += _find(toks, f"{colour} shapes in the {name} read") >= 0
        start = _find(toks, f"in the {name} read")
        if start < 0:
            continue
        said = list(itertools.takewhile(lambda w: w in SHAPES, toks[start:]))
        right += sum(a == b for a, b in zip(said, shapes, strict=False)) + (len(said) == len(shapes))
    return right, total


def grade(example: Example, generated_answer: str) -> bool:
    """True when ``generated_answer`` states every fact of the example (and nothing contradicting)."""
    right, total = fact_score(example, generated_answer)
    return right == total


# --------------------------------------------------------------------------- drawing
def _canvas(rng: random.Random, style: Style, side: int = 0) -> tuple[Image.Image, ImageDraw.ImageDraw, str]:
    """A light canvas of random size and aspect (``side``: a fixed square side instead)."""
    if side:
        w = h = side
    else:
        area = rng.randint(*style.canvas) ** 2
        aspect = rng.choice(style.aspects)
        w, h = round((area * aspect) ** 0.5), round((area / aspect) ** 0.5)
    background = rng.choice(list(BACKGROUNDS))
    img = Image.new("RGB", (w, h), BACKGROUNDS[background])
    return img, ImageDraw.Draw(img), background


def aspect_name(image: Image.Image) -> str:
    w, h = image.size
    wide, tall, square = ASPECTS
    return wide if w > 1.15 * h else (tall if h > 1.15 * w else square)


def _draw_shape(
    draw: ImageDraw.ImageDraw, shape: str, fill: tuple[int, int, int] | int, cx: float, cy: float, r: float
) -> None:
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif shape == "square":
        s = r * 0.85
        draw.rectangle((cx - s, cy - s, cx + s, cy + s), fill=fill)
    elif shape == "triangle":  # pointing up
        draw.polygon([(cx, cy - r), (cx - r, cy + r * 0.8), (cx + r, cy + r * 0.8)], fill=fill)
    else:  # cross: two bars a third of the size wide
        t = r / 3
        draw.rectangle((cx - r, cy - t, cx + r, cy + t), fill=fill)
        draw.rectangle((cx - t, cy - r, cx + t, cy + r), fill=fill)


def _cell_box(image: Image.Image, cell: int) -> tuple[float, float, float, float]:
    w, h = image.size
    row, col = divmod(cell, 3)
    return col * w / 3, row * h / 3, (col + 1) * w / 3, (row + 1) * h / 3


def _place_thing(rng: random.Random, style: Style, image: Image.Image, thing: Thing) -> tuple[float, float, float]:
    """Centre and radius of ``thing`` in its cell: a random scale in its size range, a random offset."""
    x0, y0, x1, y1 = _cell_box(image, thing.cell)
    cell = min(x1 - x0, y1 - y0)
    r = cell * rng.uniform(*(style.small if thing.size == "small" else style.large)) / 2
    slack_x, slack_y = (x1 - x0) / 2 - r, (y1 - y0) / 2 - r
    cx = (x0 + x1) / 2 + rng.uniform(-1, 1) * max(slack_x, 0)
    cy = (y0 + y1) / 2 + rng.uniform(-1, 1) * max(slack_y, 0)
    return cx, cy, r


def _draw_thing(draw: ImageDraw.ImageDraw, thing: Thing, where: tuple[float, float, float], colour: str = "") -> None:
    cx, cy, r = where
    _draw_shape(draw, thing.shape, COLOURS[colour or thing.colour], cx, cy, r)


def _wobbly(rng: random.Random, points: list[tuple[float, float]], r: float) -> list[tuple[float, float]]:
    """``points`` joined by strokes that wander a little, as a hand draws a straight line."""
    out: list[tuple[float, float]] = []
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        for k in range(4):
            f = k / 4
            out.append((x0 + (x1 - x0) * f + rng.gauss(0, 0.03 * r), y0 + (y1 - y0) * f + rng.gauss(0, 0.03 * r)))
    return [*out, points[-1]]


def _draw_hand(
    rng: random.Random, draw: ImageDraw.ImageDraw, shape: str, fill: tuple[int, int, int], where: tuple[float, ...]
) -> None:
    """``shape`` drawn as by hand: corners a little off, strokes that wander, a line 10-35 % of
    the radius thick, an outline filled or not (a cross is always two strokes)."""
    cx, cy, r = where
    width = max(2, round(r * rng.uniform(0.1, 0.35)))

    def jitter(x: float, y: float) -> tuple[float, float]:
        return cx + x * r + rng.gauss(0, 0.06 * r), cy + y * r + rng.gauss(0, 0.06 * r)

    if shape == "cross":
        width = max(2, round(r * rng.uniform(0.25, 0.5)))
        for a, b in (((-1, 0), (1, 0)), ((0, -1), (0, 1))):
            draw.line(_wobbly(rng, [jitter(*a), jitter(*b)], r), fill=fill, width=width, joint="curve")
        return
    if shape == "circle":
        start, sweep, n = rng.uniform(0, math.tau), math.tau + rng.uniform(-0.3, 0.4), 24
        radii = [1 + 0.08 * math.sin(3 * k / n * math.tau + start) + rng.gauss(0, 0.03) for k in range(n + 1)]
        angles = [start + sweep * k / n for k in range(n + 1)]
        points = [(cx + r * q * math.cos(a), cy + r * q * math.sin(a)) for q, a in zip(radii, angles, strict=True)]
    else:
        s = 0.85 if shape == "square" else 1.0
        corners = [(-s, -s), (s, -s), (s, s), (-s, s)] if shape == "square" else [(0, -1), (1, 0.8), (-1, 0.8)]
        ends = [jitter(*c) for c in corners]
        points = _wobbly(rng, [*ends, ends[0]], r)
    if rng.random() < 0.5:
        draw.polygon(points, fill=fill)
    draw.line(points, fill=fill, width=width, joint="curve")


def _random_things(rng: random.Random, n: int) -> list[Thing]:
    """``n`` objects in distinct cells with distinct colours, in reading order."""
    cells = sorted(rng.sample(range(9), n))
    colours = rng.sample(list(COLOURS), n)
    return [Thing(c, rng.choice(SHAPES), rng.choice(SIZES), cell) for c, cell in zip(colours, cells, strict=True)]


def shape_scene(
    rng: random.Random, n: int, style: Style = DEFAULT
) -> tuple[Image.Image, tuple[Thing, ...], str, Image.Image]:
    """A canvas with ``n`` objects; returns the image, the objects (reading order), the background
    and the label map (pixel = 1 + the object's index, 0 = background)."""
    img, draw, background = _canvas(rng, style)
    label_map = Image.new("L", img.size, 0)
    label_draw = ImageDraw.Draw(label_map)
    things = _random_things(rng, n)
    for i, t in enumerate(things):
        where = _place_thing(rng, style, img, t)
        if style.hand:
            _draw_hand(rng, draw, t.shape, COLOURS[t.colour], where)
        else:
            _draw_thing(draw, t, where)
        cx, cy, r = where
        _draw_shape(label_draw, t.shape, i + 1, cx, cy, r)
    return img, tuple(things), background, label_map


def row_scene(rng: random.Random, style: Style = DEFAULT) -> tuple[Image.Image, tuple[Thing, ...], str, Image.Image]:
    """Two rows of 4-6 small shapes on a wide canvas, each row in one colour (the two differ), the
    shapes drawn independently (repeats allowed, so no shape can be guessed from the others); returns
    the image, the objects (top row left to right, then the bottom row), the background and the
    label map. Each object's ``cell`` is the 3x3 cell of its centre (for the per-token labels)."""
    area = rng.randint(*style.canvas) ** 2
    aspect = rng.choice(ROW_ASPECTS)
    w, h = round((area * aspect) ** 0.5), round((area / aspect) ** 0.5)
    background = rng.choice(list(BACKGROUNDS))
    img = Image.new("RGB", (w, h), BACKGROUNDS[background])
    draw, label_map = ImageDraw.Draw(img), Image.new("L", (w, h), 0)
    label_draw = ImageDraw.Draw(label_map)
    things: list[Thing] = []
    for r, colour in enumerate(rng.sample(list(COLOURS), 2)):
        n = rng.randint(*ROW_LENGTH)
        slot, band = w / n, h / 2
        radius = min(slot, band) * rng.uniform(0.3, 0.42)
        cy = band * (r + 0.5) + rng.uniform(-0.1, 0.1) * band
        for i in range(n):
            cx = slot * (i + 0.5) + rng.uniform(-0.08, 0.08) * slot
            cell = min(int(cy * 3 / h), 2) * 3 + min(int(cx * 3 / w), 2)
            thing = Thing(colour, rng.choice(SHAPES), "small", cell)
            where = (cx, cy, radius * rng.uniform(0.9, 1.1))
            if style.hand:
                _draw_hand(rng, draw, thing.shape, COLOURS[colour], where)
            else:
                _draw_thing(draw, thing, where)
            _draw_shape(label_draw, thing.shape, len(things) + 1, *where)
            things.append(thing)
    return img, tuple(things), background, label_map


def ask_rows(rng: random.Random, image: Image.Image, things: tuple[Thing, ...], background: str) -> Example:
    """ "read the shapes." about a :func:`row_scene`: the opening of a description, each row's shapes
    left to right, and the two colours again."""
    example = Example(image, rng.choice(ROW_Q), "", ROW_KIND, objects=things)
    (top, first), (bottom, second) = rows_of(example)
    lines = [
        ROW_LINE.format(colour=c, row=name, shapes=" ".join(shapes))
        for name, (c, shapes) in (("top", (top, first)), ("bottom", (bottom, second)))
    ]
    opening = DESCRIBE_OPEN.format(aspect=aspect_name(image), background=background)
    answer = " ".join([opening, *lines, ROW_CLOSE.format(top=top, bottom=bottom)])
    facts = (f"{top} shapes in the top read", f"{bottom} shapes in the bottom read")
    return replace(example, answer=answer, facts=facts)


def jpeg(image: Image.Image, quality: int) -> Image.Image:
    """``image`` saved as a JPEG of ``quality`` and read back (as a visitor's saved picture is)."""
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=quality)
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def bar_chart(
    rng: random.Random, style: Style = DEFAULT
) -> tuple[Image.Image, tuple[tuple[str, int], ...], Image.Image]:
    """3-6 bars of distinct colours, values 1-5 on grid lines, a unique highest and lowest bar; returns
    the image, the ``(colour, value)`` bars and the label map (pixel = 1 + the bar's index)."""
    img, draw, _ = _canvas(rng, style)
    label_map = Image.new("L", img.size, 0)
    w, h = img.size
    n = rng.randint(3, 6)
    colours = rng.sample(list(COLOURS), n)
    while True:
        values = [rng.randint(1, 5) for _ in range(n)]
        if values.count(max(values)) == 1 and values.count(min(values)) == 1:
            break
    margin = 0.06 * w
    base = h * rng.uniform(0.86, 0.93)
    unit = (base - h * rng.uniform(0.05, 0.12)) / 5
    for v in range(1, 6):
        draw.line((margin, base - unit * v, w - margin, base - unit * v), fill=(200, 200, 200), width=1)
    draw.line((margin, base, w - margin, base), fill=(0, 0, 0), width=max(1, round(h / 80)))
    slot = (w - 2 * margin) / n
    bar = slot * rng.uniform(0.5, 0.75)
    for i, (c, v) in enumerate(zip(colours, values, strict=True)):
        x0 = margin + i * slot + (slot - bar) / 2
        draw.rectangle((x0, base - unit * v, x0 + bar, base), fill=COLOURS[c])
        ImageDraw.Draw(label_map).rectangle((x0, base - unit * v, x0 + bar, base), fill=i + 1)
    return img, tuple(zip(colours, values, strict=True)), label_map


def text_image(rng: random.Random, text: str, style: Style = DEFAULT) -> Image.Image:
    img, draw, _ = _canvas(rng, style)
    w, h = img.size
    font = ImageFont.load_default(size=max(10, round(min(w / (0.62 * len(text) + 0.6), h) * rng.uniform(0.45, 0.75))))
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    tw, th = right - left, bottom - top
    x = rng.uniform(0, max(w - tw, 0)) - left
    y = rng.uniform(0, max(h - th, 0)) - top
    draw.text((x, y), text, fill=rng.choice([(0, 0, 0), (40, 40, 90), (90, 30, 30)]), font=font)
    return img


# --------------------------------------------------------------------------- questions
def scene_kinds(example: Example) -> tuple[str, ...]:
    """The kinds of question that can be asked about ``example``'s image."""
    if example.kind in ("bar", "chart"):
        return ("bar", "chart")
    if example.kind in ("text", *VIDEO_KINDS):
        return (example.kind,)
    return ("shape", "colour", "count", "position", "size", "describe")


def _others(word: str, pool: Iterable[str]) -> tuple[str, ...]:
    return tuple(w for w in pool if w != word)


def describe_answer(image: Image.Image, background: str, things: tuple[Thing, ...]) -> str:
    opening = DESCRIBE_OPEN.format(aspect=aspect_name(image), background=background)
    if len(things) == 1:
        return f"{opening} {shown(things)}. {DESCRIBE_COUNT1}"
    return f"{opening} {shown(things)}. {DESCRIBE_COUNTN.format(n=NUMBER_WORDS[len(things)])}"


def shown(things: tuple[Thing, ...], marks: Sequence[str] = ()) -> str:
    """What a description says the picture shows, without its full stop: "it shows a small red circle in the
    top left and a large blue square in the center"; ``marks``: per thing, words said after it ("" none), as
    "a small red circle in the top left: one circle"."""
    phrases = [
        f"{t.phrase()}: {m}" if m else t.phrase() for t, m in zip(things, marks or [""] * len(things), strict=True)
    ]
    if len(things) == 1:
        return DESCRIBE_ONE.format(o=phrases[0]).removesuffix(".")
    listed = ", ".join(f"a {p}" for p in phrases[:-1]) + f" and a {phrases[-1]}"
    return DESCRIBE_MANY.format(objects=listed).removesuffix(".")


def ask_scene(rng: random.Random, kind: str, image: Image.Image, things: tuple[Thing, ...], background: str) -> Example:
    """A random question of ``kind`` about a shape scene."""
    t = rng.choice(things)
    objects = things
    if kind == "shape":
        answer = SHAPE_A.format(colour=t.colour, shape=t.shape)
        q = rng.choice(SHAPE_Q).format(colour=t.colour)
        return Example(image, q, answer, kind, (t.shape,), _others(t.shape, SHAPES), objects)
    if kind == "colour":
        q = rng.choice(COLOUR_Q).format(place=t.place)
        answer = COLOUR_A.format(place=t.place, colour=t.colour)
        return Example(image, q, answer, kind, (t.colour,), _others(t.colour, COLOURS), objects)
    if kind == "count":
        n = len(things)
        answer = COUNT_A1 if n == 1 else COUNT_AN.format(n=NUMBER_WORDS[n])
        word = NUMBER_WORDS[n]
        return Example(image, rng.choice(COUNT_Q), answer, kind, (word,), _others(word, NUMBER_WORDS.values()), objects)
    if kind == "position":
        q = rng.choice(POSITION_Q).format(colour=t.colour, shape=t.shape)
        answer = POSITION_A.format(colour=t.colour, shape=t.shape, place=t.place)
        return Example(image, q, answer, kind, (f"in the {t.place}",), (), objects)
    if kind == "size":
        q = rng.choice(SIZE_Q).format(colour=t.colour, shape=t.shape)
        answer = SIZE_A.format(colour=t.colour, shape=t.shape, size=t.size)
        return Example(image, q, answer, kind, (t.size,), _others(t.size, SIZES), objects)
    if kind == "describe":
        answer = describe_answer(image, background, things)
        n = len(things)
        count = DESCRIBE_COUNT1 if n == 1 else DESCRIBE_COUNTN.format(n=NUMBER_WORDS[n])
        facts = (*(f for t in things for f in t.facts()), count)
        return Example(image, rng.choice(DESCRIBE_Q), answer, kind, facts, (), objects)
    raise ValueError(f"unknown kind {kind!r}")


def ask_chart(rng: random.Random, kind: str, image: Image.Image, bars: tuple[tuple[str, int], ...]) -> Example:
    """A random question of ``kind`` (``bar``: a short one, ``chart``: describe it) about a chart."""
    high = max(bars, key=lambda b: b[1])[0]
    low = min(bars, key=lambda b: b[1])[0]
    colours = [c for c, _ in bars]
    if kind == "chart":
        values = [CHART_VALUE.format(colour=c, value=v) for c, v in bars]
        listed = ", ".join(values[:-1]) + f" and {values[-1]}"
        close = CHART_CLOSE.format(high=high, low=low)
        answer = f"{CHART_OPEN.format(n=NUMBER_WORDS[len(bars)])} {listed}. {close}"
        extremes = (f"{high} bar is the highest", f"{low} bar is the lowest")
        facts = (f"with {NUMBER_WORDS[len(bars)]} bars", *values, *extremes)
        return Example(image, rng.choice(CHART_Q), answer, kind, facts, (), bars)
    which = rng.choice(("high", "low", "value", "value", "count"))
    if which in ("high", "low"):
        colour = high if which == "high" else low
        q = rng.choice(BAR_Q_HIGH if which == "high" else BAR_Q_LOW)
        answer = (BAR_A_HIGH if which == "high" else BAR_A_LOW).format(colour=colour)
        return Example(image, q, answer, kind, (colour,), _others(colour, colours), bars)
    if which == "count":
        n = NUMBER_WORDS[len(bars)]
        answer = BAR_A_COUNT.format(n=n)
        return Example(image, BAR_Q_COUNT[0], answer, kind, (n,), _others(n, NUMBER_WORDS.values()), bars)
    colour, value = rng.choice(bars)
    q = rng.choice(BAR_Q_VALUE).format(colour=colour)
    answer = BAR_A_VALUE.format(colour=colour, value=value)
    return Example(image, q, answer, kind, (str(value),), tuple(str(v) for v in range(1, 6) if v != value), bars)


# --------------------------------------------------------------------------- video
@dataclass(frozen=True)
class Event:
    """What happens in a clip: ``thing`` does ``verb``; ``before`` / ``after``: the objects shown at
    the start and at the end; ``detail``: the direction, or the new colour."""

    verb: str
    thing: Thing
    before: tuple[Thing, ...]
    after: tuple[Thing, ...]
    detail: str = ""


def _video_event(rng: random.Random) -> Event:
    verb = rng.choice(tuple(VIDEO_A))
    n = 2 if verb in ("appear", "disappear") else rng.randint(1, 2)
    things = _random_things(rng, n)
    mover = rng.choice(things)
    if verb == "move":
        row, col = divmod(mover.cell, 3)
        taken = {t.cell for t in things}
        moves = [
            (d, (row + d[0] * k) * 3 + col + d[1] * k)
            for d in DIRECTIONS
            for k in (1, 2)
            if 0 <= row + d[0] * k < 3 and 0 <= col + d[1] * k < 3
        ]
        moves = [m for m in moves if m[1] not in taken] or moves[:1]
        d, cell = rng.choice(moves)
        moved = Thing(mover.colour, mover.shape, mover.size, cell)
        after = tuple(sorted((moved if t == mover else t for t in things), key=lambda t: t.cell))
        return Event(verb, mover, tuple(things), after, DIRECTIONS[d])
    if verb in ("grow", "shrink"):
        start, end = ("small", "large") if verb == "grow" else ("large", "small")
        first = Thing(mover.colour, mover.shape, start, mover.cell)
        last = Thing(mover.colour, mover.shape, end, mover.cell)
        return Event(
            verb,
            first,
            tuple(first if t == mover else t for t in things),
            tuple(last if t == mover else t for t in things),
        )
    if verb == "appear":
        return Event(verb, mover, tuple(t for t in things if t != mover), tuple(things))
    if verb == "disappear":
        return Event(verb, mover, tuple(things), tuple(t for t in things if t != mover))
    new = rng.choice([c for c in COLOURS if c not in {t.colour for t in things}])
    changed = Thing(new, mover.shape, mover.size, mover.cell)
    return Event(verb, mover, tuple(things), tuple(changed if t == mover else t for t in things), new)


def _render_clip(rng: random.Random, event: Event, style: Style) -> list[Image.Image]:
    """8-16 frames: the ``before`` scene, the change over the middle frames, the ``after`` scene."""
    count = rng.randint(*style.frames)
    side = rng.randint(*style.clip_side)
    img0, _, background = _canvas(rng, style, side)
    where = {t.cell: _place_thing(rng, style, img0, t) for t in (*event.before, *event.after)}
    mover = event.thing
    start, stop = round(count * 0.3), round(count * 0.7)  # the change happens between these frames
    frames = []
    for i in range(count):
        f = min(max((i - start) / max(stop - start, 1), 0.0), 1.0)
        img = Image.new("RGB", (side, side), BACKGROUNDS[background])
        draw = ImageDraw.Draw(img)
        for t in event.before if f < 0.5 else event.after:
            if t.colour == mover.colour and event.verb in ("move", "grow", "shrink"):
                continue
            _draw_thing(draw, t, where[t.cell])
        if event.verb == "move":
            end = next(t for t in event.after if t.colour == mover.colour)
            (x0, y0, r), (x1, y1, _) = where[mover.cell], where[end.cell]
            _draw_thing(draw, mover, (x0 + (x1 - x0) * f, y0 + (y1 - y0) * f, r))
        elif event.verb in ("grow", "shrink"):
            x, y, _ = where[mover.cell]
            small, large = style.small[1] / 2, style.large[0] / 2 + 0.04
            cell = side / 3
            a, b = (small, large) if event.verb == "grow" else (large, small)
            _draw_thing(draw, mover, (x, y, cell * (a + (b - a) * f)))
        frames.append(img)
    return frames


def make_video_example(rng: random.Random, kind: str = "video", style: Style = DEFAULT) -> Example:
    """A clip and a question about it: ``video`` (what happens, one sentence) or ``narrate``."""
    e = _video_event(rng)
    frames = _render_clip(rng, e, style)
    t = e.thing
    detail = {"colour": t.colour, "shape": t.shape, "direction": e.detail, "new": e.detail, "place": t.place}
    if kind == "video":
        answer = VIDEO_A[e.verb].format(**detail)
        key = {"move": e.detail, "recolour": f"turns {e.detail}"}.get(e.verb, e.verb + "s")
        forbidden = tuple(v + "s" for v in VIDEO_A if v + "s" != key and v != "move" and v != "recolour")
        question, what = rng.choice(VIDEO_Q), (f"{t.colour} {t.shape}", key)
        return Example(frames[0], question, answer, kind, what, forbidden, (e,), tuple(frames))

    def scene(sentence1: str, sentence2: str, things: tuple[Thing, ...]) -> str:
        phrases = [x.phrase() for x in things]
        if len(phrases) == 1:
            return sentence1.format(o=phrases[0])
        return sentence2.format(o1=phrases[0], o2=phrases[1])

    first = scene(NARRATE_FIRST1, NARRATE_FIRST2, e.before)
    then = NARRATE_THEN[e.verb].format(**detail)
    end = scene(NARRATE_END1, NARRATE_END2, e.after)
    facts = (
        *(f for x in e.before for f in x.facts()),
        then.removesuffix("."),
        *(f for x in e.after if x not in e.before for f in x.facts()),
    )
    answer = f"{first} {then} {end}"
    return Example(frames[0], rng.choice(NARRATE_Q), answer, kind, facts, (), (e,), tuple(frames))


# --------------------------------------------------------------------------- examples
def make_example(rng: random.Random, kind: str | None = None, style: Style = DEFAULT) -> Example:
    """A random example (of ``kind`` if given, else of a random kind)."""
    kind = kind or rng.choice(KINDS)
    if kind in VIDEO_KINDS:
        return make_video_example(rng, kind, style)
    if kind in ("bar", "chart"):
        image, bars, label_map = bar_chart(rng, style)
        return replace(ask_chart(rng, kind, image, bars), labels=label_map)
    if kind == "text":
        text = rng.choice(WORDS) if rng.random() < 0.5 else str(rng.randint(10, 999))
        return Example(
            text_image(rng, text, style),
            rng.choice(TEXT_Q),
            TEXT_A.format(text=text),
            kind,
            (text,),
            _others(text, WORDS),
            (text,),
        )
    if kind == ROW_KIND:
        image, things, background, label_map = row_scene(rng, style)
        return replace(ask_rows(rng, image, things, background), labels=label_map)
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    low = 2 if kind == "describe" else 1
    image, things, background, label_map = shape_scene(rng, rng.randint(low, MAX_OBJECTS), style)
    return replace(ask_scene(rng, kind, image, things, background), labels=label_map)


def make_examples(seed: int, n: int, kinds: tuple[str, ...] | None = None, style: Style = DEFAULT) -> list[Example]:
    """``n`` examples from ``seed``; kinds cycle through ``kinds`` (all kinds by default)."""
    rng = random.Random(seed)
    kinds = kinds or KINDS
    return [make_example(rng, kinds[i % len(kinds)], style) for i in range(n)]


# --------------------------------------------------------------------------- demo assets
#: Kinds the built-in pair answers too rarely right to show in the gallery (reading: 7.4 %).
UNREADABLE_KINDS = ("text",)


def example_picks(seed: int = 7) -> list[tuple[str, Example]]:
    """The demo examples (file name, example) that :func:`write_example_assets` writes."""
    rng = random.Random(seed)

    def first(kind: str, question: str, pred: Callable[[Example], bool] = lambda e: True) -> Example:
        while True:
            e = make_example(rng, kind)
            if (not question or e.question == question) and pred(e):
                return e

    def verb(v: str) -> Callable[[Example], bool]:
        return lambda e: e.objects[0].verb == v

    picks = [
        ("describe_five.png", first("describe", "describe the image in detail.", lambda e: len(e.objects) == 5)),
        ("describe_three.png", first("describe", "describe the image in detail.", lambda e: len(e.objects) == 3)),
        ("describe_wide.png", first("describe", "describe the image.", lambda e: aspect_name(e.image) == "wide")),
        ("chart.png", first("chart", "describe the chart.", lambda e: len(e.objects) == 5)),
        ("moving_shape.webm", first("narrate", "describe the video.", verb("move"))),
        ("appearing_shape.webm", first("narrate", "describe the video.", verb("appear"))),
        ("colour_change.webm", first("narrate", "tell me what happens in the video.", verb("recolour"))),
        ("growing_shape.webm", first("video", "what happens in the video?", verb("grow"))),
        ("where.png", first("position", "", lambda e: e.question.startswith("where is") and len(e.objects) == 4)),
        ("bar_value.png", first("bar", "", lambda e: e.question.startswith("what is the value"))),
        ("number.png", first("text", "what does it say?", lambda e: e.objects[0].isdigit())),
        ("count.png", first("count", "how many shapes are there?", lambda e: len(e.objects) == 4)),
        # Rows, where the premise holds (the draft is unsure on every shape, sure on the template words): the
        # race where reading the entropy visibly matters. Drawn last, so the others stay what they were.
        ("rows.png", first("row", "what shapes are there? read the picture.")),
    ]
    # The pair does not read (7.4 % of rendered words and numbers): the reading example is drawn, so
    # that the others stay what they were, but not shown.
    return [(name, e) for name, e in picks if e.kind not in UNREADABLE_KINDS]


#: How the clips are written: VP9 in WebM, which every current browser plays in a ``<video>`` (Chromium,
#: Firefox, Safari 14.1 on), and this OpenCV build encodes (its H.264 encoder needs a device; MPEG-4 Part 2,
#: ``mp4v``, which the clips were before, no browser plays). Frames are cut to even sides, as ``mp4v`` cut
#: them, so the models read the same frames (tests/test_shipped_media.py).
CLIP_FOURCC = "VP90"
CLIP_SUFFIX = ".webm"
#: Shipped clips the built-in pair answers wrong (run 10: docs/training-history.md, "Run 10"), kept out of the
#: gallery (``"gallery": false`` in examples.json) until a pair answers them right; tests/test_builtin_pair.py
#: holds them as strict expected failures.
OFF_GALLERY = {
    "moving_shape.webm": "run 10 says the red cross moves left, where the yellow circle does",
    "colour_change.webm": "run 10 says the green circle moves up, where it turns purple",
}


def write_clip(path: str | os.PathLike[str], frames: Sequence[Image.Image], fps: float = VIDEO_FPS) -> None:
    """Write ``frames`` as a clip browsers play (:data:`CLIP_FOURCC`), cut to even sides."""
    import cv2
    import numpy as np

    width, height = frames[0].size
    size = (width - width % 2, height - height % 2)
    writer = cv2.VideoWriter(str(path), cv2.CAP_FFMPEG, cv2.VideoWriter.fourcc(*CLIP_FOURCC), fps, size)
    if not writer.isOpened():
        raise RuntimeError(f"this OpenCV build cannot write {CLIP_FOURCC} clips ({path})")
    try:
        for frame in frames:
            pixels = np.asarray(frame.convert("RGB"))[: size[1], : size[0]]
            writer.write(cv2.cvtColor(np.ascontiguousarray(pixels), cv2.COLOR_RGB2BGR))
    finally:
        writer.release()


def write_example_assets(out_dir: str | os.PathLike[str], seed: int = 7) -> list[dict]:
    """Write the demo images, the clips (:func:`write_clip`, at VIDEO_FPS) and ``examples.json`` to ``out_dir``.

    Each entry of ``examples.json`` holds the file, the prompt, the kind and the true answer; a clip the
    pair answers wrong (:data:`OFF_GALLERY`) also ``"gallery": false`` and why.
    """
    import json
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = []
    for fname, e in example_picks(seed):
        if e.frames:
            write_clip(out / fname, e.frames)
        else:
            e.image.save(out / fname)
        entry: dict[str, object] = {"file": fname, "prompt": e.question, "kind": e.kind, "answer": e.answer}
        if fname in OFF_GALLERY:
            entry |= {"gallery": False, "why": OFF_GALLERY[fname]}
        meta.append(entry)
    (out / "examples.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
