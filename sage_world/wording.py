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

import functools
import itertools
import random
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .scenes import COLOURS, DEFAULT, MAX_OBJECTS, PLACES, SHAPES, Example, Style, ask_scene, make_example, shape_scene

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

#: Questions about a picture of one shape written by a helper that saw neither the templates, the wordings
#: above nor the free wordings (48, 8 per kind), added here unread and graded only after run 10 trained
#: (``scripts/check_builtin_pair.py --style blind``); no run trains on them.
BLIND: dict[str, tuple[str, ...]] = {
    "shape": (
        "What shape is this?",
        "which shape do you see in the picture",
        "Can you tell me what kind of shape is drawn here?",
        "Is it a circle or a square?",
        "identify the shape",
        "hey, what's that shape called?",
        "Could you please let me know which geometric figure appears in this image?",
        "what is the object in my drawing",
    ),
    "colour": (
        "What colour is the shape?",
        "what color is it",
        "Can you tell me the colour of the object in this picture?",
        "Which color has been used for the shape?",
        "tell me its colour",
        "Is the shape red or blue?",
        "Hi! Could you please say what colour that thing is?",
        "what colour did i paint it",
    ),
    "size": (
        "Is the shape large or small?",
        "how big is it",
        "Can you tell me how much space the object takes up in the image?",
        "What size is the shape?",
        "what's the size of the thing in the pic?",
        "Please describe the size of the figure in my drawing.",
        "roughly how big is the shape compared to the whole picture",
        "How large does the shape look in this picture?",
    ),
    "position": (
        "Where is the shape?",
        "where in the picture is it located",
        "Can you tell me the position of the object in the image?",
        "Which part of the drawing is the shape in?",
        "Is it at the top left or the bottom right?",
        "whereabouts is the thing placed",
        "Please say where the figure sits in this image.",
        "what's its location in the picture",
    ),
    "count": (
        "How many shapes are there?",
        "how many objects can you see in this picture",
        "Can you count the shapes in the image for me?",
        "What is the number of figures in my drawing?",
        "count the objects",
        "Is there one shape or more than one?",
        "Could you please tell me how many things are drawn here?",
        "how many items are in the pic",
    ),
    "describe": (
        "Describe the picture.",
        "what's in this image?",
        "Can you describe what you see in my drawing?",
        "Please give me a description of this picture.",
        "tell me about the image",
        "What does this picture show?",
        "Could you explain what is drawn here, please?",
        "describe everything you can see",
    ),
}


def _subject(example: Example) -> Any:
    """The object a short question about a shape scene is about (its colour is in the answer)."""
    words = set(re.findall(r"[a-z]+", example.answer))
    return next(t for t in example.objects if t.colour in words)


def bar_form(example: Example) -> str:
    """Which short chart question ``example`` asks: high, low, value or bars."""
    for form, cue in (("high", "is the highest"), ("low", "is the lowest"), ("bars", "bars.")):
        if cue in example.answer:
            return form
    return "value"


def surface(rng: random.Random, question: str) -> str:
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
    form = bar_form(example) if example.kind == "bar" else example.kind
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
    return replace(example, question=question if held_out else surface(rng, question))


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


def unseen_examples(
    seed: int, n: int, style: Style = DEFAULT, questions: dict[str, tuple[str, ...]] | None = None
) -> list[Example]:
    """``n`` questions in the hand-written ``UNSEEN`` wordings (or ``questions``: ``BLIND``), in turn, each
    about a fresh picture of one shape (the answer and the facts are the scene's own)."""
    rng = random.Random(seed)
    pools = UNSEEN if questions is None else questions
    wordings = [(kind, question) for kind, pool in pools.items() for question in pool]
    out = []
    for i in range(n):
        kind, question = wordings[i % len(wordings)]
        out.append(replace(lone_example(rng, kind, style), question=question))
    return out


