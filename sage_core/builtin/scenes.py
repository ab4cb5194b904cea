"""Synthetic visual question answering data for the built-in model pair.

Everything here is deterministic given a :class:`random.Random` instance, so a
seed reproduces a data set exactly.  Images are 112x112 RGB (the built-in
processor turns one image into 16 visual tokens).

Task kinds (benchmark-like, kept large enough to be learnable by a ~4 M
parameter model trained on two CPU cores):

``shape``     one big shape, "what shape is this?"            -> "it is a circle."
``colour``    1-2 shapes, "what colour is the square?"        -> "the square is red."
``count``     1-2 shapes, "how many shapes are there?"        -> "there are two shapes."
``position``  2 shapes, "where is the red circle?"            -> "the red circle is on the left."
``bar``       3-bar chart, highest / lowest bar, or a value   -> "the blue bar is the highest."
``text``      a rendered word or two-digit number             -> "it says cat." / "it says 42."
``describe``  1-2 shapes, free-form description with randomly chosen wording.

:func:`grade` checks the facts an answer must contain (ordered key phrases)
and the words it must not contain, so it tolerates free wording around them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

SIZE = 112
BACKGROUND = (255, 255, 255)

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 200, 20),
}
SHAPES = ("circle", "square", "triangle")
WORDS = ("cat", "dog", "sun", "tree", "bird", "fish", "car", "book", "moon", "star", "cake", "ship")
NUMBER_WORDS = {1: "one", 2: "two"}
KINDS = ("shape", "colour", "count", "position", "bar", "text", "describe")

# --------------------------------------------------------------------------- templates
SHAPE_Q = ("what shape is this?", "what shape do you see?", "which shape is in the image?")
SHAPE_A = "it is a {shape}."
COLOUR_Q = ("what colour is the {shape}?", "what color is the {shape}?", "which colour does the {shape} have?")
COLOUR_A = "the {shape} is {colour}."
COUNT_Q = ("how many shapes are there?", "how many objects can you see?", "count the shapes.")
COUNT_A1 = "there is one shape."
COUNT_A2 = "there are two shapes."
POSITION_Q = ("where is the {colour} {shape}?", "is the {colour} {shape} on the left or on the right?")
POSITION_Q_WHICH = ("which shape is on the {side}?", "what is on the {side}?")
POSITION_A = "the {colour} {shape} is on the {side}."
BAR_Q_HIGH = ("which bar is the highest?", "which bar is the tallest?")
BAR_Q_LOW = ("which bar is the lowest?", "which bar is the shortest?")
BAR_Q_VALUE = ("what is the value of the {colour} bar?", "how high is the {colour} bar?")
BAR_A_HIGH = "the {colour} bar is the highest."
BAR_A_LOW = "the {colour} bar is the lowest."
BAR_A_VALUE = "the {colour} bar is {value}."
TEXT_Q = ("what does it say?", "what is written here?", "read the text.")
TEXT_A = "it says {text}."
DESCRIBE_Q = ("describe the image.", "what is in this picture?", "describe what you see.")
# One object / two objects (left object first).  The opening words are random,
# the facts are not: some stretches of an answer are certain, some are not.
DESCRIBE_A1 = (
    "i see a {o1}.",
    "there is a {o1}.",
    "the image shows a {o1}.",
    "this is a picture of a {o1}.",
    "a {o1} on a white background.",
)
DESCRIBE_A2 = (
    "i see a {o1} and a {o2}.",
    "there are two shapes, a {o1} on the left and a {o2} on the right.",
    "the image shows a {o1} on the left and a {o2} on the right.",
    "this is a picture of a {o1} and a {o2}.",
    "a {o1} and a {o2} on a white background.",
)

ALL_TEMPLATES = (
    *SHAPE_Q,
    SHAPE_A,
    *COLOUR_Q,
    COLOUR_A,
    *COUNT_Q,
    COUNT_A1,
    COUNT_A2,
    *POSITION_Q,
    *POSITION_Q_WHICH,
    POSITION_A,
    *BAR_Q_HIGH,
    *BAR_Q_LOW,
    *BAR_Q_VALUE,
    BAR_A_HIGH,
    BAR_A_LOW,
    BAR_A_VALUE,
    *TEXT_Q,
    TEXT_A,
    *DESCRIBE_Q,
    *DESCRIBE_A1,
    *DESCRIBE_A2,
)


def vocabulary() -> list[str]:
    """Every word / punctuation token the data can produce (digits excluded: see tokenizer)."""
    words: set[str] = set(COLOURS) | set(SHAPES) | set(WORDS) | set(NUMBER_WORDS.values())
    words |= {"left", "right", "highest", "lowest", "colour", "color"}
    for t in ALL_TEMPLATES:
        words |= set(re.findall(r"[a-z]+|[^\sa-z{}]", re.sub(r"\{[a-z0-9]+\}", " ", t)))
    words |= set(".,?!:;'")
    return sorted(words)


# --------------------------------------------------------------------------- example
@dataclass(frozen=True)
class Example:
    """One question about one synthetic image.

    ``required``: phrases that must appear, in this order, in a correct answer;
    ``forbidden``: words whose presence makes an answer wrong.
    ``objects``: (colour, shape) pairs from left to right, or bar (colour, value)
    pairs, or the rendered text (one entry).
    """

    image: Image.Image = field(repr=False, compare=False)
    question: str
    answer: str
    kind: str
    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    objects: tuple = ()


def _norm_tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+|[0-9]+", text.lower())


def grade(example: Example, generated_answer: str) -> bool:
    """True when ``generated_answer`` states the example's facts (and no contradicting ones)."""
    toks = _norm_tokens(generated_answer)
    if any(f in toks for f in example.forbidden):
        return False
    pos = 0
    for phrase in example.required:
        p = _norm_tokens(phrase)
        found = -1
        for i in range(pos, len(toks) - len(p) + 1):
            if toks[i : i + len(p)] == p:
                found = i
                break
        if found < 0:
            return False
        pos = found + len(p)
    return True


