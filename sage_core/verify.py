"""Verification of a draft tree (paper §3.1, step 3), behind one seam.

The target has scored the root and every node in one forward. A `Verifier`
turns those logits into the accepted path and the bonus token; the decode
loop calls it the same way whatever the settings (`make_verifier` picks one):

- greedy (temperature 0, the paper's setting; this module): a node is
  accepted when its token equals the target's argmax at its parent and its
  parent is accepted; the longest such path is kept, and the target's argmax
  after its last node is the bonus token. The output therefore equals the
  target's own greedy decoding.
- sampling (temperature > 0; sampling.py): rejection sampling over the tree,
  exact in distribution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from .trees import ROOT, Tree

if TYPE_CHECKING:
    from .backends import ModelBackend
    from .models import KVState

# Logits (rows, vocab) -> the processed logits a run samples from.
Warp = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Verdict:
    accepted_nodes: tuple[int, ...]
    accepted_tokens: tuple[int, ...]
    bonus_token: int
    # Sampling only: the children tried, in order, and each one's acceptance probability.
    tried_nodes: tuple[int, ...] = ()
    accept_probs: tuple[float, ...] = ()
    # Greedy only: the target's argmax after the root and after each node (what was compared).
    target_choices: tuple[int, ...] = ()


class Verifier(Protocol):
    """Checks a tree against the target's logits.

    `warp` is the processing of logits into the distribution the run samples
    from (None: plain softmax, greedy); the draft's candidates and SAGE's
    confidence read the draft's logits through it too.
    """

    @property
    def warp(self) -> Warp | None: ...

    def verify(self, tree: Tree, target_logits: torch.Tensor) -> Verdict:
        """`target_logits[0]`: after the root; `target_logits[1 + i]`: after node i."""
        ...


class GreedyVerifier:
    """The target's argmax decides: lossless against greedy `generate`."""

    warp: Warp | None = None

    def verify(self, tree: Tree, target_logits: torch.Tensor) -> Verdict:
        choices = target_logits.argmax(dim=-1).tolist()
        return verify_greedy(tree, choices)


def verify_greedy(tree: Tree, target_argmax: Sequence[int]) -> Verdict:
    """Walk the tree along the target's argmax.

    `target_argmax[0]` is the target's choice after the root, and
    `target_argmax[1 + i]` its choice after node i (both kept in the verdict: what was compared).
    """
    if len(target_argmax) != len(tree) + 1:
        raise ValueError("need one target argmax for the root and one per node")
    children: dict[int, list[int]] = {}
    for index, parent in enumerate(tree.parents):
        children.setdefault(parent, []).append(index)
    accepted: list[int] = []
    current = ROOT
    while True:
        wanted = target_argmax[current + 1]
        match = next((c for c in children.get(current, ()) if tree.tokens[c] == wanted), None)
        if match is None:
            accepted_tokens = tuple(tree.tokens[i] for i in accepted)
            return Verdict(tuple(accepted), accepted_tokens, wanted, target_choices=tuple(target_argmax))
        accepted.append(match)
        current = match


def verify_forward(target: ModelBackend, state: KVState, root: int, tree: Tree) -> torch.Tensor:
    """One target forward over [root, *nodes]; the logits after each of them, (1 + N, vocab)."""
    start, scratch = state.committed, state.scratch
    logits = target.extend(
        state,
        [root, *tree.tokens],
        positions=[start] + [start + d for d in tree.depths],
        parents=[-1] + [scratch + 1 + p for p in tree.parents],  # node i is entry 1 + i; the root is entry 0
    )
    return logits
