"""A stand-in for a `VLM` whose logits are the real model's, computed once per token sequence.

Thousands of sampled decode runs of the same prompt revisit the same few
token sequences. `SequenceOracle` wraps a real tiny model: the first time a
sequence (prompt + tokens) is asked for, the real model computes it (one
`VLM.extend` under tree attention over all the missing sequences of a call,
after a copy of the prompt's prefill); after that it is looked up.
The decode loop runs unchanged on top (its trees, verifier, commits and
token accounting); only the KV cache is replaced by token bookkeeping, which
the losslessness suite covers on the real models. Positions are not read:
the logits of an entry depend only on its token sequence.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from sage_core.backends import Prefilled
from sage_core.models import VLM

Tokens = tuple[int, ...]


@dataclass
class SequenceState:
    """What a `KVState` holds, as tokens: the committed ones and each scratch entry's sequence."""

    committed: int
    history: Tokens = ()
    entries: list[Tokens] = field(default_factory=list)

    @property
    def scratch(self) -> int:
        return len(self.entries)


class SequenceOracle:
    def __init__(self, inner: VLM) -> None:
        self.inner = inner
        self.inputs: Mapping[str, Any] | None = None
        self.prefilled: tuple[Any, torch.Tensor] | None = None
        self.table: dict[Tokens, torch.Tensor] = {}
        self.misses = 0

    def __getattr__(self, name: str) -> Any:  # name, tokenizer, eos_token_ids, device, ...
        return getattr(self.inner, name)

    def prefill(self, inputs: Mapping[str, Any], reserve: int = 256, **options: Any) -> Prefilled:
        assert not any(options.values()), "the oracle neither scores nor prunes"
        if self.prefilled is None:
            self.prefilled = self.inner.prefill(inputs, reserve=64)
            self.inputs = inputs
            self.table[()] = self.prefilled[1]
        assert inputs is self.inputs, "one oracle answers for one prompt"
        state = SequenceState(committed=int(inputs["input_ids"].shape[1]))
        return Prefilled(state, self.table[()])  # type: ignore[arg-type]  # a SequenceState: token bookkeeping, not a cache

    def extend(
        self,
        state: SequenceState,
        tokens: Sequence[int],
        positions: Sequence[int],
        visible: Sequence[Sequence[int]] | None = None,
        *,
        parents: Sequence[int] | None = None,
    ) -> torch.Tensor:
        assert parents is not None and len(parents) == len(tokens)
        for token, parent in zip(tokens, parents, strict=True):
            assert parent < state.scratch
            state.entries.append((state.history if parent == -1 else state.entries[parent]) + (int(token),))
        wanted = state.entries[-len(tokens) :]
        self._compute([seq for seq in wanted if seq not in self.table])
        return torch.stack([self.table[seq] for seq in wanted])

    def commit(self, state: SequenceState, keep: Sequence[int]) -> None:
        keep = list(keep)
        if keep:
            kept = state.entries[keep[-1]]
            assert all(state.entries[k] == kept[: len(state.history) + 1 + j] for j, k in enumerate(keep)), (
                "the kept entries must form a path"
            )
            state.history = kept
        state.committed += len(keep)
        state.entries = []

    def _compute(self, missing: Sequence[Tokens]) -> None:
        """One real forward (tree attention) over every prefix of the missing sequences, after the prompt."""
        if not missing:
            return
        assert self.prefilled is not None
        self.misses += len(missing)
        prefixes = {seq[:length] for seq in missing for length in range(1, len(seq) + 1)}
        nodes = sorted(prefixes, key=lambda seq: (len(seq), seq))  # parents first
        index = {seq: i for i, seq in enumerate(nodes)}
        state = copy.deepcopy(self.prefilled[0])
        start = state.committed
        rows = self.inner.extend(
            state,
            [seq[-1] for seq in nodes],
            positions=[start + len(seq) - 1 for seq in nodes],
            parents=[index[seq[:-1]] if len(seq) > 1 else -1 for seq in nodes],
        )
        for seq, row in zip(nodes, rows, strict=True):
            self.table.setdefault(seq, row)
