"""Forwards: what computes the logits of new tokens after the cache (the other half of a backend;
`caches.py` is the first).

A `Forward` has a name, says whether it is `exact` (transformers' logits bit for bit, so a target
may run it) and is called with the model, one forward's tensors (`TreeBatch`: ids, positions, the
tree mask) and the cache, which it updates; it returns the logits (1, N, vocab).

Four are chosen by name (`FORWARDS`; `register_forward` adds one):
- "transformers": transformers' own forward (its module machinery, its output dataclass);
- "lean": `lean.py`'s text forward, transformers' operations without the machinery, bit for bit
  (tests/test_fastpath.py), where `LeanText.of` knows the decoder to be safe; transformers' elsewhere;
- "fused": the same mathematics in fewer operations (`LeanText.fused`; a small draft's merged
  forward, `lean_merged.py`): its rounding is not transformers', so it is a draft's only;
- "compiled": "fused" with each layer's halves through `torch.compile` (where the MLP is SiLU).

A forward that is not exact only proposes: the target of a run then runs "lean" (`open_backend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from ..registry import Registry
from .lean import LeanText


class TextModel(Protocol):
    """What a forward reads of a loaded model (`VLM` has it)."""

    model: Any
    lean: LeanText | None
    cache_keyword: str


@dataclass(frozen=True)
class TreeBatch:
    """One forward's tensors: the ids and positions (1, N), the M-RoPE delta included; the additive
    tree mask (1, 1, N, cache + N), None where every new token sees every entry (as in `generate`);
    `layer_masks`, the mask per layer type where the family keeps sliding windows by mask (else the
    mask itself); `rows`, the scratch's ancestor rows after the new tokens; `positions_below`, more
    than the largest position id."""

    input_ids: torch.Tensor
    position_ids: torch.Tensor
    mask: torch.Tensor | None
    layer_masks: torch.Tensor | dict[str, torch.Tensor] | None
    rows: torch.Tensor
    positions_below: int

    def lone_token_sees_all(self) -> bool:
        """One new token that sees every cached entry (checked on a CPU only, where it costs nothing)."""
        rows = self.rows
        return self.input_ids.shape[1] == 1 and rows.device.type == "cpu" and bool(rows.numpy()[-1].all())


class Forward(Protocol):
    """What computes the logits of new tokens after the cache (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def exact(self) -> bool: ...

    def __call__(self, vlm: TextModel, batch: TreeBatch, cache: DynamicCache) -> torch.Tensor: ...


@dataclass(frozen=True)
class Transformers:
    """transformers' own forward."""

    name: str = "transformers"
    exact: bool = True

    def __call__(self, vlm: TextModel, batch: TreeBatch, cache: DynamicCache) -> torch.Tensor:
        output = vlm.model(
            input_ids=batch.input_ids,
            position_ids=batch.position_ids,
            attention_mask=batch.layer_masks,
            **{vlm.cache_keyword: cache},
            use_cache=True,
        )
        return output.logits


@dataclass(frozen=True)
class Lean:
    """`lean.py`'s forward, bit for bit transformers' (transformers' own where it does not apply)."""

    name: str = "lean"
    exact: bool = True

    def __call__(self, vlm: TextModel, batch: TreeBatch, cache: DynamicCache) -> torch.Tensor:
        if vlm.lean is None:
            return TRANSFORMERS(vlm, batch, cache)
        return vlm.lean.forward(batch.input_ids, batch.position_ids, batch.mask, cache)


@dataclass(frozen=True)
class Fused:
    """The lean forward's fused variant, a draft's only (`compiled`: its halves through torch.compile)."""

    name: str = "fused"
    exact: bool = False
    compiled: bool = False

    def __call__(self, vlm: TextModel, batch: TreeBatch, cache: DynamicCache) -> torch.Tensor:
        lean = vlm.lean
        if lean is None:
            return TRANSFORMERS(vlm, batch, cache)
        # a draft token that sees every entry needs no mask (its rounding may then differ)
        mask = None if batch.mask is None or batch.lone_token_sees_all() else batch.mask
        compiled = self.compiled and lean.compilable
        return lean.forward(
            batch.input_ids, batch.position_ids, mask, cache, fused_up_to=batch.positions_below, compiled=compiled
        )


TRANSFORMERS = Transformers()
LEAN = Lean()
FUSED = Fused()
COMPILED = Fused("compiled", compiled=True)

# The registry: process-wide, filled with the built-in forwards; `register_forward` adds one.
FORWARDS: Registry[Forward] = Registry("forward", lambda forward: forward.name)
for _forward in (TRANSFORMERS, LEAN, FUSED, COMPILED):
    FORWARDS.add(_forward, built_in=True)


def register_forward(forward: Forward) -> Forward:
    """Offer a forward by its name (`DecodeConfig(forward=...)`, `open_backend`, the CLI's `--forward`)."""
    return FORWARDS.add(forward)


def unregister_forward(name: str) -> None:
    """Remove a forward `register_forward` added (the built-in ones stay)."""
    FORWARDS.remove(name)


def forward_named(name: str) -> Forward:
    """The registered forward of this name, or one sentence naming the choices."""
    return FORWARDS.named(name)
