"""Cache strategies: how a run's KV cache is made, what it does before a forward, and how a commit
keeps the accepted entries (the other half of a backend; `forwards.py` is the first).

A `CacheStrategy` has a name and three methods:
- `new_cache(config, reserve, windows_by_mask)`: the empty cache the prefill fills for a model of this
  config (`reserve`: entries to make room for; `windows_by_mask`: sliding-window layers keep every row);
- `before_forward(state, parents)`: anything the cache must know before a forward of new tokens
  (nothing, but for the hybrid family's recurrent state);
- `commit(state, keep)`: keep the listed scratch entries as committed, drop the rest.

Two are chosen by name (`CACHE_STRATEGIES`; `register_cache_strategy` adds one):
- "in-place": full-attention layers whose buffers are sized at the prefill (`kvcache.GrowingLayer`:
  a forward writes only its new rows), and a commit that moves only the accepted rows that are out
  of place, then shortens the views;
- "growing": transformers' own `DynamicCache`, which grows by concatenation, and a commit that cuts
  the rest off when the kept entries are a prefix of the scratch, else rebuilds every layer's keys
  and values with `index_select`: the simplest correct path, the reference the other is checked against.

The third is the hybrid family's (Qwen3.5, `qwen3_5.py`): `RecurrentState` wraps the chosen one
(`Family.cache_strategy`), whose cache it keeps, and adds what its linear-attention layers need: a
plan before each forward and their states after a commit (`recurrent.py`). Nothing in the shared
code asks which family it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from ..registry import Registry
from .kvcache import full_cache, growing_cache, move_rows
from .recurrent import commit_states, crop_attention, plan_forward


class CacheStrategy(Protocol):
    """How a run's cache is made and committed (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def new_cache(self, config: Any, reserve: int, windows_by_mask: bool) -> DynamicCache: ...

    def before_forward(self, state: KVState, parents: Sequence[int]) -> None: ...

    def commit(self, state: KVState, keep: Sequence[int]) -> None: ...


def clear_scratch(state: KVState) -> None:
    """No scratch any more (after a commit)."""
    state.scratch = 0
    state.scratch_rows = None
    state.scratch_positions = ()


def move_kept_rows(state: KVState, keep: Sequence[int]) -> None:
    """Move the kept scratch rows that are not in place to follow the committed ones (`kvcache.move_rows`)."""
    first_moved = next((i for i, entry in enumerate(keep) if entry != i), len(keep))
    start = state.committed
    move_rows(state.cache, [start + entry for entry in keep[first_moved:]], start + first_moved)


@dataclass(frozen=True)
class InPlace:
    """Buffers sized at the prefill; a commit moves only the rows out of place."""

    name: str = "in-place"

    def new_cache(self, config: Any, reserve: int, windows_by_mask: bool) -> DynamicCache:
        return growing_cache(config, reserve, windows_by_mask)

    def before_forward(self, state: KVState, parents: Sequence[int]) -> None:
        pass

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        move_kept_rows(state, keep)
        dropped = state.scratch - len(keep)
        if dropped:
            state.cache.crop(-dropped)
        state.committed += len(keep)
        clear_scratch(state)


@dataclass(frozen=True)
class Growing:
    """transformers' `DynamicCache` as it comes (with full layers where the masks keep the sliding windows)."""

    name: str = "growing"

    def new_cache(self, config: Any, reserve: int, windows_by_mask: bool) -> DynamicCache:
        return full_cache(config, windows_by_mask)  # it grows: `reserve` is not needed

    def before_forward(self, state: KVState, parents: Sequence[int]) -> None:
        pass

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        keep = list(keep)
        if keep == list(range(len(keep))):  # a prefix of the scratch: cut the rest off
            dropped = state.scratch - len(keep)
            if dropped:
                state.cache.crop(-dropped)
        else:  # rebuild every layer: the committed rows, then the kept ones
            for layer in state.cache.layers:
                kept: Any = layer  # full-attention layers only (checked at load)
                if getattr(kept, "keys", None) is None:  # a layer reading another's cache (Gemma 4's shared KV)
                    continue
                device = kept.keys.device
                kept_rows = torch.tensor(keep, dtype=torch.long, device=device) + state.committed
                index = torch.cat([torch.arange(state.committed, device=device), kept_rows])
                kept.keys = kept.keys.index_select(-2, index)
                kept.values = kept.values.index_select(-2, index)
        state.committed += len(keep)
        clear_scratch(state)


@dataclass(frozen=True)
class RecurrentState:
    """The hybrid family's linear-attention layers on top of another strategy's cache: before a forward
    each new token is planned to continue its parent's recurrent state, and a commit gives those layers
    the kept path's states while the attention layers keep the kept rows (recurrent.py)."""

    inner: CacheStrategy
    kernel: int  # the linear layers' convolution width (`linear_conv_kernel_dim`)

    @property
    def name(self) -> str:
        return f"recurrent state over {self.inner.name}"

    def new_cache(self, config: Any, reserve: int, windows_by_mask: bool) -> DynamicCache:
        return self.inner.new_cache(config, reserve, windows_by_mask)

    def before_forward(self, state: KVState, parents: Sequence[int]) -> None:
        plan_forward(state.cache, state.scratch, parents, self.kernel)

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        keep = list(keep)
        commit_states(state.cache, keep)
        move_kept_rows(state, keep)
        crop_attention(state.cache, state.scratch - len(keep))
        state.committed += len(keep)
        clear_scratch(state)


IN_PLACE = InPlace()
GROWING = Growing()


@dataclass
class KVState:
    """One model's cache in one run, and the strategy that made it (and commits it).

    The cache holds `committed` positions of the output sequence, then
    `scratch` entries for tree nodes that are not (yet) committed.
    `position_offset` is the M-RoPE delta of the Qwen families (0 else).
    `scratch_rows` says which scratch entries each scratch entry sees (its
    ancestors and itself): a (scratch, scratch) bool tensor on the device, or
    None while there is no scratch. The committed entries sit at their cache
    index (as the target's own decoding sees them).
    """

    cache: DynamicCache
    committed: int
    position_offset: int
    scratch: int = 0
    scratch_rows: torch.Tensor | None = None
    scratch_positions: tuple[int, ...] = ()  # each scratch entry's sequence position (for sliding windows)
    strategy: CacheStrategy = IN_PLACE


# The registry: process-wide, filled with the built-in strategies; `register_cache_strategy` adds one.
CACHE_STRATEGIES: Registry[CacheStrategy] = Registry("cache strategy", lambda strategy: strategy.name)
for _strategy in (IN_PLACE, GROWING):
    CACHE_STRATEGIES.add(_strategy, built_in=True)


def register_cache_strategy(strategy: CacheStrategy) -> CacheStrategy:
    """Offer a cache strategy by its name (`DecodeConfig(cache=...)`, `open_backend`, the CLI's `--cache`)."""
    return CACHE_STRATEGIES.add(strategy)


def unregister_cache_strategy(name: str) -> None:
    """Remove a strategy `register_cache_strategy` added (the built-in ones stay)."""
    CACHE_STRATEGIES.remove(name)


def cache_strategy(name: str) -> CacheStrategy:
    """The registered strategy of this name, or one sentence naming the choices."""
    return CACHE_STRATEGIES.named(name)
