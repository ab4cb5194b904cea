"""The processors' tensors for one prompt, made once per model and shared by runs.

A race (and the benchmark) decodes the same media and prompt with several
methods; each model's processor runs once, and every run reads the same
tensors (read-only mappings; the forwards do not write to their inputs).
Timing stays fair: each run is charged the preparation it needs (the
target's, plus the draft's for the speculative methods) as measured once,
as if it had prepared its inputs alone, and its header says the work was
shared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .adapter import VLM, ModelPair
from .media import Media
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
    """Run each processor once (the draft's only when `with_draft`), timed apart; `VLM.prepare`
    checks the prompt."""
    target, target_seconds = _prepare(pair.target, media, prompt)
    draft, draft_seconds = _prepare(pair.draft, media, prompt) if with_draft else (None, 0.0)
    return PreparedInputs(media, prompt, target, draft, target_seconds, draft_seconds)


def with_draft_inputs(pair: ModelPair, prepared: PreparedInputs) -> PreparedInputs:
    """The same inputs with the draft's added, when they are missing."""
    if prepared.draft is not None:
        return prepared
    draft, seconds = _prepare(pair.draft, prepared.media, prepared.prompt)
    return PreparedInputs(prepared.media, prepared.prompt, prepared.target, draft, prepared.target_seconds, seconds)


def _prepare(model: VLM, media: Media, prompt: str) -> tuple[Mapping[str, Any], float]:
    with Stopwatch(model.device) as watch:
        inputs = model.prepare(media, prompt)
    return MappingProxyType(inputs), watch.seconds