# --------------------------------------------------------------------------- free wordings (run 10)
#: Shown where a question refers to the one object of a picture (``{colour}``/``{shape}``: its own).
_LONE_REFS = (
    "this", "it", "this shape", "the shape", "the object", "the thing", "this thing", "the figure", "this object",
    "the item", "the shape in the picture", "the object in the image", "the only shape", "the single object",
    "the shape you see", "the thing drawn here",
)  # fmt: skip
#: Per kind, how a question about one of several objects names it (never by the fact it asks).
_MANY_REFS: dict[str, tuple[str, ...]] = {
    "shape": ("the {colour} one", "the {colour} object", "the {colour} shape", "the {colour} thing",
              "the {colour} figure", "the shape in the {place}", "the object in the {place}"),
    "colour": ("the shape in the {place}", "the object in the {place}", "the {shape} in the {place}",
               "the thing in the {place}", "the {place} shape", "the figure in the {place}"),
    "size": ("the {colour} {shape}", "the {colour} one", "the {colour} object", "the {colour} shape",
             "the shape in the {place}"),
    "position": ("the {colour} {shape}", "the {colour} one", "the {colour} object", "the {colour} shape",
                 "the {colour} thing"),
}  # fmt: skip
#: Per kind, questions asked as they stand (``{ref}``: the object; ``{alt}``: a choice of answers).
_DIRECT: dict[str, tuple[str, ...]] = {
    "shape": ("what shape is {ref}?", "what is the shape of {ref}?", "which shape is {ref}?",
              "what kind of shape is {ref}?", "what type of shape is {ref}?", "what sort of shape is {ref}?",
              "{ref} is which shape?", "name the shape of {ref}.", "identify the shape of {ref}.",
              "what form does {ref} have?", "what shape does {ref} have?", "is {ref} {alt}?",
              "what shape has been drawn?", "which shape can you see?", "shape of {ref}?"),
    "colour": ("what colour is {ref}?", "what is the colour of {ref}?", "which colour is {ref}?",
               "which colour does {ref} have?", "what colour does {ref} have?", "{ref} is which colour?",
               "{ref} has which colour?", "what colour has been used for {ref}?", "what shade is {ref}?",
               "what colour is {ref} painted?", "is {ref} {alt}?", "name the colour of {ref}.",
               "identify the colour of {ref}.", "colour of {ref}?", "what colour do you see for {ref}?"),
    "size": ("is {ref} big or small?", "is {ref} large or small?", "is {ref} small or large?",
             "is {ref} big or little?", "how big is {ref}?", "how large is {ref}?", "what size is {ref}?",
             "what is the size of {ref}?", "is {ref} small?", "is {ref} large?", "is {ref} big?", "is {ref} tiny?",
             "is {ref} huge?", "would you say {ref} is large or small?", "would you call {ref} big or small?",
             "{ref} is big or small?", "size of {ref}?", "is {ref} a big one or a small one?"),
    "position": ("where is {ref}?", "where is {ref} located?", "where is {ref} placed?",
                 "where in the picture is {ref}?", "in which part of the picture is {ref}?",
                 "which part of the image is {ref} in?", "what is the position of {ref}?",
                 "what is the location of {ref}?", "where has {ref} been drawn?", "where does {ref} sit?",
                 "where can i see {ref}?", "where do you see {ref}?", "in what area is {ref}?",
                 "where exactly is {ref}?", "whereabouts is {ref}?", "which corner or side is {ref} in?",
                 "position of {ref}?", "where is {ref} on the canvas?"),
    "count": ("how many {things} are there?", "how many {things} are {there}?", "how many {things} do you see?",
              "how many {things} can you see?", "how many {things} can i see?", "what is the number of {things}?",
              "count the {things}.", "count how many {things} there are.", "give the number of {things}.",
              "what number of {things} is there?", "how many {things} does {pic} have?",
              "how many {things} does {pic} show?", "{things}: how many?", "number of {things}?",
              "how many {things} has {pic} got?", "what is the amount of {things}?"),
    "describe": ("describe {pic}.", "what does {pic} show?", "what is shown in {pic}?", "tell me about {pic}.",
                 "explain {pic}.", "what is in {pic}?", "what can you see in {pic}?", "give a description of {pic}.",
                 "what do you see?", "summarize {pic}.", "what is going on in {pic}?", "what is there in {pic}?",
                 "describe what {pic} shows.", "can you describe {pic}?", "what does {pic} contain?",
                 "give me an overview of {pic}.", "describe everything you see.", "what is this?",
                 "caption {pic}."),
}  # fmt: skip
#: Per kind, the question's core as it reads after "can you tell me", "i want to know", ...
_INDIRECT: dict[str, tuple[str, ...]] = {
    "shape": ("what shape {ref} is", "which shape {ref} is", "the shape of {ref}", "what kind of shape {ref} is"),
    "colour": ("what colour {ref} is", "the colour of {ref}", "which colour {ref} has", "what colour {ref} has"),
    "size": ("how big {ref} is", "the size of {ref}", "whether {ref} is large or small", "if {ref} is big or small",
             "how large {ref} is"),
    "position": ("where {ref} is", "the position of {ref}", "the location of {ref}", "in which part {ref} is",
                 "where {ref} is located"),
    "count": ("how many {things} there are", "the number of {things}", "how many {things} {pic} has"),
    "describe": ("what {pic} shows", "what is in {pic}", "about {pic}", "what you see"),
}  # fmt: skip
_ASKING = (
    "can you tell me {q}?", "could you tell me {q}?", "please tell me {q}.", "tell me {q}.", "i want to know {q}.",
    "i would like to know {q}.", "do you know {q}?", "let me know {q}.", "say {q}.", "can you say {q}?",
)  # fmt: skip
_ASKING_STARTS = tuple(a.split("{")[0] for a in _ASKING)
_OPENINGS = ("hey, ", "ok, ", "quick question: ", "so ", "and ", "now, ", "please, ", "hi! ")
_CLOSINGS = (" in the picture", " in this image", " here", " please", " in the drawing")
_THINGS = ("shapes", "objects", "things", "items", "figures")
_THERE = ("there", "in the picture", "in the image", "drawn", "drawn here", "shown", "visible", "in this drawing")
_PICS = ("the picture", "this picture", "the image", "this image", "the photo", "this drawing", "the scene", "this",
         "it", "the pic")  # fmt: skip
