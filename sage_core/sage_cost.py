"""`sage-cost`: SAGE's entropy-shaped tree, with each round's budget chosen for speed on this hardware.

The paper's SAGE (proposers.SageProposer) keeps a node when its cumulative draft
probability clears theta_l = 0.1 * l / D(alpha), up to 64 nodes, and moves D_max by
a window of recent acceptance lengths: entropy and that window size the tree.
`sage-cost` keeps SAGE's shape rules (paper §3.2: alpha from this round's root
distribution, depth D(alpha) = D_min + alpha * (D_max - D_min), root width W(alpha),
W_l = W(alpha) * (0.5 + P_parent) / l children per expanded node), with D_max at its
limit (`depth_max_limit`, 10): the window, a rule of thumb for how deep pays, is
replaced by the budget model (budget.py), as is the threshold. At every level the
candidates drafted so far are weighed, every prefix by calibrated path probability,
in expected tokens per second by the measured cost curve (costs.py); the nodes of
the newest level that the best prefix keeps are expanded (one draft forward),
and the tree stops growing when the best prefix keeps none of them (greedy
stopping, as CaDDTree). The round verifies the best prefix of all candidates.

Calibration: from the run's own verdicts (a fresh run starts from the draft's own
probabilities). The cost curve: measured once per pair, backend and device, on the
caches of the first run that needs it (after its prefill; costs.costs_for_run).
The tree depends only on the draft's outputs, past verdicts and the curve, never on
this round's target logits: greedy output stays the target's, sampling stays exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from .budget import BudgetChoice, Calibration, RoundCosts, tried_outcomes, weigh_prefixes
from .costs import COST_SIZES, CostCurve
from .drafting import DraftedTree
from .method_settings import SageConfig
from .policy import Candidate, Expansion, confidence, level_width, planned_depth, planned_width
from .proposers import Adaptation, Drafter, Proposal, RoundShape
from .trees import ROOT, Tree
from .verify import Verdict


class SageCostProposer:
    """SAGE's shape, the budget of highest expected tokens per second (module docstring)."""

    needs_costs = True

    def __init__(self, config: SageConfig, curve: CostCurve | None = None) -> None:
        self.config = config
        self.candidates = config.candidates
        self.max_depth = config.depth_max_limit
        # A level drafts on at most N_max nodes; the cost curve's measurement verifies up to 64 (+ the root).
        self.max_nodes = max(config.node_budget * config.depth_max_limit, COST_SIZES[-1] + 1)
        self.calibration = Calibration()
        self.curve: CostCurve | None = None
        self.costs: RoundCosts | None = None
        if curve is not None:
            self.use_costs(curve)

    def use_costs(self, curve: CostCurve) -> None:
        """The cost curve the next rounds are weighed by (it may change between rounds)."""
        self.curve = curve
        self.costs = RoundCosts.of(curve, self.config.node_budget + self.config.candidates * self.config.width_max)

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None and self.costs is not None, "sage-cost drafts with a draft and a cost curve"
        sage = self.config
        root = drafter.root(pending, sage.candidates)
        entropy, alpha = confidence(root[1])
        depth = planned_depth(alpha, sage.depth_min, sage.depth_max_limit)
        width = planned_width(alpha, sage.width_min, sage.width_max)
        growth = _Growth(self.costs, self.calibration, width, sage.node_budget, len(pending))
        drafted = drafter.grow(root, growth.choose, depth, sage.candidates, growth.expand)
        choice = growth.choice
        assert choice is not None  # level 1 always offers the root's best candidate
        shape = RoundShape(entropy, alpha, sage.depth_max_limit, depth, width, root, budget=choice)
        return Proposal(keep_nodes(drafted, choice.kept), shape)

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        """The verdict calibrates the draft: the nodes it tried, accepted or not."""
        probs, outcomes = tried_outcomes(proposal.tree, verdict.accepted_nodes)
        self.calibration = self.calibration.after(probs, outcomes)
        return Adaptation()


class _Growth:
    """One round's growth: each level offers SAGE's widths (every candidate when `width` is None), the
    budget model picks what to expand."""

    def __init__(
        self, costs: RoundCosts, calibration: Calibration, width: int | None, node_cap: int, fed: int
    ) -> None:  # fmt: skip
        self.costs, self.calibration, self.width, self.node_cap, self.fed = costs, calibration, width, node_cap, fed
        self.paths: list[float] = []  # each candidate's calibrated path probability
        self.depths: list[int] = []
        self.choice: BudgetChoice | None = None
        self.kept: frozenset[int] = frozenset()

    def choose(self, level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
        """Every expanded node offers its W_l most likely children; all candidates so far are weighed."""
        rate = self.calibration.rate
        offered = []
        for node in frontier:
            above = 1.0 if node.node == ROOT else self.paths[node.node]
            offers = len(node.top_tokens) if self.width is None else level_width(self.width, level, node.prob)
            for r in range(min(offers, len(node.top_tokens))):
                prob = node.top_probs[r]
                offered.append(Candidate(node.node, node.top_tokens[r], prob, node.cumulative * prob))
                self.paths.append(above * rate(prob))
        if not offered:
            return []
        self.depths += [level] * len(offered)
        self.choice = weigh_prefixes(self.paths, self.depths, self.costs, self.node_cap, self.fed)
        self.kept = self.choice.kept
        return offered

    def expand(self, node: int, level: int, cumulative: float) -> bool:
        """A node of the newest level is drafted on when the best budget so far keeps it."""
        return node in self.kept


class FixedBestFirstProposer:
    """A tree of exactly `node_budget` nodes (when the draft offers that many) grown best-first by
    cumulative draft probability, no entropy shaping (the allocation TALON and DDTree use): the budget
    sweep's same-budget tree (sweep.py; the registry's `best-first` lane takes SAGE's node count each round
    instead). Every expanded node offers all its candidates, the `node_budget` candidates of highest
    cumulative probability so far are the tree, and those of them on the newest level are drafted on,
    until none is (or `depth_max_limit` levels)."""

    def __init__(self, config: SageConfig) -> None:
        self.config = config
        self.candidates = config.candidates
        self.max_depth = config.depth_max_limit
        self.max_nodes = config.node_budget * config.depth_max_limit
        self.free = RoundCosts((0.0,) * (config.node_budget + 2), (0.0,) * (config.node_budget + 2))

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        sage = self.config
        root = drafter.root(pending, sage.candidates)
        # With every cost zero the best prefix is the whole cap; the calibration is the draft's own.
        growth = _Growth(self.free, Calibration(), None, sage.node_budget, 0)
        drafted = drafter.grow(root, growth.choose, sage.depth_max_limit, sage.candidates, growth.expand)
        assert growth.choice is not None
        return Proposal(keep_nodes(drafted, growth.choice.kept), RoundShape(root_top=root))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


def keep_nodes(drafted: DraftedTree, keep: frozenset[int]) -> DraftedTree:
    """The drafted tree cut to `keep` (closed under parents), renumbered in drafting order."""
    tree = drafted.tree
    kept = sorted(keep)
    index = {old: new for new, old in enumerate(kept)}
    parents = tuple(ROOT if tree.parents[o] == ROOT else index[tree.parents[o]] for o in kept)
    cut = Tree(tuple(tree.tokens[o] for o in kept), parents, tuple(tree.draft_probs[o] for o in kept))
    dists = {index.get(n, n): d for n, d in drafted.distributions.items() if n == ROOT or n in index}
    return DraftedTree(cut, dists)
