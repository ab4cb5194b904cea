"""The ablation lanes: SAGE with one of its parts taken away, raced like any method (issue: what entropy buys).

- `sage-frozen` (`FrozenSageProposer`): SAGE's own policy, the same online growth, threshold, budget and
  acceptance window, with α held at one value for the whole answer (`FrozenSageConfig.alpha`) instead of
  read from each round's draft entropy: what reading the entropy every round adds.
- `best-first` (`BestFirstProposer`): each round SAGE's rule is run to learn how many nodes N it would
  draft; the tree verified is instead the N drafted nodes of highest cumulative draft probability, grown
  best-first with no depth or width from entropy (the allocation TALON and DDTree use): what the shaping
  adds at the same node count. Its draft drafts SAGE's tree too (to count it), so its draft time is about
  twice SAGE's: compare its τ, not its wall time.

Both verify an ordinary draft tree, so both are lossless and, under sampling, exact like every method.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .drafting import DraftedTree, TopK
from .method_settings import SageConfig
from .policy import Candidate, Expansion
from .proposers import Adaptation, Drafter, Proposal, SageProposer, rerank_tree
from .trees import STATIC_TREE
from .verify import Verdict


class FrozenSageProposer(SageProposer):
    """SAGE's proposer with the α that shapes each tree held at `alpha` (the first round's static tree and
    the acceptance window as SAGE's). Its records keep the draft's measured entropy beside the α used."""

    def __init__(self, config: SageConfig, alpha: float) -> None:
        super().__init__(config)
        self.frozen_alpha = alpha

    def shape_alpha(self, measured: float) -> float:
        return self.frozen_alpha


class BestFirstProposer:
    """SAGE's node count, best-first: each round SAGE's proposer drafts its own tree (N nodes; its window
    takes this lane's verdicts), then a best-first tree of N nodes is drafted and verified."""

    def __init__(self, config: SageConfig) -> None:
        self.sage = SageProposer(config)
        self.candidates = config.candidates
        self.max_depth = max(config.depth_max_limit, max(len(path) for path in STATIC_TREE))
        count = max(config.node_budget, len(STATIC_TREE))
        # SAGE's tree, then the best-first growth: at most N new nodes per level enter the running best N.
        self.max_nodes = count * self.max_depth
        self.counted: Proposal | None = None

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        counted = self.sage.propose(drafter, pending)  # reads the committed tokens; the root's top-k is kept
        self.counted = counted
        budget = len(counted.tree)
        root = counted.shape.root_top
        assert root is not None
        drafted = best_first(drafter, root, budget, self.candidates, self.max_depth)
        kept, rerank = rerank_tree(drafted, budget)
        return Proposal(kept, replace(counted.shape, levels=(), rerank=rerank))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        assert self.counted is not None
        return self.sage.observe(self.counted, verdict)  # SAGE's window moves D_max on this lane's acceptance


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

    return drafter.grow(root, choose, depth, top, lambda node, level, cumulative: True)