# --------------------------------------------------------------------------- drawing
def _canvas() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("RGB", (SIZE, SIZE), BACKGROUND)
    return img, ImageDraw.Draw(img)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, colour: str, cx: int, cy: int, r: int) -> None:
    fill = COLOURS[colour]
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
    elif shape == "square":
        s = int(r * 0.9)
        draw.rectangle((cx - s, cy - s, cx + s, cy + s), fill=fill)
    else:  # triangle pointing up
        draw.polygon([(cx, cy - r), (cx - r, cy + int(r * 0.8)), (cx + r, cy + int(r * 0.8))], fill=fill)


def _shape_scene(rng: random.Random, n: int) -> tuple[Image.Image, list[tuple[str, str]]]:
    """1 or 2 big shapes (radius 20-24 px); with 2 they differ in shape and colour, left first."""
    img, draw = _canvas()
    shapes = rng.sample(SHAPES, n)
    colours = rng.sample(list(COLOURS), n)
    objs = []
    if n == 1:
        r = rng.randint(20, 24)
        cx, cy = rng.randint(r + 6, SIZE - r - 6), rng.randint(r + 6, SIZE - r - 6)
        _draw_shape(draw, shapes[0], colours[0], cx, cy, r)
        objs.append((colours[0], shapes[0]))
    else:
        for i, (cx_lo, cx_hi) in enumerate(((25, 31), (81, 87))):
            r = rng.randint(20, 24)
            cx = rng.randint(cx_lo, cx_hi)
            cx = min(max(cx, r + 1), SIZE - r - 2)
            cy = rng.randint(r + 4, SIZE - r - 4)
            _draw_shape(draw, shapes[i], colours[i], cx, cy, r)
            objs.append((colours[i], shapes[i]))
    return img, objs


