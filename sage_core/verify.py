"""Greedy verification of a draft tree (paper §3.1, step 3).

The target has scored the root and every node in one forward. A node is
accepted when its token equals the target's argmax at its parent and its
parent is accepted; the longest such path is kept, and the target's argmax
after its last node is the bonus token. The output therefore equals the
target's own greedy decoding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .trees import ROOT, Tree


@dataclass(frozen=True)
class Verdict:
    accepted_nodes: tuple[int, ...]
    accepted_tokens: tuple[int, ...]
    bonus_token: int


def verify_greedy(tree: Tree, target_argmax: Sequence[int]) -> Verdict:
    """Walk the tree along the target's argmax.

    `target_argmax[0]` is the target's choice after the root, and
    `target_argmax[1 + i]` its choice after node i.
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
            return Verdict(tuple(accepted), tuple(tree.tokens[i] for i in accepted), wanted)
        accepted.append(match)
        current = match
