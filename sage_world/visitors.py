"""Run 13: the questions visitors asked that run 10 could not read or was never taught.

Tried on run 10 (issue 55): "How many triangles are there?", "how many circles are in the picture?",
"which is the largest shape?", "What does this graph show?", "descrbe the imgae in detial." and "is there a
red cross?" were declined or answered as another question. Each is a kind of question the world can answer
from the picture it drew, so run 13 teaches them:

``count_kind``   "how many circles are there?"  -> "there are two circles." / "there is one circle." /
                 "there are no circles."
``superlative``  "which is the largest shape?"  -> "the red circle is the largest." (also its colour or its
                 place); asked only where one shape is the only large one (or the only small one): the world
                 draws two sizes, so "largest" names one shape only there
``exists``       "is there a red cross?"        -> "yes, there is a red cross." / "no, there is no red cross."
``graph``        "what does this graph show?"   -> a chart's answer; "which bar is the biggest?" -> the highest

and reads the words they came in: plurals of the world's shapes, superlatives, "graph", "pictures", and common
typos of the world's and the visitors' words (:data:`TYPOS`: each typo a token of its own whose embedding
starts as its word's, so the grown pair reads it as that word before any training). The world's colours have
no plural a question uses ("how many red shapes" asks a shape's count), so none is taught.

The words (:data:`.vocabulary.MORE_VISITOR_WORDS`, appended by ``--more-visitor-words``; the plurals, superlatives
and typos) live in :mod:`.vocabulary`; :func:`visitor_example` draws a training example of these kinds (``--visitors``);
:data:`HELD_OUT` wordings are never produced by it and are what ``scripts/check_builtin_pair.py --style
visitors`` grades, beside the wordings visitors used (:data:`ASKED`).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import replace

from .scenes import (
    COLOURS,
    CONCLUDING_KINDS,
    DEFAULT,
    NUMBER_WORDS,
    SHAPES,
    SIZES,
    Example,
    Style,
    ask_chart,
    bar_chart,
    make_example,
    shape_scene,
    shown,
)
from .vocabulary import PLURALS, SUPERLATIVES, TYPOS
from .wording import bar_form, every_filling, surface

KINDS = ("count_kind", "superlative", "exists", "graph")
#: The kinds that need looking at every shape (run 13b trains on them more: ``--counts``); the check grades their
#: answers on what follows the last "so" (:data:`.scenes.CONCLUDING_KINDS`, the same kinds).
LOOKING_KINDS = CONCLUDING_KINDS
#: How those two are answered: straight (runs 13, 13b); after naming what was asked about and every shape, each one
#: checked yes or no against it (run 15 on, :func:`checked`). (Run 14's form, each shape that answers marked as it
#: is named, was tried and not shipped: docs/training-history.md.)
ANSWER_FORMS = ("", "checked")
#: The kinds asked about a picture of shapes (a graph's questions are a chart's kinds, ``chart`` and ``bar``).
SCENE_KINDS = KINDS[:3]
#: Words only a chart's questions have among the visitors' (the asking rule: a question about this picture).
CHART_WORDS = frozenset({"graph", "graphs"})
_THERE = (
    "there",
    "in the picture",
    "in the image",
    "drawn",
    "shown",
    "here",
    "in this picture",
    "in the pictures",
    "in these pictures",
    "in the images",
)
_PICS = ("the picture", "this picture", "the image", "this image")
#: The training wordings (``{shapes}``: a shape's plural; ``{sup}``: a superlative; ``{ref}``: what a question
#: asks about; ``{there}``, ``{pic}``: as :mod:`.wording`'s).
TRAINING: dict[str, tuple[str, ...]] = {
    "count_kind": (
        "how many {shapes} are there?",
        "how many {shapes} are {there}?",
        "how many {shapes} do you see?",
        "how many {shapes} can you see?",
        "count the {shapes}.",
        "what is the number of {shapes}?",
        "how many {shapes} does {pic} have?",
        "how many {shapes} does {pic} show?",
        "number of {shapes}?",
        "{shapes}: how many?",
        "how many {shapes}?",
        "can you count the {shapes}?",
        "how many {shapes} are in {pic}?",
        "tell me how many {shapes} there are.",
        "count how many {shapes} there are.",
    ),
    "superlative": (
        "which shape is the {sup}?",
        "which is the {sup} shape?",
        "what is the {sup} shape?",
        "which object is the {sup}?",
        "which one is the {sup}?",
        "what shape is the {sup}?",
        "which is the {sup}?",
        "what colour is the {sup} shape?",
        "what colour is the {sup} object?",
        "where is the {sup} shape?",
        "where is the {sup} object?",
        "the {sup} shape is which one?",
    ),
    "exists": (
        "is there a {ref}?",
        "is there a {ref} {there}?",
        "do you see a {ref}?",
        "can you see a {ref}?",
        "is there any {ref}?",
        "does {pic} have a {ref}?",
        "does {pic} show a {ref}?",
    ),
    "chart": (
        "what does this graph show?",
        "what does the graph show?",
        "describe the graph.",
        "describe this graph.",
        "read the graph.",
        "explain the graph.",
        "what is in the graph?",
        "tell me about this graph.",
        "what can you see in the graph?",
        "describe the graph in detail.",
    ),
    "high": (
        "which bar in the graph is the highest?",
        "which bar is the tallest in the graph?",
        "which bar is the biggest?",
        "which bar is the largest?",
        "what is the biggest bar?",
        "which bar of the graph is the highest?",
    ),
    "low": ("which bar is the smallest?", "which bar in the graph is the lowest?", "what is the smallest bar?"),
    "bars": ("how many bars are in the graph?", "how many bars does the graph have?", "how many bars are there?"),
    "value": ("what is the value of the {colour} bar in the graph?", "how high is the {colour} bar in the graph?"),
}
#: Wordings :func:`visitor_example` never produces (up to surface forms), graded by the check: other ways to ask.
HELD_OUT: dict[str, tuple[str, ...]] = {
    "count_kind": (
        "how many {shapes} have been drawn?",
        "what is the count of {shapes}?",
        "how many {shapes} do you count?",
        "how many {shapes} can be seen?",
        "{shapes}, how many are there?",
        "give me the number of {shapes}.",
    ),
    "superlative": (
        "which of the shapes is the {sup}?",
        "name the {sup} shape.",
        "the {sup} object is which shape?",
        "tell me which shape is the {sup}.",
        "what colour does the {sup} shape have?",
        "where is the {sup} one?",
    ),
    "exists": (
        "is a {ref} drawn here?",
        "do you see any {ref}?",
        "can i see a {ref}?",
        "is there a {ref} in it?",
        "does the image contain a {ref}?",
        "is a {ref} shown?",
    ),
    "chart": ("what is shown in this graph?", "can you describe the graph?", "what does the graph display?"),
    "high": ("which bar of this graph is the tallest?", "what is the largest bar?"),
    "low": ("which bar of the graph is the smallest?",),
}
#: What visitors typed (issue 55: "How many triangles are there?", "which is the largest shape?", "Is there a
#: red cross?"), each with the kind it asks; the shape, the superlative and the thing asked about drawn per scene.
ASKED = (
    ("count_kind", "How many {shapes} are there?"),
    ("count_kind", "how many {shapes} are in the picture?"),
    ("superlative", "which is the {sup} shape?"),
    ("superlative", "Which shape is the {sup}?"),
    ("chart", "What does this graph show?"),
    ("describe", "descrbe the imgae in detial."),
    ("exists", "Is there a {ref}?"),
)
_WORD_TYPOS = {w: tuple(t for t, v in TYPOS.items() if v == w) for w in set(TYPOS.values())}


def misspell(rng: random.Random, question: str) -> str:
    """``question`` with one word that has a typo in :data:`TYPOS` typed wrong (unchanged where none has)."""
    words = re.findall(r"[A-Za-z]+|[^A-Za-z]+", question)
    spots = [i for i, w in enumerate(words) if w.lower() in _WORD_TYPOS]
    if not spots:
        return question
    i = rng.choice(spots)
    words[i] = rng.choice(_WORD_TYPOS[words[i].lower()])
    return "".join(words)


def read_typos(words: list[str]) -> list[str]:
    """``words`` with each typo of :data:`TYPOS` read as its word (the asking rule reads a question so)."""
    return [TYPOS.get(w, w) for w in words]


def count_kind_answer(shape: str, n: int) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The answer to "how many {shape}s", its fact and its forbidden words."""
    plural, numbers = PLURALS[shape], tuple(NUMBER_WORDS.values())
    if n == 0:
        return f"there are no {plural}.", (f"no {plural}",), numbers
    if n == 1:
        return f"there is one {shape}.", (f"one {shape}",), (*numbers[1:], "no")
    word = NUMBER_WORDS[n]
    return f"there are {word} {plural}.", (f"{word} {plural}",), (*(w for w in numbers if w != word), "no")


