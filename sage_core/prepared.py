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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

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
    with Stopwatch(device) as watch:
        moved = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in target.items()}
    return MappingProxyType(moved), watch.seconds


def _prepare(model: VLM, media: Media, prompt: str) -> tuple[Mapping[str, Any], float]:
    with Stopwatch(model.device) as watch:
        inputs = model.prepare(media, prompt)
    return MappingProxyType(inputs), watch.seconds
