"""`sage-cost`: SAGE's entropy-set depth, with each round's nodes and budget chosen for speed on this hardware.

The paper's SAGE (methods/sage.py, SageProposer) keeps a node when its cumulative draft
probability clears theta_l = 0.1 * l / D(alpha), up to 64 nodes, and moves D_max by
a window of recent acceptance lengths: entropy and that window size the tree.
`sage-cost` keeps SAGE's entropy rule for how deep a round may reach (paper §3.2:
alpha from this round's root distribution, depth at most D(alpha) = D_min + alpha *
(D_max - D_min)), with D_max at its own limit `DEPTH_LIMIT` (16, `BUDGET_TREE_DEPTH`):
the window, a rule of thumb for how deep pays, is replaced by the budget model (budget.py), as are the
threshold and SAGE's widths. SAGE's window moves D_max up to `depth_max_limit` (10);
sage-cost's scale reached only that far until 2026-12-04, and nearly every round then
ended at D(alpha) with its deepest level still paying (93 % of its draft forwards with
the hesitant draft, 99 % with the sure one led to kept nodes): with the scale reaching
16 the sure draft's rounds run deeper (docs/benchmarks.md). What entropy adds is measured by
the ablation lane of `scripts/benchmark.py --sage-cost-fixed-depth N` (`fixed_depth`: the
depth cap held at N every round): on the built-in pair, nothing measurable.
Every expanded node offers the draft's candidates after it (its top-k, most likely
first, down to the least path probability that could still join the best budget:
`_Growth.floor`). At every level the candidates drafted so far
are weighed, every prefix by calibrated path probability, in expected tokens per
second by the measured cost curve (costs.py); the nodes of the newest level that the
best prefix keeps are expanded (one draft forward), and the tree stops growing when
the best prefix keeps none of them (greedy stopping, as CaDDTree). The round verifies
the best prefix of all candidates.
SAGE's widths W(alpha), W_l were this method's until 2026-12-04: measured on the
built-in pair (docs/benchmarks.md), they cut the candidates the budget would have
kept (tau 4.56 against 6.60 with the hesitant draft when every candidate is offered,
7.83 against 8.50 with the sure one), so the cost rule now chooses the breadth and
entropy the depth.

Calibration: from the run's own verdicts, cut nodes included (a fresh run starts from the draft's own
probabilities). The cost curve: measured once per pair, backend and device, on the
caches of the first run that needs it (after its prefill; run_costs.costs_for_run).
The round's overhead (its work outside the forwards: acceptance, commits, the
draft's top-k; about a one-token step's half on a CPU) is in every budget's cost
too, so it is spread over more tokens when a tree is bigger: learned from the
run's own rounds (the median of the latest `OVERHEAD_ROUNDS` rounds' measured time
beyond the modelled one, at least 0 and at most a one-token step), or the curve's
`round_overhead_ms` when it gives one.
The tree depends only on the draft's outputs, past verdicts and the curve, never on
this round's target logits: greedy output stays the target's, sampling stays exact.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise

from ..cost_curve import COST_SIZES, CostCurve
from ..drafting import DraftedTree
from ..method_settings import BUDGET_TREE_DEPTH, SageConfig
from ..policy import Candidate, Expansion, confidence, planned_depth
from ..proposers import Adaptation, Drafter, Proposal, Proposer, RoundShape, RunStart
from ..trees import ROOT, Tree
from ..verify import Verdict
from .budget import BudgetChoice, RankCalibration, RoundCosts, budget_record, drafted_outcomes, weigh_prefixes
from .run_costs import costs_for_run

#: How many of the latest rounds the learned round overhead is the median of.
OVERHEAD_ROUNDS = 16
#: sage-cost's D_max: D(alpha) = D_min + alpha * (DEPTH_LIMIT - D_min) (module docstring).
DEPTH_LIMIT = BUDGET_TREE_DEPTH


class SageCostProposer(Proposer):
    """SAGE's depth D(alpha), the nodes and budget of highest expected tokens per second (module docstring)."""

    def __init__(self, config: SageConfig, curve: CostCurve | None = None, fixed_depth: int | None = None) -> None:
        if fixed_depth is not None and not 1 <= fixed_depth <= DEPTH_LIMIT:
            raise ValueError(f"sage-cost's fixed depth must be in [1, {DEPTH_LIMIT}], not {fixed_depth!r}")
        self.config = config
        # The entropy ablation (scripts/benchmark.py --sage-cost-fixed-depth): every round's depth cap is this,
        # not D(alpha); None: D(alpha), the method itself.
        self.fixed_depth = fixed_depth
        self.candidates = config.candidates
        self.max_depth = DEPTH_LIMIT  # (D_min is at most 10)
        # A round verifies at most N_max nodes and drafts on at most N_max (`_Growth.expand`); the cost curve's
        # measurement verifies up to 64 (+ the root). Every cache keeps room for this many rows of scratch, and
        # room costs time (a run with 900 rows more took 6 ms longer to prefill and 7 ms longer to decode on the
        # built-in pair), so it is what a round can use, not N_max for every level.
        self.max_nodes = max(config.node_budget, COST_SIZES[-1] + 1)
        self.calibration = RankCalibration()
        self.curve: CostCurve | None = None
        self.costs: RoundCosts | None = None
        self.residuals: deque[float] = deque(maxlen=OVERHEAD_ROUNDS)  # measured - modelled round ms
        self.started: float | None = None  # when this round's proposal began (perf_counter)
        self.block = 0  # the draft's one-pass block (0: sequential), known at the run's start
        self.offered: tuple[Tree, tuple[int, ...]] | None = None  # this round's drafted tree, its kept nodes
        if curve is not None:
            self.use_costs(curve)

    def start_run(self, run: RunStart) -> None:
        """The pair's cost curve, measured on this run's prefilled caches the first time (costs_for_run)."""
        self.block = run.drafter.block_size  # a one-pass draft's levels are free (RoundCosts.of)
        self.use_costs(costs_for_run(run.pair, run.backend, run.target, run.target_state, run.drafter, run.root))

    def use_costs(self, curve: CostCurve) -> None:
        """The cost curve the next rounds are weighed by (it may change between rounds)."""
        self.curve = curve
        most = self.config.node_budget + self.config.candidates * self.config.width_max
        self.costs = RoundCosts.of(curve, most, self.round_overhead(), self.block)

    def round_overhead(self) -> float:
        """The curve's round overhead, or the one learned from this run's rounds (0 before the first)."""
        assert self.curve is not None
        if self.curve.round_overhead_ms is not None:
            return self.curve.round_overhead_ms
        learned = statistics.median(self.residuals) if self.residuals else 0.0
        return min(max(learned, 0.0), self.curve.one_token_ms)

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None and self.costs is not None, "sage-cost drafts with a draft and a cost curve"
        self.started = time.perf_counter()
        sage = self.config
        root = drafter.root(pending, sage.candidates)
        entropy, alpha = confidence(root[1])
        depth = self.fixed_depth or planned_depth(alpha, sage.depth_min, self.max_depth)
        growth = _Growth(self.costs, self.calibration, sage.node_budget, len(pending))
        drafted = drafter.grow(root, growth.choose, depth, sage.candidates, growth.expand)
        choice = growth.choice
        assert choice is not None  # level 1 always offers the root's best candidate
        self.offered = (drafted.tree, tuple(sorted(choice.kept)))
        shape = RoundShape(
            entropy, alpha, self.max_depth, depth, None, root, own=choice, own_record=budget_record(choice)
        )
        return Proposal(keep_nodes(drafted, choice.kept), shape)

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        """The verdict calibrates the draft (every drafted node under the root or the accepted path, verified
        or cut: `budget.drafted_outcomes`); the round's time beyond its modelled cost updates the round
        overhead."""
        assert self.offered is not None
        drafted, kept = self.offered  # the verified tree's node i is the drafted tree's kept[i]
        path = [kept[n] for n in verdict.accepted_nodes]
        probs, ranks, outcomes = drafted_outcomes(drafted, path, (*verdict.accepted_tokens, verdict.bonus_token))
        self.calibration = self.calibration.after(probs, ranks, outcomes)
        choice = proposal.shape.own
        if self.started is not None and self.costs is not None and choice is not None:
            measured = 1000 * (time.perf_counter() - self.started)
            self.residuals.append(measured - (choice.chosen.round_ms - self.costs.overhead))
            self.costs = replace(self.costs, overhead=self.round_overhead())
        return Adaptation()


