"""How the decode loop talks to a model: a cache strategy and a forward, chosen separately.

The loop (`decode.py`, `drafting.py`) sees one interface, `ModelBackend`:
- `prefill(inputs, reserve, scored=..., kept_visual=...)`: the prompt forward; the cache state, the
  last position's logits and, when `scored`, each visual token's score (pruning.py); with
  `kept_visual`, the prompt without the other visual tokens (the draft's, under pruning);
- `extend(state, tokens, positions, parents=...)`: new tokens after the cache, each seeing the
  committed sequence and its parent's scratch entries; their logits;
- `commit(state, keep)`: keep the listed scratch entries as committed, drop the rest.

`open_backend` makes one from two settings (`Opened`):
- a cache strategy (`models/caches.py`): "in-place" (buffers sized at the prefill, a commit that
  moves only the accepted rows out of place) or "growing" (transformers' `DynamicCache`, grown by
  concatenation, a commit that cuts or rebuilds with `index_select`); a family may run its own over
  the chosen one (Qwen3.5's recurrent state, `Family.cache_strategy`);
- a forward (`models/forwards.py`): "transformers", "lean" (`lean.py`, bit for bit transformers'),
  "fused" (the same mathematics in fewer operations, a draft's only) or "compiled" ("fused" through
  `torch.compile`). A forward that is not exact runs for the draft; the target runs "lean" then (its
  logits decide the output).
Both are registries (`register_cache_strategy`, `register_forward`): a new one is a class and its
registration, nothing else (tests/test_forward_seam.py, tests/test_cache_seam.py).

`DecodeConfig.backend` names a preset, a (cache strategy, forward) pair (`BACKEND_PRESETS`):
"fast" (in-place, fused; the default), "compiled" (in-place, compiled), "fast-hf" (in-place,
transformers: what the lean forwards are measured against) and "plain" (growing, transformers:
transformers as it comes, the reference the others are checked against). `DecodeConfig.cache` and
`DecodeConfig.forward` replace either half. Every choice is lossless: the tests run every method on
each preset, and check that the target's lean forward and transformers' give the same logits bit
for bit (the draft's fused one: the same to rounding).

A model that is not a `VLM` (a test's stand-in) is its own backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

from .errors import ConfigError
from .models import VLM, KVState
from .models.caches import CacheStrategy, cache_strategy
from .models.forwards import LEAN, Forward, forward_named

# The loop talks to the models through a cache strategy and a forward, chosen separately;
# these four names are presets of the two (all lossless): "fast" (caches grown in place, commits that
# move only the accepted rows, the lean text forward of models/lean.py: the target's bit for bit, the
# draft's fused), "compiled" (the same, with the draft's fused forward through torch.compile),
# "fast-hf" (the same cache with transformers' own forward for both) and "plain" (transformers' own
# DynamicCache and forward). `DecodeConfig.cache` / `.forward` replace either half.
Backend = Literal["fast", "compiled", "fast-hf", "plain"]
BACKENDS: tuple[Backend, ...] = ("fast", "compiled", "fast-hf", "plain")
#: Each preset's (cache strategy, forward), by their names in models/caches.py and models/forwards.py.
BACKEND_PRESETS: dict[str, tuple[str, str]] = {
    "fast": ("in-place", "fused"),
    "compiled": ("in-place", "compiled"),
    "fast-hf": ("in-place", "transformers"),
    "plain": ("growing", "transformers"),
}


@dataclass(frozen=True)
class Prefilled:
    """What a prefill gives: the cache state, the last position's logits (vocab,), and each visual
    token's score (V,) float32 when it was asked for (`scored`), else None."""

    state: KVState
    logits: torch.Tensor
    visual_scores: torch.Tensor | None = None


class ModelBackend(Protocol):
    """What the decode loop needs of a model (see the module docstring)."""

    def prefill(
        self,
        inputs: Mapping[str, Any],
        reserve: int = 256,
        *,
        scored: bool = False,
        kept_visual: Sequence[int] | None = None,
    ) -> Prefilled: ...

    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor: ...

    def commit(self, state: KVState, keep: Sequence[int]) -> None: ...


@dataclass(frozen=True)
class BackendChoice:
    """A cache strategy and a forward, by name: a preset's, either half replaced."""

    cache: str
    forward: str

    @classmethod
    def of(cls, backend: str = "fast", cache: str | None = None, forward: str | None = None) -> BackendChoice:
        """The choice `backend` (a preset of `BACKENDS`) names, with `cache` or `forward` instead of its own;
        an unknown name is one sentence."""
        if backend not in BACKEND_PRESETS:
            raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        preset_cache, preset_forward = BACKEND_PRESETS[backend]
        choice = cls(cache or preset_cache, forward or preset_forward)
        cache_strategy(choice.cache)  # one sentence for an unknown name
        forward_named(choice.forward)
        return choice

    @property
    def label(self) -> str:
        """Its preset's name where it is one, else "cache strategy + forward"."""
        pair = (self.cache, self.forward)
        return next((name for name, preset in BACKEND_PRESETS.items() if preset == pair), " + ".join(pair))


def open_backend(vlm: VLM, choice: BackendChoice | str = "fast", *, draft: bool = False) -> ModelBackend:
    """The model behind the chosen cache strategy and forward (`choice`: a `BackendChoice`, or a preset's
    name); `draft`: the model only proposes, so it may run a forward that is not exact (else the
    target runs "lean")."""
    if not isinstance(vlm, VLM):  # a stand-in (tests/sequence_oracle.py) is its own backend
        return vlm
    if isinstance(choice, str):
        choice = BackendChoice.of(choice)
    forward = forward_named(choice.forward)
    return Opened(vlm, cache_strategy(choice.cache), forward if draft or forward.exact else LEAN)


class Opened:
    """A loaded model with a cache strategy and a forward (see the module docstring)."""

    def __init__(self, vlm: VLM, cache: CacheStrategy, forward: Forward) -> None:
        self.vlm = vlm
        self.cache = cache
        self.forward = forward

    def prefill(
        self,
        inputs: Mapping[str, Any],
        reserve: int = 256,
        *,
        scored: bool = False,
        kept_visual: Sequence[int] | None = None,
    ) -> Prefilled:
        if scored and kept_visual is not None:
            raise ConfigError("a prefill either scores the visual tokens or reads only the kept ones, not both")
        if scored:
            return Prefilled(*self.vlm.prefill_scored(inputs, reserve, self.cache))
        if kept_visual is not None:
            return Prefilled(*self.vlm.prefill_pruned(inputs, kept_visual, reserve, self.cache))
        return Prefilled(*self.vlm.prefill(inputs, reserve, self.cache))

    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor:
        return self.vlm.extend(state, tokens, positions, parents=parents, forward=self.forward)

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        self.vlm.commit(state, keep)