def _slots(rng: random.Random) -> dict[str, str]:
    return {"there": rng.choice(_THERE), "pic": rng.choice(_PICS)}


def _scene(rng: random.Random, style: Style, n: int) -> tuple[Example, tuple]:
    image, things, _, label_map = shape_scene(rng, n, style)
    return Example(image, "", "", "", objects=things, labels=label_map), things


def checked(things: tuple, answer: str, matches: list[bool], asked: str) -> str:
    """``answer`` said after what was asked about and every shape, each checked against it (run 15): "cross: it
    shows a large green triangle in the top left: no, a large blue cross in the bottom left: yes and a small red
    cross in the bottom middle: yes, so yes, there is a cross." Each yes or no compares two words the answer has
    just said (the shape named and the one asked about, said first), and the answer is read from the checks (a
    count is the number of yeses)."""
    return f"{asked}: {shown(things, ['yes' if match else 'no' for match in matches])}, so {answer}"


def count_kind_example(
    rng: random.Random, style: Style, pool: dict[str, tuple[str, ...]], looking: str = ""
) -> Example:
    """How many of one shape a scene of 1-6 has (a shape it has three times in four); ``looking`` (one of
    :data:`ANSWER_FORMS`): the answer checks every shape first (:func:`checked`)."""
    base, things = _scene(rng, style, rng.randint(1, 6))
    present = sorted({t.shape for t in things})
    absent = [s for s in SHAPES if s not in present]
    shape = rng.choice(present if not absent or rng.random() < 0.75 else absent)
    answer, facts, forbidden = count_kind_answer(shape, sum(t.shape == shape for t in things))
    question = rng.choice(pool["count_kind"]).format(shapes=PLURALS[shape], **_slots(rng))
    if looking == "checked":  # graded on what follows the last "so" (scenes.fact_score)
        answer = checked(things, answer, [t.shape == shape for t in things], shape)
    return replace(base, question=question, answer=answer, kind="count_kind", facts=facts, forbidden=forbidden)


