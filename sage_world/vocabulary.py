"""The built-in pair's vocabulary, in one place: every word its tokenizer holds and the order it holds them in.

* :func:`world_words`: the world's own words, every word and mark :mod:`.scenes`' templates, colours, shapes,
  places and numbers can produce (digits apart: the tokenizer spells numbers digit by digit);
* :data:`VISITOR_WORDS` (run 10 on, ``--visitor-words``): common English question words no template has;
* :data:`MORE_VISITOR_WORDS` (run 13 on, ``--more-visitor-words``): the shapes' plurals, superlatives, "graph",
  and :data:`TYPOS`, common typos of the world's and the visitors' words;
* :func:`token_words`: all of them in the tokenizer's id order (each later list appended after every earlier
  token, so that a pair trained before keeps its ids; ``scripts/train_builtin_pair.py`` builds the tokenizer
  from it, and the shipped ``tokenizer.json`` is what it builds, byte for byte);
* :data:`SYNONYMS`: the word a new word's embedding starts as, when a trained pair grows to a longer list.

:mod:`.asking` reads :func:`known_words` (what the pair can read) and :func:`world_words`; :mod:`.visitors` its
plurals, superlatives and typos.
"""

from __future__ import annotations

import functools
import re

from .scenes import ALL_TEMPLATES, ASPECTS, BACKGROUNDS, COLOURS, DIRECTIONS, NUMBER_WORDS, PLACES, SHAPES, SIZES, WORDS


@functools.cache
def world_words() -> tuple[str, ...]:
    """Every word / punctuation token the world's data can produce (digits excluded), sorted."""
    words: set[str] = set(COLOURS) | set(SHAPES) | set(SIZES) | set(BACKGROUNDS) | set(WORDS)
    words |= set(NUMBER_WORDS.values()) | set(DIRECTIONS.values())
    words |= {w for p in PLACES for w in p.split()} | set(ASPECTS) | {"and"}
    for t in ALL_TEMPLATES:
        words |= set(re.findall(r"[a-z]+|[^\sa-z{}]", re.sub(r"\{[a-z0-9]+\}", " ", t)))
    words |= set(".,?!:;'")
    return tuple(sorted(words))


#: Words visitors use in questions about a picture that no template of the world has, in the order the
#: pair's tokenizer appends them after the world's vocabulary (run 10 on: existing token ids stay as they
#: were). Common English question words, not read off any graded set.
VISITOR_WORDS = (
    "i", "my", "we", "your", "do", "did", "could", "would", "will", "should", "please", "an", "to", "for", "on",
    "by", "from", "about", "into", "inside", "within", "as", "so", "just", "all", "any", "some", "that", "these",
    "those", "its", "s", "has", "have", "had", "was", "were", "be", "been", "am", "know", "want", "like", "think",
    "call", "called", "name", "named", "identify", "determine", "find", "look", "looks", "seen", "visible",
    "shown", "show", "showing", "display", "displayed", "depict", "depicted", "depicts", "drawn", "draw",
    "drawing", "painted", "placed", "located", "positioned", "sitting", "sits", "sit", "lie", "lies",
    "location", "position", "place", "spot", "area", "region", "side", "corner", "half", "upper", "lower",
    "centre", "central", "number", "amount", "much", "counting", "thing", "things", "item", "items", "figure",
    "figures", "form", "kind", "type", "sort", "photo", "pic", "scene", "canvas", "graphic", "illustration",
    "size", "sized", "bigger", "little", "tiny", "huge", "larger", "smaller", "colours", "colors", "coloured",
    "colored", "shade", "round", "circular", "rectangle", "triangular", "explain", "description", "summarize",
    "summarise", "summary", "caption", "overview", "content", "contents", "going", "exactly", "quick",
    "question", "hey", "hi", "ok", "okay", "now", "well", "also", "no", "not", "yes", "single", "only", "else",
    "other", "exist", "present", "contain", "contains", "include", "includes", "list", "mention", "let",
    "whereabouts", "who", "why", "when", "whether", "if", "got", "get", "used", "use", "made", "appear", "view",
    "provide", "share", "tell", "say", "give", "picture", "image", "shape", "object", "objects",
)  # fmt: skip
#: The visitor words' synonyms among the words the pair knew before them (run 10).
WORD_SYNONYMS = {
    "colours": "colour", "colors": "color", "coloured": "colour", "colored": "color", "shade": "colour",
    "little": "small", "tiny": "small", "smaller": "small", "huge": "large", "larger": "large", "bigger": "big",
    "size": "big", "sized": "big", "location": "where", "position": "where", "located": "where",
    "positioned": "where", "placed": "where", "whereabouts": "where", "place": "part", "spot": "part",
    "area": "part", "region": "part", "side": "part", "corner": "part", "upper": "top", "lower": "bottom",
    "centre": "center", "central": "center", "drawn": "shows", "shown": "shows", "show": "shows",
    "depicts": "shows", "depicted": "shows", "display": "shows", "displayed": "shows", "showing": "shows",
    "contains": "shows", "contain": "shows", "photo": "picture", "pic": "picture", "drawing": "picture",
    "scene": "picture", "canvas": "picture", "illustration": "picture", "graphic": "picture",
    "thing": "object", "item": "object", "figure": "shape", "form": "shape", "things": "objects",
    "items": "objects", "figures": "shapes", "number": "many", "amount": "many", "counting": "count",
    "explain": "describe", "summarize": "describe", "summarise": "describe", "description": "describe",
    "summary": "describe", "caption": "describe", "overview": "describe", "round": "circle",
    "circular": "circle", "rectangle": "square", "triangular": "triangle", "name": "what", "identify": "what",
    "determine": "what", "type": "which", "kind": "which", "sort": "which", "visible": "see", "seen": "see",
    "look": "see", "view": "see", "an": "a", "its": "the", "has": "is", "have": "is", "i": "you",
}  # fmt: skip