class _Growth:
    """One round's growth: each level offers every expanded node's candidates above the floor, the budget
    model picks what to expand."""

    def __init__(self, costs: RoundCosts, calibration: RankCalibration, node_cap: int, fed: int) -> None:
        self.costs, self.calibration, self.node_cap, self.fed = costs, calibration, node_cap, fed
        self.least_node_ms = max(min((b - a for a, b in pairwise(costs.verify)), default=0.0), 0.0)
        self.paths: list[float] = []  # each candidate's calibrated path probability
        self.depths: list[int] = []
        self.choice: BudgetChoice | None = None
        self.kept: frozenset[int] = frozenset()
        self.drafted_on = 0  # nodes given a draft forward this round (at most the node cap)

    def choose(self, level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
        """Every expanded node offers its children, most likely first, while their calibrated path probability
        clears the floor (the first always); all candidates so far are weighed."""
        rate = self.calibration.rate
        floor = self.floor()
        offered = []
        for node in frontier:
            above = 1.0 if node.node == ROOT else self.paths[node.node]
            for r in range(len(node.top_tokens)):
                prob = node.top_probs[r]
                path = above * rate(prob, r)
                if r and path < floor:  # the rest are less likely still (the draft offers them in order)
                    break
                offered.append(Candidate(node.node, node.top_tokens[r], prob, node.cumulative * prob))
                self.paths.append(path)
        if not offered:
            return []
        self.depths += [level] * len(offered)
        self.choice = weigh_prefixes(self.paths, self.depths, self.costs, self.node_cap, self.fed)
        self.kept = self.choice.kept
        return offered

    def floor(self) -> float:
        """The path probability below which a candidate cannot join the best budget: adding nodes of path
        probability p and cost at least c each (the verification's least cost per node) raises the best
        rate R (tokens per ms) only if p > c * R. 0 before the first level is weighed."""
        if self.choice is None:
            return 0.0
        return self.least_node_ms * self.choice.chosen.tokens_per_s / 1000

    def expand(self, node: int, level: int, cumulative: float) -> bool:
        """A node of the newest level is drafted on when the best budget so far keeps it, while the round has
        drafted on fewer than the node cap (the draft's scratch; a budget keeps at most that many nodes, so the
        cap binds only when every level's kept nodes were later given up)."""
        if node not in self.kept or self.drafted_on >= self.node_cap:
            return False
        self.drafted_on += 1
        return True


def keep_nodes(drafted: DraftedTree, keep: frozenset[int]) -> DraftedTree:
    """The drafted tree cut to `keep` (closed under parents), renumbered in drafting order."""
    tree = drafted.tree
    kept = sorted(keep)
    index = {old: new for new, old in enumerate(kept)}
    parents = tuple(ROOT if tree.parents[o] == ROOT else index[tree.parents[o]] for o in kept)
    cut = Tree(tuple(tree.tokens[o] for o in kept), parents, tuple(tree.draft_probs[o] for o in kept))
    dists = {index.get(n, n): d for n, d in drafted.distributions.items() if n == ROOT or n in index}
    return DraftedTree(cut, dists)
