"""The ablation lanes: SAGE with one of its parts taken away, raced like any method (issue: what entropy buys).

- `sage-frozen` (`FrozenSageProposer`): SAGE's own policy, the same online growth, threshold, budget and
  acceptance window, with α held at one value for the whole answer (`FrozenSageConfig.alpha`) instead of
  read from each round's draft entropy: what reading the entropy every round adds.
- `best-first` (`BestFirstProposer`): each round the N drafted nodes of highest cumulative draft
  probability, grown best-first with no depth or width from entropy (the allocation TALON and DDTree use),
  at most `BUDGET_TREE_DEPTH` (16) levels deep as sage-cost and SMART (10, SAGE's `depth_max_limit`, until
  2026-12-04),
  one draft forward per level over the frontier nodes whose children could still rank among the best N:
  what the shaping adds at the same average node count. N is `BestFirstConfig.nodes`; in a race beside
  SAGE, unless given, SAGE's mean node count in that race (`mean_nodes`), as sage-frozen holds SAGE's mean α
  (`mean_alpha`): each entry's `Holds` says so, and the app's race asks the registry.

Both verify an ordinary draft tree, so both are lossless and, under sampling, exact like every method.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..drafting import DraftedTree, TopK
from ..method_settings import BUDGET_TREE_DEPTH, SageConfig
from ..policy import Candidate, Expansion, confidence
from ..proposers import Adaptation, Drafter, Proposal, Proposer, RoundShape
from ..records import RoundRecord
from ..verify import Verdict
from .dynamic import rerank_tree
from .sage import SageProposer


def mean_alpha(rounds: Sequence[RoundRecord]) -> float | None:
    """SAGE's mean α over its decode rounds (what sage-frozen holds beside it); None without one."""
    alphas = [r.alpha for r in rounds if r.alpha is not None]
    return statistics.fmean(alphas) if alphas else None


def mean_nodes(rounds: Sequence[RoundRecord]) -> int | None:
    """SAGE's mean node count a round over its decode rounds with a tree, rounded (what best-first holds beside
    it); None without one."""
    nodes = [len(r.tree_tokens) for r in rounds if r.tree_tokens]
    return max(1, round(statistics.fmean(nodes))) if nodes else None


class FrozenSageProposer(SageProposer):
    """SAGE's proposer with the α that shapes each tree held at `alpha` (the first round's static tree and
    the acceptance window as SAGE's). Its records keep the draft's measured entropy beside the α used."""

    def __init__(self, config: SageConfig, alpha: float) -> None:
        super().__init__(config)
        self.frozen_alpha = alpha

    def shape_alpha(self, measured: float) -> float:
        return self.frozen_alpha


class BestFirstProposer(Proposer):
    """`nodes` nodes of highest cumulative draft probability each round, drafted best-first: one draft forward
    per level over the frontier nodes whose children could still rank among the best `nodes` (EAGLE-2's
    expansion), no entropy shaping; the root's entropy and α are recorded, not used."""

    def __init__(self, config: SageConfig, nodes: int) -> None:
        self.nodes = nodes
        self.candidates = config.candidates
        self.max_depth = BUDGET_TREE_DEPTH
        self.max_nodes = nodes * self.max_depth  # the draft's scratch: at most `nodes` new nodes a level

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        root = drafter.root(pending, self.candidates)
        entropy, alpha = confidence(root[1])
        drafted = best_first(drafter, root, self.nodes, self.candidates, self.max_depth)
        kept, rerank = rerank_tree(drafted, self.nodes)
        return Proposal(kept, RoundShape(entropy, alpha, root_top=root, rerank=rerank))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


def best_first(drafter: Drafter, root: TopK, budget: int, top: int, depth: int) -> DraftedTree:
    """Grow the tree of the `budget` nodes of highest cumulative draft probability (each node offering its
    `top` most likely children), level by level: a level keeps the children that rank among the best
    `budget` of every node drafted so far; only they can have children that rank there too (a child's
    cumulative probability is at most its parent's). `rerank_tree` then keeps the best `budget`."""
    cumulative: list[float] = []

    def choose(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
        offered = [
            Candidate(node.node, token, prob, node.cumulative * prob)
            for node in frontier
            for token, prob in zip(node.top_tokens, node.top_probs, strict=True)
            if prob > 0
        ]
        ranked = sorted([*cumulative, *(c.cumulative for c in offered)], reverse=True)
        if not ranked or budget <= 0:
            return []
        cutoff = ranked[min(budget, len(ranked)) - 1]
        chosen = sorted((c for c in offered if c.cumulative >= cutoff), key=lambda c: -c.cumulative)[:budget]
        cumulative.extend(c.cumulative for c in chosen)
        return chosen

    def worth_expanding(node: int, level: int, node_cumulative: float) -> bool:
        # A child's cumulative probability is at most its parent's: a node under the best `budget`'s last can
        # have no child among them, and needs no draft forward.
        ranked = sorted(cumulative, reverse=True)
        return len(ranked) < budget or node_cumulative > ranked[budget - 1]

    return drafter.grow(root, choose, depth, top, worth_expanding)
