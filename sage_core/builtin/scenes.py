"""Synthetic visual question answering data for the built-in model pair.

Everything here is deterministic given a :class:`random.Random` instance, so a
seed reproduces a data set exactly.  Images are 112x112 RGB (the built-in
processor resizes them to 128x128: 16 visual tokens); clips are 8 such frames.

Task kinds (benchmark-like, kept large enough to be learnable by a ~4 M
parameter model trained on two CPU cores):

``shape``     one big shape, "what shape is this?"            -> "it is a circle."
``colour``    1-2 shapes, "what colour is the square?"        -> "the square is red."
``count``     1-2 shapes, "how many shapes are there?"        -> "there are two shapes."
``position``  2 shapes, "where is the red circle?"            -> "the red circle is on the left."
``bar``       3-bar chart, highest / lowest bar, or a value   -> "the blue bar is the highest."
``text``      a rendered word or two-digit number             -> "it says cat." / "it says 42."
``describe``  1-2 shapes, free-form description with randomly chosen wording.
``video``     8 frames: a shape moving to one side, or a bar growing or shrinking
              "what happens in the video?"                    -> "the red circle moves to the right."

Objects sit in fixed slots with a small jitter (see :func:`_shape_scene`).

:func:`grade` checks the facts an answer must contain (ordered key phrases)
and the words it must not contain, so it tolerates free wording around them.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

SIZE = 112
JITTER = 2  # px: how far an object may move from its slot
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
KINDS = ("shape", "colour", "count", "position", "bar", "text", "describe", "video")
VIDEO_FRAMES = 8  # frames in a clip (the app samples 8 frames by default)
VIDEO_FPS = 4.0

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

VIDEO_Q = ("what happens in the video?", "describe the video.", "what do you see in the video?")
VIDEO_A_MOVE = "the {colour} {shape} moves to the {side}."
VIDEO_A_BAR = "the {colour} bar {verb}."

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
    *VIDEO_Q,
    VIDEO_A_MOVE,
    VIDEO_A_BAR,
)


def vocabulary() -> list[str]:
    """Every word / punctuation token the data can produce (digits excluded: see tokenizer)."""
    words: set[str] = set(COLOURS) | set(SHAPES) | set(WORDS) | set(NUMBER_WORDS.values())
    words |= {"left", "right", "highest", "lowest", "colour", "color", "grows", "shrinks"}
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
    pairs, or the rendered text (one entry); for a video, the moving shape
    ``(colour, shape, side)`` or the changing bar ``(colour, verb)``.
    ``frames``: a video's frames (``image`` is then its first frame); empty for an image.
    """

    image: Image.Image = field(repr=False, compare=False)
    question: str
    answer: str
    kind: str
    required: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    objects: tuple = ()
    frames: tuple[Image.Image, ...] = field(default=(), repr=False, compare=False)


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
    """1 or 2 big shapes (radius 20-24 px); with 2 they differ in shape and colour, left first.

    Shapes sit in fixed slots (the centre, or the middle of the left and right halves) with a
    jitter of JITTER px: a ViT of this size, trained for minutes, does not learn shape features
    that hold at any offset within its 14-16 px patches, but learns fixed slots quickly.
    """
    img, draw = _canvas()
    shapes = rng.sample(SHAPES, n)
    colours = rng.sample(list(COLOURS), n)
    centres = [SIZE // 2] if n == 1 else [SIZE // 4, 3 * SIZE // 4]
    objs = []
    for i, cx in enumerate(centres):
        r = rng.randint(20, 24)
        _draw_shape(draw, shapes[i], colours[i], _jitter(rng, cx), _jitter(rng, SIZE // 2), r)
        objs.append((colours[i], shapes[i]))
    return img, objs


def _jitter(rng: random.Random, x: int) -> int:
    return x + rng.randint(-JITTER, JITTER)


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
    x = (SIZE - w) // 2 - left + rng.randint(-JITTER, JITTER)
    y = (SIZE - h) // 2 - top + rng.randint(-JITTER, JITTER)
    draw.text((x, y), text, fill=(0, 0, 0), font=font)
    return img


# --------------------------------------------------------------------------- examples
def draw_scene(rng: random.Random, kind: str) -> tuple[Image.Image, tuple]:
    """A random image for a question of ``kind``, and its objects (see :class:`Example`)."""
    objs: list
    if kind == "shape":
        img, objs = _shape_scene(rng, 1)
    elif kind in ("colour", "count", "describe"):
        img, objs = _shape_scene(rng, rng.randint(1, 2))
    elif kind == "position":
        img, objs = _shape_scene(rng, 2)
    elif kind == "bar":
        img, objs = _bar_chart(rng)
    elif kind == "text":
        text = rng.choice(WORDS) if rng.random() < 0.5 else str(rng.randint(10, 99))
        img, objs = _text_image(rng, text), [text]
    elif kind == "video":
        raise ValueError("a video has frames, not one image: use make_example(rng, 'video')")
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return img, tuple(objs)


def scene_kinds(example: Example) -> tuple[str, ...]:
    """The kinds of question that can be asked about ``example``'s image."""
    if example.kind in ("bar", "text", "video"):
        return (example.kind,)
    if len(example.objects) == 1:
        return ("shape", "colour", "count", "describe")
    return ("colour", "count", "position", "describe")


def ask(rng: random.Random, kind: str, image: Image.Image, objects: tuple) -> Example:
    """A random question of ``kind`` about a scene drawn by :func:`draw_scene`."""
    objs = list(objects)
    if kind == "shape":
        _, shape = objs[0]
        return Example(
            image,
            rng.choice(SHAPE_Q),
            SHAPE_A.format(shape=shape),
            kind,
            (shape,),
            tuple(s for s in SHAPES if s != shape),
            objects,
        )
    if kind == "colour":
        colour, shape = rng.choice(objs)
        return Example(
            image,
            rng.choice(COLOUR_Q).format(shape=shape),
            COLOUR_A.format(shape=shape, colour=colour),
            kind,
            (colour,),
            tuple(c for c in COLOURS if c != colour),
            objects,
        )
    if kind == "count":
        n = len(objs)
        return Example(
            image,
            rng.choice(COUNT_Q),
            COUNT_A1 if n == 1 else COUNT_A2,
            kind,
            (NUMBER_WORDS[n],),
            tuple(w for k, w in NUMBER_WORDS.items() if k != n),
            objects,
        )
    if kind == "position":
        i = rng.randint(0, 1)
        side, other = ("left", "right") if i == 0 else ("right", "left")
        colour, shape = objs[i]
        answer = POSITION_A.format(colour=colour, shape=shape, side=side)
        if rng.random() < 0.5:
            q = rng.choice(POSITION_Q).format(colour=colour, shape=shape)
            return Example(image, q, answer, kind, (side,), (other,), objects)
        q = rng.choice(POSITION_Q_WHICH).format(side=side)
        oc, os_ = objs[1 - i]
        return Example(image, q, answer, kind, (shape,), (os_, oc), objects)
    if kind == "bar":
        which = rng.choice(("high", "low", "value"))

        def others(c: str) -> tuple[str, ...]:
            return tuple(x for x, _ in objs if x != c)

        if which in ("high", "low"):
            pick = max if which == "high" else min
            colour = pick(objs, key=lambda b: b[1])[0]
            return Example(
                image,
                rng.choice(BAR_Q_HIGH if which == "high" else BAR_Q_LOW),
                (BAR_A_HIGH if which == "high" else BAR_A_LOW).format(colour=colour),
                kind,
                (colour,),
                others(colour),
                objects,
            )
        colour, value = rng.choice(objs)
        return Example(
            image,
            rng.choice(BAR_Q_VALUE).format(colour=colour),
            BAR_A_VALUE.format(colour=colour, value=value),
            kind,
            (str(value),),
            tuple(str(v) for v in range(1, 6) if v != value),
            objects,
        )
    if kind == "text":
        text = objs[0]
        forbidden = tuple(w for w in WORDS if w != text)
        return Example(image, rng.choice(TEXT_Q), TEXT_A.format(text=text), kind, (text,), forbidden, objects)
    if kind == "describe":
        names = [f"{c} {s}" for c, s in objs]
        if len(objs) == 1:
            answer = rng.choice(DESCRIBE_A1).format(o1=names[0])
        else:
            answer = rng.choice(DESCRIBE_A2).format(o1=names[0], o2=names[1])
        present = {w for c, s in objs for w in (c, s)}
        forbidden = tuple(w for w in (*COLOURS, *SHAPES) if w not in present)
        return Example(image, rng.choice(DESCRIBE_Q), answer, kind, tuple(names), forbidden, objects)
    raise ValueError(f"unknown kind {kind!r}")


def make_video_example(rng: random.Random) -> Example:
    """A clip of VIDEO_FRAMES frames: a shape moving from one slot to the other, or a bar
    growing or shrinking; the question asks what happens."""
    frames = []
    required: tuple[str, ...]
    forbidden: tuple[str, ...]
    objects: tuple[str, ...]
    if rng.random() < 0.5:
        (colour,) = rng.sample(list(COLOURS), 1)
        (shape,) = rng.sample(SHAPES, 1)
        side = rng.choice(("left", "right"))
        start, end = (SIZE // 4, 3 * SIZE // 4) if side == "right" else (3 * SIZE // 4, SIZE // 4)
        r, cy = rng.randint(20, 24), _jitter(rng, SIZE // 2)
        for t in range(VIDEO_FRAMES):
            img, draw = _canvas()
            _draw_shape(draw, shape, colour, start + (end - start) * t // (VIDEO_FRAMES - 1), cy, r)
            frames.append(img)
        answer = VIDEO_A_MOVE.format(colour=colour, shape=shape, side=side)
        other = "left" if side == "right" else "right"
        required, forbidden, objects = (f"{colour} {shape}", side), (other,), (colour, shape, side)
    else:
        (colour,) = rng.sample(list(COLOURS), 1)
        verb = rng.choice(("grows", "shrinks"))
        x0 = _jitter(rng, SIZE // 2 - 12)
        for t in range(VIDEO_FRAMES):
            img, draw = _canvas()
            draw.line((4, 100, SIZE - 4, 100), fill=(0, 0, 0), width=2)
            h = 10 + 10 * (t if verb == "grows" else VIDEO_FRAMES - 1 - t)
            draw.rectangle((x0, 100 - h, x0 + 24, 100), fill=COLOURS[colour])
            frames.append(img)
        answer = VIDEO_A_BAR.format(colour=colour, verb=verb)
        other = "shrinks" if verb == "grows" else "grows"
        required, forbidden, objects = (colour, verb), (other,), (colour, verb)
    question = rng.choice(VIDEO_Q)
    return Example(frames[0], question, answer, "video", required, forbidden, objects, tuple(frames))


def make_example(rng: random.Random, kind: str | None = None) -> Example:
    """A random example (of ``kind`` if given, else of a random kind)."""
    kind = kind or rng.choice(KINDS)
    if kind == "video":
        return make_video_example(rng)
    image, objects = draw_scene(rng, kind)
    return ask(rng, kind, image, objects)


def make_examples(seed: int, n: int, kinds: tuple[str, ...] | None = None) -> list[Example]:
    """``n`` examples from ``seed``; kinds cycle through ``kinds`` (all kinds by default)."""
    rng = random.Random(seed)
    kinds = kinds or KINDS
    return [make_example(rng, kinds[i % len(kinds)]) for i in range(n)]


# --------------------------------------------------------------------------- demo assets
def example_picks(seed: int = 7) -> list[tuple[str, Example]]:
    """The demo examples (file name, example) that :func:`write_example_assets` writes."""
    rng = random.Random(seed)

    def first(kind: str, question: str, pred=lambda e: True) -> Example:
        while True:
            e = make_example(rng, kind)
            if e.question == question and pred(e):
                return e

    moving = first("video", "what happens in the video?", lambda e: e.objects == ("red", "circle", "right"))
    return [
        ("shapes_left_right.png", first("position", "which shape is on the right?")),
        ("bar_chart.png", first("bar", "which bar is the highest?")),
        ("word.png", first("text", "what does it say?", lambda e: not e.objects[0].isdigit())),
        ("number.png", first("text", "what is written here?", lambda e: e.objects[0].isdigit())),
        ("describe.png", first("describe", "describe the image.", lambda e: len(e.objects) == 2)),
        ("one_shape.png", first("shape", "what shape is this?")),
        ("moving_circle.mp4", moving),
        ("growing_bar.mp4", first("video", "what happens in the video?", lambda e: e.objects == ("blue", "grows"))),
    ]


def write_example_assets(out_dir, seed: int = 7) -> list[dict]:
    """Write demo PNGs, two 8-frame 112x112 mp4 clips (mp4v) and ``examples.json`` to ``out_dir``.

    Each entry of ``examples.json`` holds the file, the prompt, the kind and the true answer.
    """
    import json
    from pathlib import Path

    import cv2
    import numpy as np

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    picks = example_picks(seed)
    meta = []
    for fname, e in picks:
        if e.frames:
            size = (SIZE, SIZE)
            writer = cv2.VideoWriter(str(out / fname), cv2.VideoWriter.fourcc(*"mp4v"), VIDEO_FPS, size)
            for f in e.frames:
                writer.write(cv2.cvtColor(np.asarray(f), cv2.COLOR_RGB2BGR))
            writer.release()
        else:
            e.image.save(out / fname)
        meta.append({"file": fname, "prompt": e.question, "kind": e.kind, "answer": e.answer})
    (out / "examples.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta
