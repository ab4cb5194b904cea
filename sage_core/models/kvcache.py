"""The KV caches of one run (the cache strategies of `caches.py`): full-attention layers whose
keys and values grow in place, transformers' own layers, and the row moves of a commit.

Transformers' `DynamicLayer` appends by `torch.cat`, which copies the whole
cache on every forward: O(context) work per draft level and per
verification. `GrowingLayer` keeps its keys and values in buffers with room
to spare (sized at the prefill for the whole run) and exposes the filled
rows as views, so appending writes only the new rows and cropping only
shortens the views. RoPE is applied before caching, so rows can be moved to
other indices and keep their positions (tests/test_fastpath.py checks a commit that
moves rows against the cache of step-by-step decoding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer


class GrowingLayer(DynamicLayer):
    """A full-attention layer: `keys`/`values` are views of the first rows of larger buffers.

    A buffer that is full is replaced by one with `reserve` (at least half its
    size) rows to spare, which a well-sized run never needs.
    """

    def __init__(self, reserve: int) -> None:
        super().__init__()
        self.reserve = reserve
        self.key_buffer: torch.Tensor | None = None
        self.value_buffer: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # key_states: [B, H, N, D], the N new rows
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = self.get_seq_length()
        end = length + key_states.shape[-2]
        if self.key_buffer is None or self.value_buffer is None or end > self.key_buffer.shape[-2]:
            self._grow(key_states, value_states, length, end + max(self.reserve, end // 2))
        assert self.key_buffer is not None and self.value_buffer is not None
        self.key_buffer[..., length:end, :].copy_(key_states)
        self.value_buffer[..., length:end, :].copy_(value_states)
        self.keys = self.key_buffer[..., :end, :]
        self.values = self.value_buffer[..., :end, :]
        return self.keys, self.values

    def _grow(self, key_states: torch.Tensor, value_states: torch.Tensor, length: int, capacity: int) -> None:
        keys = key_states.new_empty((*key_states.shape[:-2], capacity, key_states.shape[-1]))
        values = value_states.new_empty((*value_states.shape[:-2], capacity, value_states.shape[-1]))
        if length:
            assert self.keys is not None and self.values is not None
            keys[..., :length, :].copy_(self.keys)
            values[..., :length, :].copy_(self.values)
        self.key_buffer, self.value_buffer = keys, values


def growing_cache(config: Any, reserve: int, windows_by_mask: bool = False) -> DynamicCache:
    """A `DynamicCache` for `config` whose layers are `GrowingLayer`s with `reserve` rows to spare.

    Layers that are not plain full-attention layers are kept as transformers made them, except
    sliding-window layers when `windows_by_mask`: they keep every row too (a window's layer drops
    old rows, which a tree's scratch and its commit cannot live with), and the masks keep each
    token inside its window (`masks.windowed`).
    """
    cache = DynamicCache(config=config)
    kinds = (DynamicLayer, DynamicSlidingWindowLayer) if windows_by_mask else (DynamicLayer,)
    cache.layers = [GrowingLayer(reserve) if type(layer) in kinds else layer for layer in cache.layers]
    return cache


def full_cache(config: Any, windows_by_mask: bool = False) -> DynamicCache:
    """transformers' own `DynamicCache` for `config`; with `windows_by_mask`, every layer a full
    `DynamicLayer` (see `growing_cache`)."""
    cache = DynamicCache(config=config)
    if windows_by_mask:  # layers of other kinds (Gemma 4's shared-KV placeholders) stay as they are
        cache.layers = [DynamicLayer() if type(layer) is DynamicSlidingWindowLayer else layer for layer in cache.layers]
    return cache


def move_rows(cache: DynamicCache, sources: Sequence[int], start: int) -> None:
    """Copy cache rows `sources` (sequence indices) to `start`, `start + 1`, ... in every layer.

    The rows are gathered before they are written, so sources and targets may
    overlap. Index tensors are made once per device the layers sit on; on a CPU
    (float32 or float16) numpy moves the rows through views of the same memory.
    """
    if not sources:
        return
    count = len(sources)
    index_on: dict[torch.device, torch.Tensor] = {}
    on_host = np.asarray(sources)
    for layer in cache.layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None or keys.numel() == 0:
            continue
        if keys.device.type == "cpu" and keys.dtype in (torch.float32, torch.float16):
            for rows in (keys.numpy(), values.numpy()):  # views: numpy's gather costs less per call
                rows[..., start : start + count, :] = rows[..., on_host, :]
            continue
        index = index_on.get(keys.device)
        if index is None:
            index = index_on[keys.device] = torch.tensor(list(sources), dtype=torch.long, device=keys.device)
        keys[..., start : start + count, :] = keys.index_select(-2, index)
        values[..., start : start + count, :] = values.index_select(-2, index)