def _bar_chart(rng: random.Random) -> tuple[Image.Image, list[tuple[str, int]]]:
    """Three bars of different colours, values 1-5 (16 px a unit), grey grid lines, unique max and min."""
    img, draw = _canvas()
    colours = rng.sample(list(COLOURS), 3)
    while True:
        values = [rng.randint(1, 5) for _ in range(3)]
        if values.count(max(values)) == 1 and values.count(min(values)) == 1:
            break
    base = 100
    for v in range(1, 6):
        draw.line((4, base - 16 * v, SIZE - 4, base - 16 * v), fill=(215, 215, 215), width=1)
    draw.line((4, base, SIZE - 4, base), fill=(0, 0, 0), width=2)
    for i, (c, v) in enumerate(zip(colours, values, strict=True)):
        x0 = 10 + i * 34
        draw.rectangle((x0, base - 16 * v, x0 + 24, base), fill=COLOURS[c])
    return img, list(zip(colours, values, strict=True))


def _text_image(rng: random.Random, text: str) -> Image.Image:
    img, draw = _canvas()
    size = 44 if text.isdigit() else (40 if len(text) <= 3 else 34)
    font = ImageFont.load_default(size=size)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    w, h = right - left, bottom - top
    x = (SIZE - w) // 2 - left + rng.randint(-6, 6)
    y = (SIZE - h) // 2 - top + rng.randint(-10, 10)
    draw.text((x, y), text, fill=(0, 0, 0), font=font)
    return img


# --------------------------------------------------------------------------- examples
def make_example(rng: random.Random, kind: str | None = None) -> Example:
    """A random example (of ``kind`` if given, else of a random kind)."""
    kind = kind or rng.choice(KINDS)
    if kind == "shape":
        img, objs = _shape_scene(rng, 1)
        _, shape = objs[0]
        return Example(
            img,
            rng.choice(SHAPE_Q),
            SHAPE_A.format(shape=shape),
            kind,
            (shape,),
            tuple(s for s in SHAPES if s != shape),
            tuple(objs),
        )
    if kind == "colour":
        img, objs = _shape_scene(rng, rng.randint(1, 2))
        colour, shape = rng.choice(objs)
        return Example(
            img,
            rng.choice(COLOUR_Q).format(shape=shape),
            COLOUR_A.format(shape=shape, colour=colour),
            kind,
            (colour,),
            tuple(c for c in COLOURS if c != colour),
            tuple(objs),
        )
    if kind == "count":
        n = rng.randint(1, 2)
        img, objs = _shape_scene(rng, n)
        return Example(
            img,
            rng.choice(COUNT_Q),
            COUNT_A1 if n == 1 else COUNT_A2,
            kind,
            (NUMBER_WORDS[n],),
            tuple(w for k, w in NUMBER_WORDS.items() if k != n),
            tuple(objs),
        )
    if kind == "position":
        img, objs = _shape_scene(rng, 2)
        i = rng.randint(0, 1)
        side, other = ("left", "right") if i == 0 else ("right", "left")
        colour, shape = objs[i]
        answer = POSITION_A.format(colour=colour, shape=shape, side=side)
        if rng.random() < 0.5:
            q = rng.choice(POSITION_Q).format(colour=colour, shape=shape)
            return Example(img, q, answer, kind, (side,), (other,), tuple(objs))
        q = rng.choice(POSITION_Q_WHICH).format(side=side)
        oc, os_ = objs[1 - i]
        return Example(img, q, answer, kind, (shape,), (os_, oc), tuple(objs))
    if kind == "bar":
        img, bars = _bar_chart(rng)
        which = rng.choice(("high", "low", "value"))

        def others(c: str) -> tuple[str, ...]:
            return tuple(x for x, _ in bars if x != c)

        if which == "high":
            colour = max(bars, key=lambda b: b[1])[0]
            return Example(
                img,
                rng.choice(BAR_Q_HIGH),
                BAR_A_HIGH.format(colour=colour),
                kind,
                (colour,),
                others(colour),
                tuple(bars),
            )
        if which == "low":
            colour = min(bars, key=lambda b: b[1])[0]
            return Example(
                img,
                rng.choice(BAR_Q_LOW),
                BAR_A_LOW.format(colour=colour),
                kind,
                (colour,),
                others(colour),
                tuple(bars),
            )
        colour, value = rng.choice(bars)
        return Example(
            img,
            rng.choice(BAR_Q_VALUE).format(colour=colour),
            BAR_A_VALUE.format(colour=colour, value=value),
            kind,
            (str(value),),
            tuple(str(v) for v in range(1, 6) if v != value),
            tuple(bars),
        )
    if kind == "text":
        text = rng.choice(WORDS) if rng.random() < 0.5 else str(rng.randint(10, 99))
        img = _text_image(rng, text)
        forbidden = tuple(w for w in WORDS if w != text)
        return Example(img, rng.choice(TEXT_Q), TEXT_A.format(text=text), kind, (text,), forbidden, (text,))
    if kind == "describe":
        n = rng.randint(1, 2)
        img, objs = _shape_scene(rng, n)
        names = [f"{c} {s}" for c, s in objs]
        if n == 1:
            answer = rng.choice(DESCRIBE_A1).format(o1=names[0])
        else:
            answer = rng.choice(DESCRIBE_A2).format(o1=names[0], o2=names[1])
        present = {w for c, s in objs for w in (c, s)}
        forbidden = tuple(w for w in (*COLOURS, *SHAPES) if w not in present)
        return Example(img, rng.choice(DESCRIBE_Q), answer, kind, tuple(names), forbidden, tuple(objs))
    raise ValueError(f"unknown kind {kind!r}")