def superlative_example(rng: random.Random, style: Style, pool: dict[str, tuple[str, ...]]) -> Example:
    """The largest (or smallest) shape of a scene of 2-4 where it is the only one of its size: which it is (its
    colour and shape), its colour, or its place."""
    sup = rng.choice(tuple(SUPERLATIVES))
    size = SUPERLATIVES[sup]
    for _ in range(200):
        base, things = _scene(rng, style, rng.randint(2, 4))
        only = [t for t in things if t.size == size]
        if len(only) == 1:
            break
    else:  # pragma: no cover - 200 scenes without one shape of its size
        raise RuntimeError("no scene with one shape of its size")
    t = only[0]
    question = rng.choice(pool["superlative"]).format(sup=sup)
    others = tuple(c for c in COLOURS if c != t.colour)
    forbidden: tuple[str, ...]
    if question.startswith("where"):
        answer, facts, forbidden = f"the {sup} shape is in the {t.place}.", (f"in the {t.place}",), ()
    elif "colour" in question:
        answer, facts, forbidden = f"the {sup} shape is {t.colour}.", (t.colour,), others
    else:
        answer, facts, forbidden = f"the {t.colour} {t.shape} is the {sup}.", (f"{t.colour} {t.shape}",), others
    size_words = tuple(s for s in SIZES if s != size)
    return replace(
        base, question=question, answer=answer, kind="superlative", facts=facts, forbidden=(*forbidden, *size_words)
    )


