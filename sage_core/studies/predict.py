"""Predicted speedup of each method for a target and a draft whose costs were measured apart.

A round of speculative decoding (sage-method.md, "One round") costs, in forwards:

- the draft's feed of the round's committed tokens (the accepted ones and the bonus: one forward of
  τ + 1 tokens), whose last logits give the first level's candidates;
- one draft forward per tree level above the deepest, over that level's nodes (depth D: D − 1 of them);
- the target's verification of the whole tree (the root and its N nodes) in one forward;

and commits τ + 1 tokens, where plain decoding commits one per one-token target step. So

    speedup = (τ + 1) · one_token_ms / (draft_ms + verify_ms),
    draft per committed token = draft_ms / (τ + 1),

summed over rounds when the rounds differ (a run's records). The bookkeeping between forwards is
left out (the paper measured it at 0.4 % of the time), as are the prefills: these are decode-only
speedups. scripts/gpu_check.py fills the costs in from a GPU and the τ from the built-in pair's
runs and from the paper's tables; tests/test_predict.py checks the arithmetic by hand.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..records import RoundRecord
from ..trees import CHAIN_TREE, STATIC_TREE, RankPath


@dataclass(frozen=True)
class CostPoints:
    """One model's measured forward time (ms) after its cache, at node counts `sizes` (ascending)."""

    sizes: tuple[int, ...]
    ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.ms) or list(self.sizes) != sorted(set(self.sizes)):
            raise ValueError("cost points need ascending distinct node counts, one time each")

    def at(self, nodes: float) -> float:
        """Piecewise linear in the node count; flat below the first size; above the last, extended along the
        last two points' slope where it rises, else flat (a timing's noise must not predict negative times)."""
        sizes, ms = self.sizes, self.ms
        if nodes <= sizes[0] or len(sizes) == 1:
            return ms[0]
        i = next((i for i in range(1, len(sizes)) if nodes <= sizes[i]), None)
        if i is None:
            slope = max(0.0, (ms[-1] - ms[-2]) / (sizes[-1] - sizes[-2]))
            return ms[-1] + slope * (nodes - sizes[-1])
        x0, x1, y0, y1 = sizes[i - 1], sizes[i], ms[i - 1], ms[i]
        return y0 + (y1 - y0) * (nodes - x0) / (x1 - x0)


@dataclass(frozen=True)
class RoundShape:
    """One round as the costs see it: draft tokens accepted (τ, bonus excluded) and the tree's nodes per depth."""

    accepted: float
    level_widths: tuple[float, ...]  # nodes at depth 1, 2, ... D

    @property
    def nodes(self) -> float:
        return sum(self.level_widths)

    @property
    def committed(self) -> float:
        """Tokens the round commits: the accepted ones and the bonus."""
        return self.accepted + 1


@dataclass(frozen=True)
class Prediction:
    """A method's predicted decode-only figures for one target/draft pair of cost curves."""

    method: str
    tau_source: str
    tau: float
    nodes: float
    draft_ms_per_round: float
    verify_ms_per_round: float
    draft_ms_per_token: float
    speedup: float


def level_widths(paths: Sequence[RankPath]) -> tuple[int, ...]:
    """Nodes per depth of a tree written as rank paths (trees.py)."""
    depth = max(len(p) for p in paths)
    return tuple(sum(1 for p in paths if len(p) == d) for d in range(1, depth + 1))


def round_ms(shape: RoundShape, verify: CostPoints, draft_level: CostPoints) -> tuple[float, float]:
    """(draft ms, verify ms) of one round: the feed, one draft forward per level above the deepest, the verify."""
    drafting = draft_level.at(shape.committed) + sum(draft_level.at(w) for w in shape.level_widths[:-1])
    return drafting, verify.at(shape.nodes)


def predict(
    method: str,
    tau_source: str,
    rounds: Sequence[RoundShape],
    one_token_ms: float,
    verify: CostPoints,
    draft_level: CostPoints,
) -> Prediction:
    """The speedup over plain decoding that these costs predict for these rounds (module docstring)."""
    if not rounds or one_token_ms <= 0:
        raise ValueError("a prediction needs at least one round and a positive one-token time")
    costs = [round_ms(shape, verify, draft_level) for shape in rounds]
    drafting, verifying = sum(c[0] for c in costs), sum(c[1] for c in costs)
    committed = sum(shape.committed for shape in rounds)
    count = len(rounds)
    return Prediction(
        method=method,
        tau_source=tau_source,
        tau=statistics.fmean(shape.accepted for shape in rounds),
        nodes=statistics.fmean(shape.nodes for shape in rounds),
        draft_ms_per_round=drafting / count,
        verify_ms_per_round=verifying / count,
        draft_ms_per_token=drafting / committed,
        speedup=committed * one_token_ms / (drafting + verifying),
    )


def shapes_of(records: Sequence[RoundRecord]) -> list[RoundShape]:
    """A run's decode rounds as shapes (rounds without a tree, plain decoding's, are left out)."""
    shapes = []
    for record in records:
        if record.phase != "decode" or not record.tree.tokens:
            continue
        depths = record.tree.depths
        widths = tuple(float(sum(1 for d in depths if d == level)) for level in range(1, max(depths) + 1))
        shapes.append(RoundShape(float(record.accepted_length), widths))
    return shapes


# Trees the paper's τ are paired with. SD-Chain and SD-Tree are the paper's own trees; for SAGE the paper
# gives no mean tree, so a deep narrow one (depth 8, 11 nodes: the confident end of its rules) is assumed.
CHAIN_WIDTHS: tuple[float, ...] = tuple(float(w) for w in level_widths(CHAIN_TREE))
STATIC_WIDTHS: tuple[float, ...] = tuple(float(w) for w in level_widths(STATIC_TREE))
SAGE_ASSUMED_WIDTHS: tuple[float, ...] = (3.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


class PaperTau(NamedTuple):
    """One τ (accepted draft tokens per round, bonus excluded) from the paper's tables, with its tree's widths."""

    method: str
    source: str
    tau: float
    widths: tuple[float, ...]


# τ from the paper's tables (sage-method.md), greedy, H20 GPUs.
PAPER_TAUS: tuple[PaperTau, ...] = (
    PaperTau("static", "paper, LLaVA-OV-72B/7B, VideoDetailCaption (headline table, SD-Tree)", 4.21, STATIC_WIDTHS),
    PaperTau("sage", "paper, LLaVA-OV-72B/7B, VideoDetailCaption (Table 5, no pruning; tree assumed)", 5.60,
             SAGE_ASSUMED_WIDTHS),
    PaperTau("sage", "paper, Qwen2.5-VL-72B/7B, VideoDetailCaption (headline table, pruned; tree assumed)", 5.18,
             SAGE_ASSUMED_WIDTHS),
)  # fmt: skip
