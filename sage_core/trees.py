"""A draft tree: tokens plus parents (paper §3.1, Figure 2).

Node i holds `tokens[i]`; `parents[i]` is the index of its parent node, or
-1 when its parent is the root (the last committed token, which is not a
node). Parents always come before their children, so depths, paths and the
tree-attention mask can be derived in one pass; nothing else is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

ROOT = -1

# A tree template written as rank paths: (a, b, c) = the a-th most likely
# draft token at depth 1, its b-th most likely child, then that node's c-th.
RankPath = tuple[int, ...]

# The 25-node, depth-5 tree of SpecVLM and EAGLE-1: the static baseline and
# SAGE's first tree.
STATIC_TREE: tuple[RankPath, ...] = (
    (0,), (1,), (2,), (3,),
    (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0),
    (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (1, 0, 0),
    (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2),
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1),
)  # fmt: skip

# SD-Chain: five draft tokens in a row.
CHAIN_TREE: tuple[RankPath, ...] = ((0,), (0, 0), (0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0, 0))


@dataclass(frozen=True)
class Tree:
    tokens: tuple[int, ...]
    parents: tuple[int, ...]
    draft_probs: tuple[float, ...]

    def __post_init__(self) -> None:
        if not len(self.tokens) == len(self.parents) == len(self.draft_probs):
            raise ValueError("tokens, parents and draft_probs must have one entry per node")
        for index, parent in enumerate(self.parents):
            if not ROOT <= parent < index:
                raise ValueError(f"node {index} has parent {parent}: parents must come first")

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def depths(self) -> tuple[int, ...]:
        """Depth of each node: 1 for children of the root."""
        depths: list[int] = []
        for parent in self.parents:
            depths.append(1 if parent == ROOT else depths[parent] + 1)
        return tuple(depths)

    @property
    def depth(self) -> int:
        return max(self.depths, default=0)

    @property
    def root_width(self) -> int:
        return sum(1 for parent in self.parents if parent == ROOT)

    def path_to(self, node: int) -> tuple[int, ...]:
        """Node indices from depth 1 down to `node`."""
        path = []
        while node != ROOT:
            path.append(node)
            node = self.parents[node]
        return tuple(reversed(path))

    def children(self, node: int) -> tuple[int, ...]:
        return tuple(i for i, parent in enumerate(self.parents) if parent == node)

    def cumulative_probs(self) -> tuple[float, ...]:
        """Each node's draft probability times those of its ancestors."""
        cumulative: list[float] = []
        for parent, prob in zip(self.parents, self.draft_probs, strict=True):
            cumulative.append(prob * (1.0 if parent == ROOT else cumulative[parent]))
        return tuple(cumulative)

    def ancestor_rows(self) -> tuple[tuple[int, ...], ...]:
        """For each node, the nodes it attends to: its ancestors and itself."""
        rows: list[tuple[int, ...]] = []
        for index, parent in enumerate(self.parents):
            rows.append((rows[parent] if parent != ROOT else ()) + (index,))
        return tuple(rows)


EMPTY_TREE = Tree((), (), ())
