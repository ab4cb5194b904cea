"""Is a question one the built-in pair was trained on, for this picture? Its training decides.

The pair reads words through a tokenizer of its own vocabulary (:func:`.vocabulary.world_words` and, from
run 10 on, :data:`.vocabulary.VISITOR_WORDS`: every other word is one unknown token) and was trained on a
fixed set of questions: the templates of :mod:`.scenes` and the wordings of :mod:`.wording` (with their
surface forms: capitals, no closing mark, "color"), and the free wordings' core questions
(:func:`.wording.free_wordings`, with or without an opening such as "hey," or a closing such as "here"),
each about one kind of picture (a picture of shapes, a bar chart, a clip). Asked
anything else it still answers, in its training's sentences, with facts that may be made up.
:func:`question_note` says so before the race. The rule, read off that training set: a question is
taught when, read as the rule reads it (:func:`tokens_of`: slots for colours, shapes, places and
numbers, no closing marks), it *is* one of the training questions about the picture's kind. Else the
note gives the first reason that holds:

1. **Unknown words**: a word outside the vocabulary, other than filler words training questions contain
   (none since run 10's visitor words), is a word the pair cannot read. The race is then declined, in the
   words of :func:`asking_note` (the word named, questions that work offered; no tokenizer's sentence),
   which the pair's folders ship and the library shows: ``sage_core.prepared.check_vocabulary``.
2. **Another picture's question**: the training questions the prompt is closest to (the share of
   its word pairs found among one kind's training questions) are about another kind of picture
   ("describe the image in detail." about a chart), and it has no word only this picture's questions have
   ("bars", "video").
3. **Words never asked about this picture**: a word of the world's (not a visitor word) that no training
   question about this kind of picture has ("is there a dog?").
4. **A shape named by its size**: "the big triangle"; training names a shape by its colour or its place, and
   run 10 answers "what color is the big triangle?" about another shape (2026-12-02).
5. **Shapes named in the plural for another question**: "what colour are the circles?"; a shape's plural is
   taught only in a count of that shape, and run 15 answers that question with one shape's colour (2026-12-05).
6. **Words in no taught order**: fewer than half of its word pairs are found among the closest kind's
   training questions (word salad, "how are you?").

Anything else is a question it was taught put in other words, and gets no note.

Why this rule, measured (2026-12-02, run 10's target, greedy, pictures of one shape): run 9's pair answered
hand-written questions in words no template has (``wording.UNSEEN``) right 0.555 of the time, so every wording
outside the training got the note. Run 10 learned the free wordings and the visitor words: it states 1.000 of
the facts on those 30 questions (150 answers) and 0.948 on the 48 of ``wording.BLIND`` (144 answers), written by
a helper who saw no training question. On ``BLIND`` (``scripts/check_builtin_pair.py --target-only --style blind
--n 144``, which prints this split) the rule gives no note to 37 questions, 0.980 of their facts right over 111
asked, and the note to 11 (6 with unknown words, 5 others), 0.833 and 0.857: the note
stays for questions the pair reads less well, and no longer for questions it was taught in other words. The
note names the training questions of the closest kind (:func:`suggestions`), so the visitor can ask what the
pair was taught.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from sage_core.media import Media

from . import scenes, visitors, vocabulary, wording
from .world import on_white

#: The kinds of picture, and the question kinds trained on each.
_CHART_KINDS = ("bar", "chart")
PICTURES: dict[str, tuple[str, ...]] = {
    "shapes": (
        *(k for k in scenes.KINDS if k not in (*_CHART_KINDS, *scenes.VIDEO_KINDS)),
        scenes.ROW_KIND,
        *visitors.SCENE_KINDS,
    ),
    "chart": _CHART_KINDS,
    "clip": scenes.VIDEO_KINDS,
}
#: How a note names each kind of picture, and questions to ask about it (training questions).
PICTURE_NAMES = {"shapes": "a picture of shapes", "chart": "a bar chart", "clip": "a clip"}
SUGGESTIONS: dict[str, tuple[str, ...]] = {
    "shapes": (scenes.DESCRIBE_Q[0], scenes.COUNT_Q[0], scenes.COLOUR_Q[0].format(place="top left")),
    "chart": (scenes.CHART_Q[0], scenes.BAR_Q_HIGH[0], scenes.BAR_Q_COUNT[0]),
    "clip": (scenes.NARRATE_Q[0], scenes.VIDEO_Q[0]),
}
UNKNOWN = "<unknown>"
#: Below this share of its word pairs found among the closest kind's training questions, a question of known
#: words is read as one the pair was not taught (word salad, "how are you?"); at or above it, as a question it
#: was taught put in other words, which run 10 answers about as well (module docstring).
WORDED_LIKE_SHARE = 0.5
_PLACE_WORDS = frozenset(w for p in scenes.PLACES for w in p.split())
_PLURAL_SHAPES = frozenset(visitors.PLURALS.values())
#: Words for a shape's size (the world's two and the visitor words for them).
SIZE_WORDS = frozenset({*scenes.SIZES, "big", "little", "tiny", "huge"})


def _slot(word: str, vocabulary: frozenset[str]) -> str:
    """The token the rule compares: a slot for a colour, shape, place or digit; UNKNOWN outside the vocabulary."""
    if word in scenes.COLOURS:
        return "{colour}"
    if word in scenes.SHAPES:
        return "{shape}"
    if word in _PLURAL_SHAPES:
        return "{shapes}"
    if word in _PLACE_WORDS:
        return "{place}"
    if word.isdigit():
        return "{n}"
    return word if word in vocabulary else UNKNOWN


def words_of(question: str) -> list[str]:
    """The question's words and marks as the pair's tokenizer splits them (lower case, digits one by one)."""
    return re.findall(r"[a-z]+|[0-9]|[^\sa-z0-9]", question.lower())


def _read_words(question: str) -> list[str]:
    """:func:`words_of`, with a typo the pair was taught (run 13: `visitors.TYPOS`) read as its word."""
    return visitors.read_typos(words_of(question))


def tokens_of(question: str) -> tuple[str, ...]:
    """The question as the rule reads it: slots abstracted, runs of one slot (a place's two words, a
    number's digits) as one, no closing marks, and the surface forms training mixes in
    (`wording.surface`: "what's" for "what is", "color" for "colour") read as one."""
    vocabulary = _vocabulary()
    out: list[str] = []
    spelled = re.sub(r"\bwhat\s*'\s*s\b", "what is", question.lower()).replace("color", "colour")
    for word in _read_words(spelled):
        token = _slot(word, vocabulary)
        if not (out and out[-1] == token and token in ("{place}", "{n}")):
            out.append(token)
    while out and out[-1] in ("?", ".", "!"):
        out.pop()
    return tuple(out)


@functools.cache
def _picture_words() -> dict[str, frozenset[str]]:
    """Per kind of picture, the words its training questions have and no other picture's do."""
    words = {p: {t for k in kinds for q in training_questions()[k] for t in q} for p, kinds in PICTURES.items()}
    others = {p: set().union(*(v for o, v in words.items() if o != p)) for p in words}
    own = _world_words() | visitors.CHART_WORDS  # ("graph": run 13 asks charts so)
    return {p: frozenset(t for t in w - others[p] if t.isalpha() and t in own) for p, w in words.items()}


@functools.cache
def _world_words() -> frozenset[str]:
    """The world's own words (its templates'): a question with one no question about the picture has asks about
    something else ("is there a dog?"); the visitor words only reword."""
    return frozenset(vocabulary.world_words())


def _vocabulary() -> frozenset[str]:
    """The words the pair's tokenizer has: the world's and, from run 10 on, the visitor words (run 13 on, more)."""
    return vocabulary.known_words()


def training_wordings() -> dict[str, tuple[str, ...]]:
    """Per question kind (bar questions of every form under ``bar``), the questions training asks, with slots."""
    s = scenes
    out: dict[str, tuple[str, ...]] = {
        "shape": s.SHAPE_Q,
        "colour": s.COLOUR_Q,
        "count": s.COUNT_Q,
        "position": s.POSITION_Q,
        "size": s.SIZE_Q,
        "describe": s.DESCRIBE_Q,
        "bar": (*s.BAR_Q_HIGH, *s.BAR_Q_LOW, *s.BAR_Q_VALUE, *s.BAR_Q_COUNT),
        "chart": s.CHART_Q,
        "text": s.TEXT_Q,
        "video": s.VIDEO_Q,
        "narrate": s.NARRATE_Q,
        s.ROW_KIND: s.ROW_Q,
    }
    for form, wordings in (*wording.TRAINING.items(), *wording.LONE.items()):
        kind = "bar" if form in ("high", "low", "value", "bars") else form
        out[kind] = (*out[kind], *wordings)
    for kind, wordings in visitors.training_wordings().items():  # run 13: visitors' questions
        out[kind] = (*out.get(kind, ()), *wordings)
    return out


@functools.cache
def training_questions() -> dict[str, frozenset[tuple[str, ...]]]:
    """Per question kind, its training questions as the rule reads them (:func:`tokens_of`): the templates and
    wordings, and the free wordings' core questions (run 10 on)."""
    out = {kind: {tokens_of(wording.fill_slots(q)) for q in qs} for kind, qs in training_wordings().items()}
    for kind, qs in wording.free_wordings().items():
        out[kind] |= {tokens_of(wording.fill_slots(q)) for q in qs}
    return {kind: frozenset(questions) for kind, questions in out.items()}


@functools.cache
def _framings() -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """The free wordings' openings and closings as the rule reads them (longest first)."""
    openings = sorted({tokens_of(f"{o} x")[:-1] for o in wording.FREE_OPENINGS}, key=len, reverse=True)
    closings = sorted({tokens_of(c) for c in wording.FREE_CLOSINGS}, key=len, reverse=True)
    return tuple(openings), tuple(closings)


def core_tokens(tokens: tuple[str, ...]) -> set[tuple[str, ...]]:
    """``tokens`` and ``tokens`` without an opening and/or a closing of the free wordings ("hey,", "here")."""
    openings, closings = _framings()
    heads = {tokens} | {tokens[len(o) :] for o in openings if o and tokens[: len(o)] == o}
    out = set(heads)
    for head in heads:
        mark = head[-1:] if head[-1:] in ((".",), ("!",)) else ()
        body = head[: len(head) - len(mark)]
        out |= {body[: len(body) - len(c)] + mark for c in closings if c and body[-len(c) :] == c}
    return out


@functools.cache
def filler_words() -> frozenset[str]:
    """Words outside the vocabulary that training questions contain: the pair learned to read past them."""
    vocabulary = _vocabulary()
    wordings = [q for qs in training_wordings().values() for q in qs]
    words = (w for q in wordings for w in words_of(wording.fill_slots(q)))
    return frozenset(w for w in words if w.isalpha() and w not in vocabulary)


def _pairs(tokens: tuple[str, ...]) -> set[tuple[str, str]]:
    marked = ("<start>", *tokens, "<end>")
    return set(itertools.pairwise(marked))


@functools.cache
def _kind_pairs() -> dict[str, frozenset[tuple[str, str]]]:
    return {k: frozenset().union(*(_pairs(q) for q in qs)) for k, qs in training_questions().items()}


@functools.cache
def _kind_words() -> dict[str, frozenset[str]]:
    return {k: frozenset(t for q in qs for t in q) for k, qs in training_questions().items()}


def pair_shares(question: str) -> dict[str, float]:
    """Per question kind: the share of the question's word pairs found among its training questions."""
    pairs = _pairs(tokens_of(question))
    return {kind: len(pairs & known) / len(pairs) for kind, known in _kind_pairs().items()}


def picture_of(kind: str) -> str:
    return next(picture for picture, kinds in PICTURES.items() if kind in kinds)


@dataclass(frozen=True)
class Fit:
    """Whether a question is one the pair was trained on for a picture: ``reason`` says why not ("" when it
    is); ``closest``: the question kind of that picture it is closest to."""

    picture: str
    reason: str = ""
    closest: str = ""

    @property
    def taught(self) -> bool:
        return not self.reason


def question_fit(question: str, picture: str) -> Fit:
    """The rule of the module docstring for ``question`` about a picture of kind ``picture`` (a PICTURES key)."""
    words = [w for w in words_of(question) if w.isalpha()]
    tokens = tokens_of(question)
    shares = pair_shares(question) if words else {}
    known = {k: sum(t in _kind_words()[k] for t in tokens) for k in shares}  # (ties: the kind sharing more words)
    here = max(PICTURES[picture], key=lambda k: (shares.get(k, 0.0), known.get(k, 0)))
    cores = core_tokens(tokens)
    if not words or any(cores & training_questions()[k] for k in PICTURES[picture]):
        return Fit(picture, closest=here)
    unknown = [w for w in dict.fromkeys(words) if w not in _vocabulary() and w not in filler_words()]
    if unknown:
        listed = ", ".join(f"“{w}”" for w in unknown[:4])
        return Fit(picture, f"it cannot read {listed} (it was taught its world's words only)", here)
    closest = max(shares, key=lambda k: (shares[k], known[k]))
    own = set(tokens) & _picture_words()[picture]  # "bars", "chart", "video": it asks about this picture
    if picture_of(closest) != picture and shares[closest] > shares[here] and not own:
        elsewhere = PICTURE_NAMES[picture_of(closest)]
        return Fit(picture, f"it was taught that question for {elsewhere}, not for {PICTURE_NAMES[picture]}", here)
    asked = {t for k in PICTURES[picture] for q in training_questions()[k] for t in q}
    never = [w for w in dict.fromkeys(tokens) if w in _world_words() and w not in asked]
    if never:
        listed = ", ".join(f"“{w}”" for w in never[:4])
        return Fit(picture, f"no question it was taught about {PICTURE_NAMES[picture]} has {listed}", here)
    plural = "{shapes}" in tokens  # shapes named in the plural: taught only in a count of one shape
    other = [w for w in tokens if w in _world_words() and w not in _counting_words()] if plural else []
    if other:
        return Fit(picture, f"it was taught to count shapes of one kind, not to ask “{other[0]}” about them", here)
    return Fit(picture, _wording_reason(tokens, shares[here]), here)  # "": other words for a taught question


@functools.cache
def _counting_words() -> frozenset[str]:
    """The words of every training question that names shapes in the plural (a count of one shape)."""
    plural = [q for qs in training_questions().values() for q in qs if "{shapes}" in q]
    return frozenset(t for q in plural for t in q)


def _wording_reason(tokens: tuple[str, ...], share: float) -> str:
    """Why a question of known words about its own picture was not taught ("" when it was, in other words):
    a shape named by its size ("the big triangle": training names shapes by colour or place, and run 10 answers
    such a question about another shape), or words in no taught order."""
    by_size = [w for a, w in itertools.pairwise(tokens) if a == "the" and w in SIZE_WORDS]
    if by_size and not any(("the", w) in pairs for w in by_size for pairs in _kind_pairs().values()):
        return f"it was taught to name a shape by its colour or its place, not by its size (“the {by_size[0]} …”)"
    if share < WORDED_LIKE_SHARE:
        return "its words come in an order no question it was taught has"
    return ""


def suggestions(fit: Fit, most: int = 3) -> tuple[str, ...]:
    """Training questions to ask instead: the closest kind's first template (slots shown as [colour], [shape],
    [place]), then the picture's usual ones."""
    own = training_wordings().get(fit.closest, ())[:1]
    shown = [re.sub(r"\{([a-z]+)\}", r"[\1]", q) for q in own]
    return tuple(dict.fromkeys([*shown, *SUGGESTIONS[fit.picture]]))[:most]


# -- the picture's kind -------------------------------------------------------------------------

GRID = np.array((200, 200, 200), dtype=np.int16)


def looks_like_chart(image: Image.Image) -> bool:
    """A bar chart as :func:`.scenes.bar_chart` draws it: at least three grey grid lines across the picture
    (each showing between the bars, no dark pixels on them) above a dark baseline (drawn shapes, text and
    rows of shapes have neither)."""
    picture = on_white(image)
    if max(picture.size) > 512:
        picture.thumbnail((512, 512), Image.Resampling.NEAREST)
    pixels = np.asarray(picture, dtype=np.int16)
    dark = (pixels.max(axis=-1) < 100).mean(axis=1)
    dark_rows = np.flatnonzero(dark >= 0.1)
    if not len(dark_rows):
        return False
    grey = (np.abs(pixels - GRID).max(axis=-1) <= 20).mean(axis=1)
    grid_rows = np.flatnonzero((grey >= 0.08) & (dark < 0.02))  # (the grey edges of dark text are not lines)
    above = grid_rows[grid_rows < dark_rows[-1]]
    runs = int(len(above) > 0) + int(np.count_nonzero(np.diff(above) > 1))
    return runs >= 3


def picture_kind(media: Media) -> str:
    """Which kind of the pair's pictures ``media`` is: a clip, a bar chart, or shapes (the rest)."""
    if media.kind != "image" or media.image is None:
        return "clip"
    return "chart" if looks_like_chart(media.image) else "shapes"


#: Question kinds the pair was taught but answers right less often than 9 times in 10 on fresh scenes, each with
#: what it asks and how often it is right, measured; the note beside such a race says so (the answer is the target's
#: own: SAGE never changes it). Measured with scripts/check_builtin_pair.py --target-only --n 600 --seed 20251
#: (2026-12-06): reading a picture's text (taught, and kept out of the gallery: `scenes.UNREADABLE_KINDS`) 0.019;
#: how many shapes a picture holds 0.855 (asked of all its shapes; a count of one colour is matched to the same kind
#: and shown the same figure, not measured apart); what happens in a clip 0.889; every other kind 0.94 or more (a
#: shape, its colour, size or place, a description, a chart, a clip narrated). Run 13's counts were right about half
#: the time and run 15's 1.000 / 0.868 as visitors asked them (scripts/check_builtin_pair.py --style visitors).
LESS_OFTEN_RIGHT: dict[str, tuple[str, str]] = {
    "text": (
        "read the text in a picture",
        "1 time in 54 on fresh scenes (scripts/check_builtin_pair.py --target-only --n 600 --seed 20251)",
    ),
    "count": (
        "count the shapes in a picture",
        "about 6 times in 7 on fresh scenes (0.855: scripts/check_builtin_pair.py --target-only --n 600 --seed 20251)",
    ),
    "video": (
        "say what happens in a clip",
        "about 8 times in 9 on fresh clips (0.889: scripts/check_builtin_pair.py --target-only --n 600 --seed 20251)",
    ),
}


def question_note(question: str, media: Media) -> tuple[str, ...]:
    """The sentences to show beside a race of the built-in pair when ``question`` is not one it was trained on
    for this picture (none when it is): why, that the race stays lossless, and which questions to ask."""
    fit = question_fit(question, picture_kind(media))
    if fit.taught and fit.closest in LESS_OFTEN_RIGHT:
        what, how_often = LESS_OFTEN_RIGHT[fit.closest]
        return (
            f"The built-in pair was taught to {what}, but does it right only {how_often}.",
            "The race stays lossless (every method still gives the target's own answer), but that answer may be wrong.",
        )
    if fit.taught:
        return ()
    asks = ", ".join(f"“{q}”" for q in suggestions(fit))
    return (
        f"This question is not one the built-in pair was trained on: {fit.reason}.",
        "The race stays lossless (every method still gives the target's own answer), but that answer may be made up.",
        f"About {PICTURE_NAMES[fit.picture]} it answers questions such as {asks}.",
    )


# -- a word the pair was not taught ------------------------------------------------------------


def reads_the_world(vocabulary: Iterable[str]) -> bool:
    """Whether a tokenizer's vocabulary is the built-in world's (the built-in pair, or a pair trained on its world):
    every word of the world's templates is one of its tokens."""
    return _world_words() <= frozenset(vocabulary)


def asking_note() -> str:
    """The built-in pair's asking note (the library shows it, `{words}` naming the words it was not taught: see
    sage_core.models.loading.ASKING_NOTE): forms of question it answers, slots shown as [colour] and [shape], a
    description's first and a chart's last, run 13's visitors' forms among them (the whole note under 300
    characters with two words named)."""
    forms = (
        scenes.DESCRIBE_Q[0],
        "how many circles are there?",
        "which shape is the largest?",
        "where is the [colour] [shape]?",
        SUGGESTIONS["chart"][0],
    )
    return (
        "The built-in pair was not taught {words}, so the question is declined; it answers its shapes, bars and "
        f"clips in forms such as {', '.join(f'“{q}”' for q in forms[:-1])} or “{forms[-1]}”"
    )


def other_language_note() -> str:
    """The built-in pair's sentence for a question that looks written in another language (`{words}` naming the
    words it was not taught): it reads English only."""
    return (
        "The built-in pair reads English only, and this question looks written in another language (it was not "
        f"taught {{words}}): ask in English, e.g. “{SUGGESTIONS['shapes'][0]}” or “{SUGGESTIONS['shapes'][1]}”"
    )


def asking_notes() -> dict[str, str]:
    """What a model folder the world trained ships as its asking note (sage_core.models.loading.ASKING_NOTE)."""
    return {"note": asking_note(), "other_language": other_language_note()}


def write_asking_note(folder: Path) -> None:
    """Ship the asking note in a model folder the world trained (scripts/train_builtin_pair.py)."""
    (folder / "asking_note.json").write_text(json.dumps(asking_notes(), ensure_ascii=False) + "\n")