#: A shape's plural, as a count asks it.
PLURALS = {"circle": "circles", "square": "squares", "triangle": "triangles", "cross": "crosses"}
#: A superlative, and the size of the one shape it names.
SUPERLATIVES = {"largest": "large", "biggest": "large", "smallest": "small"}


def _typos(listed: str) -> dict[str, str]:
    """``"word: typo typo; word: typo"`` as {typo: word}."""
    pairs = (entry.split(":") for entry in listed.split(";"))
    return {typo: word.strip() for word, typos in pairs for typo in typos.split()}


#: Common typos of the world's words and the visitors' (a typo, its word). Read as the word by the asking rule.
TYPOS = _typos(
    "describe: descrbe desribe decribe discribe; image: imgae iamge; detail: detial deatil; picture: pictrue "
    "picutre; circle: circel cirlce circl; square: sqaure sqare squre; triangle: traingle triangel trinagle; "
    "cross: corss; colour: colur coulor; color: colro; shape: shpae shap; shapes: shpaes; many: mnay meny; where: "
    "whre wher; which: wich whcih; what: waht wat; yellow: yelow; purple: purpel; orange: oragne; green: gren; "
    "large: lrage; small: smal samll; bottom: botom; middle: midle; the: teh; there: tehre; the: hte; chart: chrat"
)
#: Words run 13 appends to the tokenizer, in this order, after :data:`VISITOR_WORDS`.
MORE_VISITOR_WORDS = (
    *PLURALS.values(),
    *SUPERLATIVES,
    "graph",
    "graphs",
    "pictures",
    "images",
    "photos",
    "drawings",
    *TYPOS,
)
#: A new word's input embedding starts as a word the pair knows that means about the same (else the mean of the
#: known words'): ``scripts/train_builtin_pair.py``'s ``grow_vocabulary`` reads it.
SYNONYMS = {
    **WORD_SYNONYMS,
    **TYPOS,
    **{p: s for s, p in PLURALS.items()},
    "largest": "large",
    "biggest": "large",
    "smallest": "small",
    "graph": "chart",
    "graphs": "chart",
    "pictures": "picture",
    "images": "image",
    "photos": "picture",
    "drawings": "picture",
}


#: Words the chat template and a clip's timestamps write ("<0.8 seconds>" before each pair of video frames).
CHAT_WORDS = ("user", "assistant", "system")
TIMESTAMP_WORDS = ("<", ">", "seconds")
DIGITS = tuple(str(d) for d in range(10))


def token_words(visitor_words: bool = False, more_visitor_words: bool = False) -> tuple[str, ...]:
    """The tokenizer's words in id order (after its special tokens and the newline): the chat's words and the
    world's (digits apart), the digits and their continuations ("##4" in "42"), then :data:`VISITOR_WORDS`
    (``visitor_words``, or with ``more_visitor_words``) and :data:`MORE_VISITOR_WORDS` (``more_visitor_words``),
    each word once, where it first comes."""
    words = [*CHAT_WORDS, *world_words(), *TIMESTAMP_WORDS]
    listed = [w for w in words if w not in DIGITS] + list(DIGITS) + [f"##{d}" for d in DIGITS]
    if visitor_words or more_visitor_words:
        listed += [w for w in VISITOR_WORDS if w not in listed]
    if more_visitor_words:
        listed += [w for w in MORE_VISITOR_WORDS if w not in listed]
    return tuple(dict.fromkeys(listed))


@functools.cache
def known_words() -> frozenset[str]:
    """The words the shipped pair's tokenizer has: the world's, the visitor words and the later ones."""
    return frozenset(world_words()) | frozenset(VISITOR_WORDS) | frozenset(MORE_VISITOR_WORDS)
