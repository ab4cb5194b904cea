"""Questions as people type them: the training questions of :mod:`.scenes` reworded.

:func:`reword` gives an example of a shape scene or a chart a question in other words (synonyms,
other word orders, "what's", short forms such as "shape?", "color" for "colour", capitals, no
question mark, "this" / "it" for a lone shape); the answer and the facts stay as they are.
``TRAINING`` wordings are what the training sees; ``HELD_OUT`` wordings no training template has,
and are what the quality check grades (``scripts/check_builtin_pair.py --style paraphrased``).
``UNSEEN`` wordings were written by hand, not by filling a template, about a picture of one shape (as a
visitor asks about a shape they drew or rendered); no run trains on them (``--style unseen``).

Words outside the pair's vocabulary ("please", "do", "kind") become one unknown token; the
training wordings use some of them, so that the pair learns to read past them.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any

from .scenes import DEFAULT, Example, Style, ask_scene, make_example, shape_scene

#: Per kind, wordings with the slots ``{colour}``, ``{shape}`` and ``{place}`` of the object the
#: question is about. ``lone``: wordings for a scene of one object ("this", "it").
TRAINING: dict[str, tuple[str, ...]] = {
    "shape": (
        "what shape is the {colour} one?", "what's the shape of the {colour} object?", "shape of the {colour} object?",
        "{colour} object: which shape?", "tell me the shape of the {colour} object.",
        "the {colour} object is what shape",        "which shape do you see in {colour}?",
        "what kind of shape is the {colour} object?", "{colour} shape?",
    ),
    "colour": (
        "what color is the shape in the {place}", "which colour is the shape in the {place}?",
        "what's the colour of the shape in the {place}?", "colour of the shape in the {place}?",
        "{place}: what colour?", "tell me the colour of the {place} shape.", "the shape in the {place} is what color?",
        "what colour is the {shape} in the {place}?", "which color do you see in the {place}?",
    ),
    "count": (
        "how many shapes?", "how many objects are there?", "count the objects.", "how many shapes can you see",
        "number of shapes?", "tell me how many shapes there are.", "how many things are in the image?",
        "shapes: how many?",
    ),
    "position": (
        "where's the {colour} {shape}?", "where is the {colour} {shape}", "{colour} {shape}: where?",
        "in which part is the {colour} {shape}?", "tell me where the {colour} {shape} is.",
        "where can i find the {colour} {shape}?", "location of the {colour} {shape}?",
    ),
    "size": (
        "is the {colour} {shape} big or small?", "{colour} {shape}: large or small?", "how big is the {colour} {shape}",
        "is the {colour} {shape} small?", "is the {colour} {shape} large?", "what size is the {colour} {shape}?",
        "tell me if the {colour} {shape} is large or small.",
    ),
    "describe": (
        "describe this.", "describe the picture.", "what is in the image?", "what do you see?", "describe it",
        "tell me what you see.", "what's in this picture?", "describe this image in detail", "give details.",
        "please describe the image.", "what can you see?",
    ),
    "high": ("which bar is highest?", "highest bar?", "what's the tallest bar?", "tell me the highest bar."),
    "low": ("which bar is lowest?", "lowest bar?", "what's the shortest bar?", "tell me the lowest bar."),
    "value": ("value of the {colour} bar?", "what's the {colour} bar's value?", "how high is the {colour} bar",
              "{colour} bar: what value?", "tell me the value of the {colour} bar."),
    "bars": ("how many bars?", "count the bars", "number of bars?", "how many bars can you see?"),
    "chart": ("describe this chart.", "what does the chart show?", "read this chart", "tell me about the chart.",
              "describe the bars.", "what's in the chart?"),
}  # fmt: skip
LONE: dict[str, tuple[str, ...]] = {
    "shape": ("what shape is this?", "what shape is it?", "shape?", "which shape is this", "what's this shape?",
              "tell me the shape.", "what is it?"),
    "colour": ("what colour is this?", "what color is it?", "colour?", "color?", "which colour is it",
               "what's the colour of this shape?", "what colour is the {shape}?"),
    "size": ("is it large or small?", "is this big or small?", "large or small?", "how big is it?",
             "is the {shape} large or small?"),
    "position": ("where is it?", "where is the shape?", "where is this {shape}?", "where?"),
}  # fmt: skip
#: Wordings no training template has (the held-out grading).
HELD_OUT: dict[str, tuple[str, ...]] = {
    "shape": ("the {colour} object has which shape?", "tell me which shape the {colour} object is.",
              "which shape is the {colour} object?"),
    "colour": ("the shape in the {place} has which colour?", "which colour is in the {place}?",
               "tell me which color the {place} shape is."),
    "count": ("how many objects are in the picture?", "count the objects in the image.", "how many shapes do you see?"),
    "position": ("where can you see the {colour} {shape}?", "in what part of the picture is the {colour} {shape}?",
                 "tell me the place of the {colour} {shape}."),
    "size": ("is the {colour} {shape} small or large?", "how large is the {colour} {shape}?",
             "the {colour} {shape} is large or small?"),
    "describe": ("tell me what is in the image.", "what can you see in this picture?", "describe what you see."),
    "high": ("which of the bars is the highest?",), "low": ("which of the bars is the lowest?",),
    "value": ("what value does the {colour} bar have?",), "bars": ("how many bars does the chart have?",),
    "chart": ("what can you read in the chart?", "tell me what the chart shows."),
}  # fmt: skip
LONE_HELD_OUT: dict[str, tuple[str, ...]] = {
    "shape": ("which shape do you see?", "what shape do you see?"),
    "colour": ("which color is this shape?", "tell me its colour."),
    "size": ("is this shape large or small?",),
    "position": ("where is this?",),
}  # fmt: skip
REWORDED_KINDS = ("shape", "colour", "count", "position", "size", "describe", "bar", "chart")
#: Questions written by hand about a picture of one shape, each as it stands (no slots, no surface changes):
#: what a visitor types, in words no template of the project produces (a test checks); some words are outside
#: the vocabulary ("name", "drawn", "located"), as a visitor's are. The fixed set the unseen-wordings check asks.
UNSEEN: dict[str, tuple[str, ...]] = {
    "shape": ("can you tell me what shape this is?", "name the shape in the picture.", "what shape do i see here?",
              "what is the shape drawn here?", "is this a circle, a square, a triangle or a cross?"),
    "colour": ("what colour does this shape have?", "which colour is used here?", "tell me the color of the object.",
               "what is the colour of the thing in the picture?", "the shape here is which colour?"),
    "size": ("is the shape big or little?", "would you call this shape large or small?", "how large is the object?",
             "is the object in the picture small?", "what size is this shape?"),
    "position": ("where in the picture is the shape?", "where is the object located?",
                 "which part of the picture is the shape in?", "where has the shape been drawn?",
                 "what is the position of the shape?"),
    "count": ("how many shapes can i see?", "what is the number of shapes?", "how many things are drawn here?",
              "count how many shapes there are.", "how many objects does the picture have?"),
    "describe": ("what does this picture show?", "tell me about this image.", "explain what is in the picture.",
                 "what is shown here?", "can you describe this picture?"),
}  # fmt: skip


def _subject(example: Example) -> Any:
    """The object a short question about a shape scene is about (its colour is in the answer)."""
    words = set(re.findall(r"[a-z]+", example.answer))
    return next(t for t in example.objects if t.colour in words)


def _bar_form(example: Example) -> str:
    """Which short chart question ``example`` asks: high, low, value or bars."""
    for form, cue in (("high", "is the highest"), ("low", "is the lowest"), ("bars", "bars.")):
        if cue in example.answer:
            return form
    return "value"


def _surface(rng: random.Random, question: str) -> str:
    """Capitals, "what's", "color", no closing mark: the ways a visitor types the same words."""
    if rng.random() < 0.3:
        question = question.replace("what is", "what's").replace("colour", "color")
    if rng.random() < 0.3:
        question = question.rstrip("?.")
    roll = rng.random()
    if roll < 0.25:
        question = question[:1].upper() + question[1:]
    elif roll < 0.35:
        question = question.upper()
    return question


def reword(rng: random.Random, example: Example, held_out: bool = False) -> Example:
    """``example`` with its question in other words (``held_out``: wordings no training template
    has); an example of another kind (text, clips) comes back unchanged."""
    if example.kind not in REWORDED_KINDS:
        return example
    form = _bar_form(example) if example.kind == "bar" else example.kind
    slots: dict[str, str] = {}
    if example.kind in ("shape", "colour", "position", "size"):
        t = _subject(example)
        slots = {"colour": t.colour, "shape": t.shape, "place": t.place}
        if example.kind == "colour" and sum(o.shape == t.shape for o in example.objects) > 1:
            slots["shape"] = "shape"  # "what colour is the shape in the ...": the shape does not single it out
    elif form == "value":
        words = set(re.findall(r"[a-z]+", example.answer))
        slots = {"colour": next(c for c, _ in example.objects if c in words)}
    pool = (HELD_OUT if held_out else TRAINING)[form]
    lone = (LONE_HELD_OUT if held_out else LONE).get(form, ())
    if len(example.objects) == 1 and lone and rng.random() < 0.7:
        pool = lone
    question = rng.choice(pool).format(**slots)
    return replace(example, question=question if held_out else _surface(rng, question))


def lone_example(rng: random.Random, kind: str, style: Style = DEFAULT) -> Example:
    """A question of ``kind`` (shape, colour, size, position) about a scene of one object."""
    image, things, background, label_map = shape_scene(rng, 1, style)
    return replace(ask_scene(rng, kind, image, things, background), labels=label_map)


def held_out_examples(seed: int, n: int, style: Style = DEFAULT) -> list[Example]:
    """``n`` examples of the reworded kinds, each asked in a wording no training template has; every
    third question about one object is about a scene of that object alone ("this", "it")."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = REWORDED_KINDS[i % len(REWORDED_KINDS)]
        lone = kind in LONE_HELD_OUT and i // len(REWORDED_KINDS) % 3 == 0
        example = lone_example(rng, kind, style) if lone else make_example(rng, kind, style)
        out.append(reword(rng, example, held_out=True))
    return out


def unseen_examples(seed: int, n: int, style: Style = DEFAULT) -> list[Example]:
    """``n`` questions in the hand-written ``UNSEEN`` wordings, in turn, each about a fresh picture of one
    shape (the answer and the facts are the scene's own)."""
    rng = random.Random(seed)
    wordings = [(kind, question) for kind, pool in UNSEEN.items() for question in pool]
    out = []
    for i in range(n):
        kind, question = wordings[i % len(wordings)]
        out.append(replace(lone_example(rng, kind, style), question=question))
    return out
