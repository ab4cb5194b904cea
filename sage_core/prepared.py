"""The processors' tensors for one prompt, made once per model and shared by runs.

A race (and the benchmark) decodes the same media and prompt with several
methods; each model's processor runs once, and every run reads the same
tensors (read-only mappings; the forwards do not write to their inputs).
Timing stays fair: each run is charged the preparation it needs (the
target's, plus the draft's for the speculative methods) as measured once,
as if it had prepared its inputs alone, and its header says the work was
shared.

When the two processors are the same (`ModelPair.inputs_alike`: a target and
a draft of one family usually ship identical processors), the draft reads the
target's tensors (copied to its device if it sits elsewhere) and its processor
does not run: a speculative run is then charged the target's preparation and
that copy, which is what it needs.

Two checks need the model's own tokens: a prompt must leave room in the
model's positions (`config.check_positions`, here), and every word of it
should have a token (`check_vocabulary`: a word-level vocabulary, such as the
built-in pair's, reads an unknown word as its unknown token; the library, the
CLI and the app refuse such a prompt with the words named, for the built-in
pair in its asking note's words, with questions that work).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from .config import check_positions
from .errors import InputError
from .media import Media
from .models import VLM, ModelPair
from .timing import Stopwatch


@dataclass(frozen=True)
class PreparedInputs:
    """One prompt about one medium, through the target's and (optionally) the draft's processor."""

    media: Media
    prompt: str
    target: Mapping[str, Any]
    draft: Mapping[str, Any] | None
    target_seconds: float
    draft_seconds: float

    def seconds_for(self, uses_draft: bool) -> float:
        """What a run is charged: the target's preparation, plus the draft's when it drafts."""
        return self.target_seconds + (self.draft_seconds if uses_draft else 0.0)

    def matches(self, media: Media, prompt: str) -> bool:
        return self.media is media and self.prompt == prompt


def prepare_inputs(pair: ModelPair, media: Media, prompt: str, with_draft: bool = True) -> PreparedInputs:
    """Run each processor once (the draft's only when `with_draft`, and not when it is the target's),
    timed apart; `VLM.prepare` checks the prompt."""
    target, target_seconds = _prepare(pair.target, media, prompt)
    draft, draft_seconds = _for_draft(pair, media, prompt, target) if with_draft else (None, 0.0)
    return PreparedInputs(media, prompt, target, draft, target_seconds, draft_seconds)


def with_draft_inputs(pair: ModelPair, prepared: PreparedInputs) -> PreparedInputs:
    """The same inputs with the draft's added, when they are missing."""
    if prepared.draft is not None:
        return prepared
    draft, seconds = _for_draft(pair, prepared.media, prepared.prompt, prepared.target)
    return PreparedInputs(prepared.media, prepared.prompt, prepared.target, draft, prepared.target_seconds, seconds)


def _for_draft(
    pair: ModelPair, media: Media, prompt: str, target: Mapping[str, Any]
) -> tuple[Mapping[str, Any], float]:
    """The draft's inputs: the target's when the processors are alike (on the draft's device), else its own."""
    if not pair.inputs_alike:
        return _prepare(pair.draft, media, prompt)
    device = pair.draft.device
    check_positions(int(target["input_ids"].shape[1]), max_positions(pair.draft), f"the draft {pair.draft.name}")
    with Stopwatch(device) as watch:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in target.items()}
    return MappingProxyType(moved), watch.seconds


def _prepare(model: VLM, media: Media, prompt: str) -> tuple[Mapping[str, Any], float]:
    with Stopwatch(model.device) as watch:
        inputs = model.prepare(media, prompt)
    check_positions(int(inputs["input_ids"].shape[1]), max_positions(model), f"the model {model.name}")
    return MappingProxyType(inputs), watch.seconds


def max_positions(model: VLM) -> int | None:
    """How many positions the model's text part reads (None: not said)."""
    positions = getattr(model.model.config.get_text_config(), "max_position_embeddings", None)
    return int(positions) if isinstance(positions, int) and positions > 0 else None


def unknown_words(tokenizer: Any, prompt: str) -> list[str]:
    """The words of `prompt` the tokenizer reads as its unknown token (none for a byte-level one)."""
    unknown = getattr(tokenizer, "unk_token_id", None)
    if unknown is None or not getattr(tokenizer, "is_fast", False):
        return []
    encoded = tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)
    words = []
    for token, (start, end) in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True):
        word = prompt[start:end]
        if token == unknown and word != tokenizer.unk_token and word not in words:
            words.append(word)
    return words


#: The most characters of one word a sentence quotes: a longer word (a prompt may be one 4,000-character word) is
#: cut, "…" marking the cut.
QUOTED_CHARS = 40


def quoted_word(word: str, most: int = QUOTED_CHARS) -> str:
    """A word as a sentence quotes it: whole up to `most` characters, else its first ones and "…"."""
    return word if len(word) <= most else word[: most - 1] + "…"


def listed_words(words: Sequence[str], most: int = 3) -> str:
    """Words named in a sentence, each cut to `QUOTED_CHARS`: “a”, “b”, “c” and 2 more."""
    more = f" and {len(words) - most} more" if len(words) > most else ""
    return ", ".join(f"“{quoted_word(w)}”" for w in words[:most]) + more


#: Common short words of French, Spanish, German, Italian, Portuguese and Dutch questions that are not English
#: words: a question whose unknown words include these is taken as written in another language.
FOREIGN_WORDS = frozenset(
    " ".join(
        (
            "le la les des une est combien dans quel quelle quels décris décrivez",  # French
            "el los las una cuántos cuántas qué hay",  # Spanish
            "der das ist wie viele und ein eine gibt es beschreibe",  # German
            "di che quanti quante sono ci descrivi",  # Italian
            "os um uma quantos quantas há descreva",  # Portuguese
            "het een hoeveel zijn er beschrijf",  # Dutch
        )
    ).split()
)


def looks_like_another_language(words: Sequence[str]) -> bool:
    """Whether a question's unknown words look written in another language: a letter outside ASCII (é, ñ, ß, 中,
    я), or a common word of another European language; a misspelt English word is neither."""
    return any(any(ch.isalpha() and not ch.isascii() for ch in word) or word.lower() in FOREIGN_WORDS for word in words)


def check_vocabulary(model: VLM, prompt: str, name: str = "the model") -> None:
    """Refuse a prompt with words the model has no token for, naming them (InputError): for a model whose folder
    ships an asking note (`VLM.asking_note`: the built-in pair's names the questions that work) in its words; for
    any other word-level vocabulary by its tokens. A prompt with a control token is left to
    `VLM.prepare`, which refuses it for that."""
    if any(token in prompt for token in model.control_tokens):
        return
    tokenizer = model.tokenizer
    words = unknown_words(tokenizer, prompt)
    other_language = getattr(model, "other_language_note", None)
    if words and other_language and looks_like_another_language(words):
        raise InputError(other_language.format(words=listed_words(words)))
    if words and model.asking_note:  # a model that ships its asking note (the built-in pair): in its words
        raise InputError(model.asking_note.format(words=listed_words(words)))
    if words:
        more = f" and {len(words) - 8} more" if len(words) > 8 else ""
        named = ", ".join(repr(quoted_word(w)) for w in words[:8]) + more
        raise InputError(
            f"{name} has no token for {named} (its vocabulary has {len(tokenizer)} tokens; it would read "
            f"{'it' if len(words) == 1 else 'them'} as {tokenizer.unk_token!r}): rephrase with other words"
        )