def _articles(text: str) -> str:
    """ "an" before a vowel ("is there an orange shape?")."""
    return re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text)


def exists_example(rng: random.Random, style: Style, pool: dict[str, tuple[str, ...]], looking: str = "") -> Example:
    """Whether a scene of 1-6 has a shape, a colour or both (half the time it has; a miss is as often a shape of
    the scene in another colour as a thing it lacks); ``looking`` (one of :data:`ANSWER_FORMS`): the answer
    checks every shape first (:func:`checked`)."""
    base, things = _scene(rng, style, rng.randint(1, 6))
    form = rng.choice(("both", "both", "shape", "colour"))
    t = rng.choice(things)
    colour, shape = t.colour, t.shape
    if rng.random() < 0.5:  # a miss
        absent_colours = [c for c in COLOURS if all(o.colour != c for o in things)]
        absent_shapes = [s for s in SHAPES if all(o.shape != s for o in things)]
        if form == "shape" and absent_shapes:
            shape = rng.choice(absent_shapes)
        elif form == "colour" and absent_colours:
            colour = rng.choice(absent_colours)
        elif form == "both":
            wrong = [s for s in SHAPES if s != t.shape]
            shape = rng.choice(wrong) if rng.random() < 0.5 or not absent_colours else shape
            colour = colour if shape != t.shape else rng.choice(absent_colours)
    ref = {"both": f"{colour} {shape}", "shape": shape, "colour": f"{colour} shape"}[form]
    matches = [(form == "colour" or o.shape == shape) and (form == "shape" or o.colour == colour) for o in things]
    has = any(matches)
    question = _articles(rng.choice(pool["exists"]).format(ref=ref, **_slots(rng)))
    answer = _articles(f"yes, there is a {ref}.") if has else f"no, there is no {ref}."
    if looking == "checked":
        answer = checked(things, answer, matches, ref)
    facts, forbidden = (("yes",), ("no",)) if has else (("no",), ("yes",))
    return replace(base, question=question, answer=answer, kind="exists", facts=facts, forbidden=forbidden)


def graph_example(rng: random.Random, style: Style, pool: dict[str, tuple[str, ...]]) -> Example:
    """A bar chart asked about as a graph (a description, the highest or lowest bar, a value, the count)."""
    form = rng.choice(tuple(f for f in ("chart", "chart", "high", "low", "bars", "value") if f in pool))
    image, bars, label_map = bar_chart(rng, style)
    example = ask_chart(rng, "chart" if form == "chart" else "bar", image, bars)
    for _ in range(50):
        if form in ("chart", bar_form(example)):
            break
        example = ask_chart(rng, "bar", image, bars)
    else:  # pragma: no cover
        return example
    words = set(re.findall(r"[a-z]+", example.answer))
    colour = next((c for c, _ in bars if c in words), "")
    question = rng.choice(pool[form]).format(colour=colour)
    return replace(example, question=question, labels=label_map)


def visitor_example(
    rng: random.Random,
    style: Style = DEFAULT,
    held_out: bool = False,
    kinds: tuple[str, ...] = KINDS,
    looking: str = "",
) -> Example:
    """A question of one of ``kinds`` (:data:`KINDS`; ``held_out``: in a :data:`HELD_OUT` wording), typed wrong a
    word one time in five (never when held out), in a visitor's surface forms; ``looking`` (one of
    :data:`ANSWER_FORMS`): a count of a shape and whether a thing is there answered so."""
    pool = HELD_OUT if held_out else TRAINING
    kind = rng.choice(kinds)
    example = graph_example(rng, style, pool) if kind == "graph" else scene_maker(kind, looking)(rng, style, pool)
    if held_out:
        return example
    question = example.question
    if rng.random() < 0.2:
        question = misspell(rng, question)
    return replace(example, question=surface(rng, question))