def make_examples(seed: int, n: int, kinds: tuple[str, ...] | None = None) -> list[Example]:
    """``n`` examples from ``seed``; kinds cycle through ``kinds`` (all kinds by default)."""
    rng = random.Random(seed)
    kinds = kinds or KINDS
    return [make_example(rng, kinds[i % len(kinds)]) for i in range(n)]


# --------------------------------------------------------------------------- demo assets
def _video_frames(kind: str, n: int = 8) -> list[Image.Image]:
    frames = []
    for t in range(n):
        img, draw = _canvas()
        if kind == "moving_circle":  # a red circle moving left -> right
            cx = 24 + t * 64 // (n - 1)
            _draw_shape(draw, "circle", "red", cx, 56, 22)
        else:  # a blue bar growing
            draw.line((4, 100, SIZE - 4, 100), fill=(0, 0, 0), width=2)
            h = 10 + t * 10
            draw.rectangle((44, 100 - h, 68, 100), fill=COLOURS["blue"])
        frames.append(img)
    return frames


def write_example_assets(out_dir, seed: int = 7) -> list[dict]:
    """Write demo PNGs, two 8-frame 112x112 mp4 clips (mp4v) and ``examples.json`` to ``out_dir``."""
    import json
    from pathlib import Path

    import cv2
    import numpy as np

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)

    def first(kind, pred=lambda e: True):
        while True:
            e = make_example(rng, kind)
            if pred(e):
                return e

    pos = first("position")
    picks = [
        ("shapes_left_right.png", pos, "where is the {} {}?".format(*pos.objects[0]), "position"),
        ("bar_chart.png", first("bar"), "which bar is the highest?", "bar"),
        ("word.png", first("text", lambda e: not e.objects[0].isdigit()), "what does it say?", "text"),
        ("number.png", first("text", lambda e: e.objects[0].isdigit()), "what is written here?", "text"),
        ("describe.png", first("describe", lambda e: len(e.objects) == 2), "describe the image.", "describe"),
        ("one_shape.png", first("shape"), "what shape is this?", "shape"),
    ]
    meta = []
    for fname, e, prompt, kind in picks:
        e.image.save(out / fname)
        meta.append({"file": fname, "prompt": prompt, "kind": kind})
    for name, prompt in (("moving_circle", "describe the image."), ("growing_bar", "describe the image.")):
        writer = cv2.VideoWriter(str(out / f"{name}.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 4, (SIZE, SIZE))
        for f in _video_frames(name):
            writer.write(cv2.cvtColor(np.asarray(f), cv2.COLOR_RGB2BGR))
        writer.release()
        meta.append({"file": f"{name}.mp4", "prompt": prompt, "kind": "video"})
    (out / "examples.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
