"""The training data as a mix of forms, drawn with a seed per example.

A training stream draws one 64-bit seed per example from its random generator and nothing else
(:func:`draw_example`, :func:`batch_examples`), whatever the mix; the example is made from its seed alone
(:func:`example_from_seed`). Within an example, each form (a drawing style, a wording, a kind of question, a JPEG)
decides whether it applies by a coin of its own substream (:func:`takes`: a generator seeded with the example's seed
and the form's name), and the picture, the question and the answer come from the example's own generator. So
adding a form to a mix, removing one or changing its share changes only the examples that form takes (and those it
stops taking): every other example of the stream is drawn as before, to the pixel (tests/test_mixing.py).

The forms (``scripts/train_builtin_pair.py``'s flags, the recipe's mixes in ``scripts/recipe.py``):

* drawing: ``hand-drawn`` shapes drawn as by hand (else ``shifted``: the SHIFTED ranges), ``jpeg`` the picture
  saved as a JPEG of quality 70-98 and read back;
* what is asked: ``rows`` two rows of shapes to read instead of the weighted kind, ``totals`` a count of every
  shape instead of it, ``lone`` a scene of one object for a question about one, ``free`` a shape question in a
  free wording (:mod:`.wording`), ``reworded`` the question in other words;
* visitors' questions (:mod:`.visitors`): ``counts`` a count of a shape or whether a thing is there, ``graphs`` a
  chart asked about as a graph, ``visitors`` any of their questions (seven in ten) or another question with a word
  typed wrong; ``DataMix.looking``: how a count of a shape and whether a thing is there are answered ("": straight,
  "checked": after checking every shape, :data:`.visitors.ANSWER_FORMS`).

Held-out sets (the training script's evaluation examples, ``scripts/check_builtin_pair.py``'s draws) are not drawn
here: they keep their own sequential streams, so their figures stay comparable across runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from .scenes import DEFAULT, HAND_DRAWN, ROW_KIND, SHIFTED, Example, Style, jpeg, make_example
from .visitors import ANSWER_FORMS, LOOKING_KINDS, misspell, visitor_example
from .wording import LONE, free_example, lone_example, reword

#: How often each image kind is drawn (the long answers and the hard facts more often).
KIND_WEIGHTS = {
    "shape": 0.8, "colour": 0.6, "count": 0.5, "position": 0.8, "size": 0.5, "describe": 2.4,
    "bar": 0.8, "chart": 1.2, "text": 0.8,
}  # fmt: skip
IMAGE_KINDS = tuple(KIND_WEIGHTS)
#: Every VIDEO_EVERY-th step of training is a batch of clips (half one-sentence answers, half narrated): videos are
#: longer sequences than images, so they get batches of their own.
VIDEO_EVERY = 6
#: Of the examples the ``visitors`` form takes, the share asked a visitor's question (the rest: a word typed wrong).
VISITOR_QUESTIONS = 0.7


@dataclass(frozen=True)
class DataMix:
    """The share of image examples each form takes (0: none; see the module's list), and the answer form of a count
    of a shape and whether a thing is there (``looking``, one of :data:`.visitors.ANSWER_FORMS`)."""

    lone: float = 0.0
    hand: float = 0.0
    shifted: float = 0.0
    reworded: float = 0.0
    rows: float = 0.0
    jpeg: float = 0.0
    free: float = 0.0
    visitors: float = 0.0
    counts: float = 0.0
    looking: str = ""
    graphs: float = 0.0
    totals: float = 0.0

    def __post_init__(self) -> None:
        if self.looking not in ANSWER_FORMS:
            raise ValueError(f"an answer form is one of {ANSWER_FORMS}, not {self.looking!r}")


#: Each form's name (its substream's, and its flag's) and its DataMix field.
FORMS = {
    "lone": "lone",
    "hand-drawn": "hand",
    "shifted": "shifted",
    "reworded": "reworded",
    "rows": "rows",
    "jpeg": "jpeg",
    "free": "free",
    "visitors": "visitors",
    "counts": "counts",
    "graphs": "graphs",
    "totals": "totals",
}


def substream(seed: int, name: str) -> random.Random:
    """The generator of the example ``seed``'s substream ``name`` (a form's coin, a JPEG's quality)."""
    return random.Random(f"{seed}:{name}")


def takes(seed: int, mix: DataMix, form: str) -> bool:
    """Whether the form (a :data:`FORMS` name) applies to the example ``seed`` under ``mix``: its own coin, below its
    share (never at share 0)."""
    share = getattr(mix, FORMS[form])
    return bool(share) and substream(seed, form).random() < share


def _kind_and_style(rng: random.Random, seed: int, mix: DataMix) -> tuple[str, Style]:
    """The example's kind (weighted; rows or a count of every shape where those forms take it) and drawing style."""
    kind = rng.choices(IMAGE_KINDS, list(KIND_WEIGHTS.values()))[0]
    if takes(seed, mix, "rows"):
        kind = ROW_KIND
    if takes(seed, mix, "totals"):
        kind = "count"
    if takes(seed, mix, "hand-drawn"):
        return kind, HAND_DRAWN
    return kind, SHIFTED if takes(seed, mix, "shifted") else DEFAULT


def _visitors_question(rng: random.Random, seed: int, style: Style, mix: DataMix) -> tuple[Example | None, bool]:
    """A visitor's question where a visitors' form takes the example (else None), and whether the example is a
    visitor's, to be typed with their typos."""
    if takes(seed, mix, "counts"):
        return visitor_example(rng, style, kinds=LOOKING_KINDS, looking=mix.looking), True
    if takes(seed, mix, "graphs"):
        return visitor_example(rng, style, kinds=("graph",)), True
    visitors = takes(seed, mix, "visitors")
    if visitors and substream(seed, "visitors-asked").random() < VISITOR_QUESTIONS:
        return visitor_example(rng, style, looking=mix.looking), True
    return None, visitors


def example_from_seed(seed: int, mix: DataMix = DataMix()) -> Example:
    """The image example ``seed`` draws under ``mix`` (see the module: each form by its own coin, the rest from the
    example's own generator)."""
    rng = random.Random(seed)
    kind, style = _kind_and_style(rng, seed, mix)
    example, visitors = _visitors_question(rng, seed, style, mix)
    free = example is None and takes(seed, mix, "free")
    if example is None:
        if free:
            example = free_example(rng, style)
        elif kind in LONE and takes(seed, mix, "lone"):
            example = lone_example(rng, kind, style)
        else:
            example = make_example(rng, kind, style)
        if not free and takes(seed, mix, "reworded"):
            example = reword(rng, example)
        if visitors:
            example = replace(example, question=misspell(rng, example.question))
    if takes(seed, mix, "jpeg"):
        example = replace(example, image=jpeg(example.image, substream(seed, "jpeg-quality").randint(70, 98)))
    return example


def draw_example(rng: random.Random, mix: DataMix = DataMix()) -> Example:
    """The next image example of a stream: one seed from ``rng``, the example made from it."""
    return example_from_seed(rng.getrandbits(64), mix)


def batch_examples(rng: random.Random, step: int, size: int, mix: DataMix = DataMix()) -> list[Example]:
    """Training step ``step``'s ``size`` examples (a seed each from ``rng``): clips every :data:`VIDEO_EVERY`-th step
    (one-sentence answers and narrated, in turn), else image examples under ``mix``."""
    seeds = [rng.getrandbits(64) for _ in range(size)]
    if step % VIDEO_EVERY == VIDEO_EVERY - 1:
        return [make_example(random.Random(seed), ("video", "narrate")[i % 2]) for i, seed in enumerate(seeds)]
    return [example_from_seed(seed, mix) for seed in seeds]
