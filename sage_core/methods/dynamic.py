"""The dynamic draft tree's proposer (EAGLE-2, Li et al. 2024): grown where the cumulative draft probability is
highest, then reranked to its node budget (`rerank_tree`, which best-first's ablation uses too). Its registry entry
is in `builtin.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..drafting import DraftedTree
from ..method_settings import DynamicConfig
from ..policy import CUT_LISTED, Candidate, Expansion
from ..proposers import Adaptation, Drafter, Proposal, Proposer, Rerank, RoundShape
from ..trees import ROOT, Tree
from ..verify import Verdict


class DynamicProposer(Proposer):
    """EAGLE-2's dynamic draft tree on the same draft model (Li et al. 2024, §4; method_settings.DynamicConfig).

    Expansion: the root's top-k are level 1; at each of `depth` levels the `candidates` nodes of the
    newest level with the highest cumulative probability (the product of the draft's
    probabilities along the path) are expanded, each offering its `candidates` most likely children.
    Rerank: after the last level every drafted node is ranked by cumulative probability and the
    best `total_tokens` are verified. A child's cumulative probability never exceeds its
    parent's, and ties are broken by depth, so a node's ancestors always rank before it: the kept
    nodes form a tree. An end-of-sequence token is never expanded (the next best is).
    """

    def __init__(self, config: DynamicConfig) -> None:
        self.config = config
        self.candidates = config.candidates
        # Verified: total_tokens; fed to the draft: `candidates` frontier nodes on each of `depth` levels.
        self.max_nodes = max(config.total_tokens, config.depth * config.candidates)
        self.max_depth = config.depth + 1

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        top, stop = self.config.candidates, drafter.stop
        root = drafter.root(pending, top)
        frontier_nodes: set[int] = set()

        def offer_all(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
            offered = [
                Candidate(node.node, token, prob, node.cumulative * prob)
                for node in frontier
                for token, prob in zip(node.top_tokens, node.top_probs, strict=True)
            ]
            expandable = (i for i, c in enumerate(offered) if c.token not in stop)
            best = sorted(expandable, key=lambda i: -offered[i].cumulative)
            frontier_nodes.update(count + i for i in best[:top])
            return offered

        def in_frontier(node: int, level: int, cumulative: float) -> bool:
            return node in frontier_nodes

        drafted = drafter.grow(root, offer_all, self.config.depth + 1, top, in_frontier)
        kept, rerank = rerank_tree(drafted, self.config.total_tokens)
        return Proposal(kept, RoundShape(root_top=root, rerank=rerank))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


def rerank_tree(drafted: DraftedTree, budget: int) -> tuple[DraftedTree, Rerank]:
    """The `budget` drafted nodes of highest cumulative probability (ties: shallower first), as a tree."""
    tree = drafted.tree
    cumulative, depths = tree.cumulative_probs(), tree.depths
    order = sorted(range(len(tree)), key=lambda i: (-cumulative[i], depths[i], i))
    kept: set[int] = set()
    for node in order:
        if len(kept) == budget:
            break
        if tree.parents[node] == ROOT or tree.parents[node] in kept:
            kept.add(node)
    keep = sorted(kept)  # drafted level by level: parents come first
    index = {old: new for new, old in enumerate(keep)}
    parents = tuple(ROOT if tree.parents[o] == ROOT else index[tree.parents[o]] for o in keep)
    reranked = Tree(tuple(tree.tokens[o] for o in keep), parents, tuple(tree.draft_probs[o] for o in keep))
    dists = {index.get(node, node): d for node, d in drafted.distributions.items() if node == ROOT or node in index}
    dropped = [0] * tree.depth
    for node in range(len(tree)):
        dropped[depths[node] - 1] += node not in kept
    listed = [
        Candidate(
            ROOT if tree.parents[n] == ROOT else index[tree.parents[n]],
            tree.tokens[n],
            tree.draft_probs[n],
            cumulative[n],
        )
        for n in order
        if n not in kept and (tree.parents[n] == ROOT or tree.parents[n] in kept)
    ][:CUT_LISTED]
    cutoff = min((cumulative[o] for o in keep), default=0.0)
    return DraftedTree(reranked, dists), Rerank(cutoff, tuple(dropped), tuple(listed))