_MEDIA_WORDS = re.compile(r"\b(picture|image|photo|drawing|scene|pic|canvas|here|there)\b")
FREE_KINDS = ("shape", "colour", "count", "position", "size", "describe")


def _choice_of(rng: random.Random, right: str, pool: tuple[str, ...], article: bool) -> str:
    """ "a circle or a square" (the right answer among 2-4, in a random order)."""
    options = [right, *rng.sample([w for w in pool if w != right], rng.randint(1, 3))]
    rng.shuffle(options)
    options = [f"a {w}" if article else w for w in options]
    return ", ".join(options[:-1]) + " or " + options[-1]


_PLACE_PATTERN = re.compile(r"\b(" + "|".join(sorted(PLACES, key=len, reverse=True)) + r")\b")
_SLOT_WORDS = {**{c: "{colour}" for c in COLOURS}, **{s: "{shape}" for s in SHAPES}}


def grading_form(question: str) -> str:
    """``question`` as the grading's exclusion compares it: lower case, "what is" for "what's", "colour" for
    "color", colours and shapes as slots, marks apart, no closing mark."""
    text = re.sub(r"\bwhat\s*'\s*s\b", "what is", question.lower()).replace("color", "colour")
    text = _PLACE_PATTERN.sub(" {place} ", text)
    words = [_SLOT_WORDS.get(w, w) for w in re.findall(r"\{place\}|[a-z]+|[^\sa-z]", text)]
    while words and words[-1] in ("?", ".", "!"):
        words.pop()
    return " ".join(words)


@functools.cache
def _graded() -> frozenset[str]:
    """Questions the grading asks (held-out and hand-written), which the free wordings never produce as they stand."""
    graded = [w for pool in (*UNSEEN.values(), *BLIND.values()) for w in pool]
    templates = [w for pool in (*HELD_OUT.values(), *LONE_HELD_OUT.values()) for w in pool]
    return frozenset(grading_form(w) for w in (*graded, *map(fill_slots, templates)))


def _is_graded(question: str) -> bool:
    """Whether ``question`` is one the grading asks, up to surface forms, colours and shapes."""
    return grading_form(question) in _graded()


def free_question(rng: random.Random, example: Example) -> str:
    """A question for ``example`` (a shape scene's shape, colour, count, position, size or describe question)
    put together from the free wordings: a core question in one of several forms, asked directly or after
    "can you tell me", with an opening or a closing at times, in a visitor's surface forms; never a question
    the grading asks (held-out templates, ``UNSEEN``, ``BLIND``) as it stands."""
    for _ in range(50):
        core, question = _free_core(rng, example)
        question = surface(rng, question)
        if not (_is_graded(core) or _is_graded(question)):
            return question
    raise RuntimeError("no free wording found")  # pragma: no cover - 50 draws all graded