@functools.cache
def training_wordings() -> dict[str, tuple[str, ...]]:
    """Per question kind of the asking rule (``bar``: a chart's short questions), the training wordings with
    ``{shape}``, ``{colour}`` and ``{n}`` as the rule's slots, the rest filled every way training fills them."""
    fills = {
        "{shapes}": ("{shapes}",),
        "{sup}": tuple(SUPERLATIVES),
        "{there}": _THERE,
        "{pic}": _PICS,
        "{ref}": ("{colour} {shape}", "{shape}", "{colour} shape"),
    }
    out: dict[str, list[str]] = {}
    for form, wordings in TRAINING.items():
        kind = "bar" if form in ("high", "low", "value", "bars") else form
        out.setdefault(kind, []).extend(q for wording in wordings for q in every_filling(wording, fills))
    return {kind: tuple(dict.fromkeys(qs)) for kind, qs in out.items()}


def scene_maker(kind: str, looking: str) -> Callable[[random.Random, Style, dict[str, tuple[str, ...]]], Example]:
    """The example maker of one of :data:`SCENE_KINDS`; a count of a shape and whether a thing is there answer
    in the form ``looking`` names (:data:`ANSWER_FORMS`)."""
    if looking not in ANSWER_FORMS:
        raise ValueError(f"an answer form is one of {ANSWER_FORMS}, not {looking!r}")
    if kind == "superlative":
        return superlative_example
    maker = {"count_kind": count_kind_example, "exists": exists_example}[kind]
    return functools.partial(maker, looking=looking)


def check_examples(seed: int, n: int) -> tuple[list[Example], list[str]]:
    """``n`` examples on fresh scenes, half asked as visitors asked (:data:`ASKED`, in turn), half in the
    :data:`HELD_OUT` wordings; and each one's source ("asked" or "held out"). A count of a shape and whether a thing
    is there are graded on their conclusion (:func:`concluded`), so every answer form is graded alike; the draws are
    those of every check since run 14 (tests/test_mixing.py pins them)."""
    rng = random.Random(seed)
    examples, sources = [], [check_source(i) for i in range(n)]
    for i in range(n):
        if i % 2:
            examples.append(concluded(visitor_example(rng, held_out=True)))
            continue
        kind, question = ASKED[(i // 2) % len(ASKED)]
        pool: dict[str, tuple[str, ...]] = {k: (question,) for k in ("count_kind", "superlative", "exists", "chart")}
        if kind == "describe":
            example = replace(make_example(rng, "describe"), question=question)
        elif kind == "chart":
            example = graph_example(rng, DEFAULT, {"chart": (question,)})
        else:
            example = concluded(scene_maker(kind, looking="")(rng, DEFAULT, pool))
        examples.append(example)
    return examples, sources


def concluded(example: Example) -> Example:
    """A count of a shape graded on its whole conclusion ("there are two circles", the last sentence after its last
    "so" in an answer that checks every shape first; no forbidden word, since a checked answer names its shapes);
    any other example as it is."""
    if example.kind != "count_kind":
        return example
    return replace(example, facts=(example.answer.removesuffix("."),), forbidden=())


def graph_check_examples(seed: int, n: int) -> list[Example]:
    """``n`` charts on fresh scenes asked about as graphs: even ones as visitors asked (:data:`ASKED`'s "What does
    this graph show?"), odd ones in the :data:`HELD_OUT` wordings (described, or its highest or lowest bar), each
    one's source as :func:`check_source` says (the visitors' check has a dozen of each in 240; this, as many as
    asked)."""
    rng = random.Random(seed)
    asked = {"chart": tuple(question for kind, question in ASKED if kind == "chart")}
    return [graph_example(rng, DEFAULT, HELD_OUT if check_source(i) == "held out" else asked) for i in range(n)]


def check_source(index: int) -> str:
    """Where the check's example ``index`` comes from: asked as visitors asked (even) or a held-out wording (odd)."""
    return "held out" if index % 2 else "asked"
