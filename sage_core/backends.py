"""How the decode loop talks to a model: prefill / extend / commit, three implementations.

The loop (`decode.py`, `drafting.py`) sees one interface, `ModelBackend`:
- `prefill(inputs, reserve)`: the prompt forward; the cache state and the last position's logits;
- `extend(state, tokens, positions, parents=...)`: new tokens after the cache, each seeing the
  committed sequence and its parent's scratch entries; their logits;
- `commit(state, keep)`: keep the listed scratch entries as committed, drop the rest.

Three implementations, chosen by `DecodeConfig.backend`:
- "fast" (default): the `VLM` itself. The cache grows in place in buffers sized at the prefill
  (`kvcache.py`), the tree mask is built on the device from one small tensor of parent indices
  (on a CPU, from the parent list with numpy), a commit moves only the accepted rows that are
  out of place, and the forwards after the prefill run `lean.py`'s text forward (transformers'
  operations without its module machinery) where the model allows it.
- "fast-hf": the same, with transformers' own forward after the prefill too: what the lean
  forward is measured against (`scripts/benchmark.py --backend fast-hf`).
- "plain": transformers as it comes. A `DynamicCache` that grows by concatenation, the mask
  written out on the host from ancestor lists and copied to the device, and a commit that
  rebuilds every layer's keys and values with `index_select` when the kept entries are not a
  prefix of the scratch. The simplest correct path: the reference the fast path is checked
  against, and a fallback should a model's cache not fit `kvcache.py`.

All are lossless; the tests run every method on each, and check that "fast" and "fast-hf" give
the same logits bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch
from transformers import DynamicCache

from .adapter import VLM, KVState
from .config import BACKENDS, Backend


class ModelBackend(Protocol):
    """What the decode loop needs of a model (see the module docstring)."""

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256) -> tuple[KVState, torch.Tensor]: ...

    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]: ...

    def prefill_pruned(
        self, inputs: Mapping[str, Any], kept_visual: Sequence[int], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor]: ...

    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor: ...

    def commit(self, state: KVState, keep: Sequence[int]) -> None: ...


def open_backend(vlm: VLM, backend: Backend) -> ModelBackend:
    """The model behind the chosen backend."""
    if backend == "fast":
        return vlm
    if backend == "fast-hf":
        return TransformersForward(vlm)
    if backend == "plain":
        return PlainBackend(vlm)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


class TransformersForward:
    """The fast path with transformers' own forward after the prefill (see the module docstring)."""

    def __init__(self, vlm: VLM) -> None:
        self._vlm = vlm

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256) -> tuple[KVState, torch.Tensor]:
        return self._vlm.prefill(inputs, reserve)

    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]:
        return self._vlm.prefill_scored(inputs, reserve)

    def prefill_pruned(
        self, inputs: Mapping[str, Any], kept_visual: Sequence[int], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor]:
        return self._vlm.prefill_pruned(inputs, kept_visual, reserve)

    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor:
        return self._vlm.extend(state, tokens, positions, parents=parents, lean=False)

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        self._vlm.commit(state, keep)


class PlainBackend:
    """Transformers' own cache and masks, as they come (see the module docstring)."""

    def __init__(self, vlm: VLM) -> None:
        self._vlm = vlm

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256) -> tuple[KVState, torch.Tensor]:
        """The prompt forward into a plain `DynamicCache` (`reserve` is not needed: it grows by concatenation)."""
        return self._vlm.prefill(inputs, cache=DynamicCache(config=self._vlm.model.config))

    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]:
        """`prefill` plus the visual tokens' scores (pruning.py), into a plain `DynamicCache`."""
        return self._vlm.prefill_scored(inputs, cache=DynamicCache(config=self._vlm.model.config))

    def prefill_pruned(
        self, inputs: Mapping[str, Any], kept_visual: Sequence[int], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor]:
        """`prefill` on the pruned prompt (pruning.py), into a plain `DynamicCache`."""
        return self._vlm.prefill_pruned(inputs, kept_visual, cache=DynamicCache(config=self._vlm.model.config))

    @torch.inference_mode()
    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor:
        vlm, count = self._vlm, len(tokens)
        scratch = state.scratch
        # Ancestor rows on the host: a new entry sees its parent's entries and itself.
        rows = torch.zeros((scratch + count, scratch + count), dtype=torch.bool)
        if state.scratch_rows is not None:
            rows[:scratch, :scratch] = state.scratch_rows
        for i, parent in enumerate(parents):
            if parent >= 0:
                rows[scratch + i] = rows[parent]
            rows[scratch + i, scratch + i] = True
        blocked = torch.finfo(vlm.dtype).min
        mask = torch.zeros((count, state.committed + scratch + count), dtype=vlm.dtype)
        mask[:, state.committed :].masked_fill_(~rows[scratch:], blocked)
        input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=vlm.device)
        # positions: (1, N), the M-RoPE delta included; the Qwen models expand it to their 3 axes.
        position_ids = torch.tensor([list(positions)], dtype=torch.long, device=vlm.device) + state.position_offset
        output = vlm.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=mask[None, None].to(vlm.device),
            cache=state.cache,
            use_cache=True,
        )
        state.scratch += count
        state.scratch_rows = rows
        return output.logits[0].float()

    @torch.inference_mode()
    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        keep = list(keep)
        if keep == list(range(len(keep))):  # a prefix of the scratch: cut the rest off
            dropped = state.scratch - len(keep)
            if dropped:
                state.cache.crop(-dropped)
        else:  # rebuild every layer: the committed rows, then the kept ones
            for layer in state.cache.layers:
                kept: Any = layer  # full-attention layers only (checked at load)
                index = torch.cat(
                    [
                        torch.arange(state.committed, device=kept.keys.device),
                        torch.tensor(keep, dtype=torch.long, device=kept.keys.device) + state.committed,
                    ]
                )
                kept.keys = kept.keys.index_select(-2, index)
                kept.values = kept.values.index_select(-2, index)
        state.committed += len(keep)
        state.scratch = 0
        state.scratch_rows = None
