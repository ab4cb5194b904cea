"""How the decode loop talks to a model: prefill / extend / commit, four implementations.

The loop (`decode.py`, `drafting.py`) sees one interface, `ModelBackend`:
- `prefill(inputs, reserve)`: the prompt forward; the cache state and the last position's logits;
- `extend(state, tokens, positions, parents=...)`: new tokens after the cache, each seeing the
  committed sequence and its parent's scratch entries; their logits;
- `commit(state, keep)`: keep the listed scratch entries as committed, drop the rest.

Four implementations, chosen by `DecodeConfig.backend`:
- "fast" (default): the `VLM` itself. The cache grows in place in buffers sized at the prefill
  (`kvcache.py`), the tree mask is built on the device from one small tensor of parent indices
  (on a CPU, from the parent list with numpy), a commit moves only the accepted rows that are
  out of place, and the forwards after the prefill run `lean.py`'s text forward (transformers'
  operations without its module machinery) where the model allows it: the target's bit for
  bit as transformers computes it, the draft's fused into fewer operations (a draft only
  proposes, so its last bits need not be transformers'; the target checks every token).
- "compiled" (off by default; the CLI's and the benchmark's `--backend compiled`): "fast" with
  the draft's fused forward through `torch.compile` (dynamic shapes, each layer's halves before
  and after the cache update; `lean.py`). The target keeps its exact forward: compiled kernels
  round differently from transformers', which a draft can afford and a target cannot (its
  logits decide the output). The first rounds pay the compilation (tens of seconds on a CPU).
  Measured on the built-in pair on a CPU it is slower than "fast" (README); on a GPU, where a
  small draft's forward is bound by kernel launches, `scripts/gpu_check.py` measures it.
- "fast-hf": the same, with transformers' own forward after the prefill too, for both models:
  what the lean forwards are measured against (`scripts/benchmark.py --backend fast-hf`).
- "plain": transformers as it comes. A `DynamicCache` that grows by concatenation, the mask
  written out on the host from ancestor lists and copied to the device, and a commit that
  rebuilds every layer's keys and values with `index_select` when the kept entries are not a
  prefix of the scratch. The simplest correct path: the reference the fast path is checked
  against, and a fallback should a model's cache not fit `kvcache.py`.

All are lossless; the tests run every method on each, and check that the target's lean forward
and transformers' give the same logits bit for bit (the draft's fused one: the same to rounding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from .config import BACKENDS, Backend
from .kvcache import full_cache
from .models import VLM, KVState, inference
from .models.vlm import clear_scratch, plan_recurrent, recurrent_commit


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


def open_backend(vlm: VLM, backend: Backend, *, draft: bool = False) -> ModelBackend:
    """The model behind the chosen backend; `draft`: the model only proposes (the fast path may
    then run the lean forward's fused variant, whose rounding is not transformers' own)."""
    if backend in ("fast", "compiled"):
        if not (draft and isinstance(vlm, VLM) and vlm.lean is not None):
            return vlm
        return Forwarding(vlm, fused=True, compiled=backend == "compiled" and vlm.lean.compilable)
    if backend == "fast-hf":
        return Forwarding(vlm, lean=False)
    if backend == "plain":
        return PlainBackend(vlm)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")


class Forwarding:
    """The fast path with another forward after the prefill: transformers' own (`lean=False`,
    backend "fast-hf"), or the lean forward's fused variant (`fused=True`, a draft's on "fast";
    `compiled=True` as well on "compiled")."""

    def __init__(self, vlm: VLM, *, lean: bool = True, fused: bool = False, compiled: bool = False) -> None:
        self._vlm = vlm
        self._lean = lean
        self._fused = fused
        self._compiled = compiled

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
        return self._vlm.extend(
            state, tokens, positions, parents=parents, lean=self._lean, fused=self._fused, compiled=self._compiled
        )

    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        self._vlm.commit(state, keep)


class PlainBackend:
    """Transformers' own cache and masks, as they come (see the module docstring)."""

    def __init__(self, vlm: VLM) -> None:
        self._vlm = vlm

    def _cache(self) -> Any:
        """transformers' `DynamicCache` (with full layers where the masks keep the sliding windows)."""
        return full_cache(self._vlm.model.config, self._vlm.spec.windows_by_mask)

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256) -> tuple[KVState, torch.Tensor]:
        """The prompt forward into a plain `DynamicCache` (`reserve` is not needed: it grows by concatenation)."""
        return self._vlm.prefill(inputs, cache=self._cache())

    def prefill_scored(
        self, inputs: Mapping[str, Any], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor, torch.Tensor]:
        """`prefill` plus the visual tokens' scores (pruning.py), into a plain `DynamicCache`."""
        return self._vlm.prefill_scored(inputs, cache=self._cache())

    def prefill_pruned(
        self, inputs: Mapping[str, Any], kept_visual: Sequence[int], reserve: int = 256
    ) -> tuple[KVState, torch.Tensor]:
        """`prefill` on the pruned prompt (pruning.py), into a plain `DynamicCache`."""
        return self._vlm.prefill_pruned(inputs, kept_visual, cache=self._cache())

    @inference
    def extend(
        self, state: KVState, tokens: Sequence[int], positions: Sequence[int], *, parents: Sequence[int]
    ) -> torch.Tensor:
        vlm, count = self._vlm, len(tokens)
        if vlm.spec.recurrent:
            plan_recurrent(vlm, state, parents)
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
        keys = (*range(state.committed), *state.scratch_positions, *positions)
        masks = vlm.spec.layer_masks(vlm.model.config, mask[None, None].to(vlm.device), tuple(positions), keys)
        state.scratch_positions += tuple(positions)
        input_ids = torch.tensor([list(tokens)], dtype=torch.long, device=vlm.device)
        # positions: (1, N), the M-RoPE delta included; the Qwen models expand it to their 3 axes.
        position_ids = torch.tensor([list(positions)], dtype=torch.long, device=vlm.device) + state.position_offset
        output = vlm.model(
            input_ids=input_ids,
            position_ids=position_ids,
            attention_mask=masks,
            **{vlm.cache_keyword: state.cache},
            use_cache=True,
        )
        state.scratch += count
        state.scratch_rows = rows
        return output.logits[0].float()

    @inference
    def commit(self, state: KVState, keep: Sequence[int]) -> None:
        keep = list(keep)
        if self._vlm.spec.recurrent:
            recurrent_commit(state, keep)
            return
        if keep == list(range(len(keep))):  # a prefix of the scratch: cut the rest off
            dropped = state.scratch - len(keep)
            if dropped:
                state.cache.crop(-dropped)
        else:  # rebuild every layer: the committed rows, then the kept ones
            for layer in state.cache.layers:
                kept: Any = layer  # full-attention layers only (checked at load)
                if getattr(kept, "keys", None) is None:  # a layer reading another's cache (Gemma 4's shared KV)
                    continue
                index = torch.cat(
                    [
                        torch.arange(state.committed, device=kept.keys.device),
                        torch.tensor(keep, dtype=torch.long, device=kept.keys.device) + state.committed,
                    ]
                )
                kept.keys = kept.keys.index_select(-2, index)
                kept.values = kept.values.index_select(-2, index)
        state.committed += len(keep)
        clear_scratch(state)