def _free_core(rng: random.Random, example: Example) -> tuple[str, str]:
    """The core question for ``example``, and the question with an opening or a closing at times."""
    kind, lone = example.kind, len(example.objects) == 1
    slots = {"things": rng.choice(_THINGS), "there": rng.choice(_THERE), "pic": rng.choice(_PICS)}
    if kind in _MANY_REFS:
        t = _subject(example)
        ref = rng.choice(_LONE_REFS if lone and rng.random() < 0.85 else _MANY_REFS[kind])
        slots["ref"] = ref.format(colour=t.colour, shape=t.shape, place=t.place)
        if kind == "shape":
            slots["alt"] = _choice_of(rng, t.shape, SHAPES, article=True)
        elif kind == "colour":
            slots["alt"] = _choice_of(rng, t.colour, tuple(COLOURS), article=False)
    if rng.random() < 0.3:
        question = rng.choice(_ASKING).format(q=rng.choice(_INDIRECT[kind]).format(**slots))
    else:
        question = rng.choice(_DIRECT[kind]).format(**slots)
    core = question
    if rng.random() < 0.25 and not question.startswith(_ASKING_STARTS) and not _MEDIA_WORDS.search(question):
        question = question[:-1] + rng.choice(_CLOSINGS) + question[-1]
    if rng.random() < 0.15:
        question = rng.choice(_OPENINGS) + question
    return core, question


def free_example(rng: random.Random, style: Style = DEFAULT, lone: float = 0.6) -> Example:
    """A shape-scene question of a random :data:`FREE_KINDS` kind in a free wording, about a picture of one
    object (share ``lone``) or of 2-6."""
    kind = rng.choice(FREE_KINDS)
    n = 1 if rng.random() < lone else rng.randint(2, MAX_OBJECTS)
    image, things, background, label_map = shape_scene(rng, n, style)
    example = replace(ask_scene(rng, kind, image, things, background), labels=label_map)
    return replace(example, question=free_question(rng, example))


def _alternatives(kind: str) -> tuple[str, ...]:
    """The ``{alt}`` choices a free wording offers, with slots (2, 3 or 4 answers)."""
    word = "a {shape}" if kind == "shape" else "{colour}"
    return tuple(", ".join([word] * (n - 1)) + f" or {word}" for n in (2, 3, 4))


@functools.cache
def free_wordings() -> dict[str, tuple[str, ...]]:
    """Per :data:`FREE_KINDS` kind, every core question :func:`free_question` puts together, with the slots
    ``{colour}``, ``{shape}`` and ``{place}`` left in (without its openings, closings and surface forms)."""
    fills = {
        "{things}": _THINGS,
        "{there}": _THERE,
        "{pic}": _PICS,
    }
    out: dict[str, tuple[str, ...]] = {}
    for kind in FREE_KINDS:
        cores = [*_DIRECT[kind], *(a.replace("{q}", i) for a in _ASKING for i in _INDIRECT[kind])]
        kind_fills = {**fills, "{ref}": (*_LONE_REFS, *_MANY_REFS.get(kind, ())), "{alt}": _alternatives(kind)}
        questions = [q for core in cores for q in every_filling(core, kind_fills)]
        out[kind] = tuple(q for q in dict.fromkeys(questions) if not _is_graded(fill_slots(q)))
    return out


def every_filling(wording: str, fills: dict[str, tuple[str, ...]]) -> Iterator[str]:
    """``wording`` with each of its ``fills`` slots filled every way they list, every combination."""
    used = [f for f in fills if f in wording]
    for values in itertools.product(*(fills[f] for f in used)):
        question = wording
        for field, value in zip(used, values, strict=True):
            question = question.replace(field, value)
        yield question


#: A sample value for each slot a template or wording may have.
SLOT_SAMPLES = {
    "{colour}": "red",
    "{shapes}": "circles",
    "{shape}": "circle",
    "{place}": "top left",
    "{n}": "four",
    "{value}": "3",
}


def fill_slots(template: str) -> str:
    """``template`` with every slot given its :data:`SLOT_SAMPLES` value."""
    for slot, value in SLOT_SAMPLES.items():
        template = template.replace(slot, value)
    return template


#: The openings and closings a free wording may have around its core question.
FREE_OPENINGS = tuple(o.strip() for o in _OPENINGS)
FREE_CLOSINGS = tuple(c.strip() for c in _CLOSINGS)
