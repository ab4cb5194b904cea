"""`smart`: SMART (arXiv 2604.09731, "When is it Actually Worth Expanding a Speculative Tree?", 2026), a
training-free tree controller: a draft-tree node is expanded only when its marginal benefit over its marginal
cost beats the tree's current speedup, with the drafting and verification costs measured on this device.

The project's reading of the published rule:

- E, the expected accepted tokens of the current tree, is the sum of its nodes' path probabilities (the
  product of the draft's probabilities along the path; with `SmartConfig.probabilities = "calibrated"` each
  factor is calibrated from the run's own verdicts, `budget.RankCalibration`, as sage-cost's).
- C, the round's cost in one-token target steps, is read from the pair's measured cost curve
  (`cost_curve.CostCurve`, measured once per pair by `run_costs.costs_for_run`): the draft's feed of
  the committed tokens, one draft level over each tree level that has a level below it (over that level's
  nodes, as `CostCurve.round_ms` models a round), the verification of the tree's n nodes, and the curve's
  round overhead when it gives one.
- The tree's speedup is S = (E + 1) / C (the bonus token is the 1). A candidate node with path probability
  p and marginal cost ΔC (the verification of n + 1 nodes minus that of n, plus one draft level's cost when
  it opens a new depth, or the widening of its level's draft forward when a level below exists) is
  expanded iff p / ΔC > S, which is exactly when adding it raises (E + 1) / C (`smart_expands`; a node that
  costs nothing is expanded when p > 0).
- Candidates (the children the draft offered under the root and under the nodes already in the tree) are
  taken best-first, highest p first (ties: shallower, then drafted first); after each expansion the scan
  restarts from the best, and the tree grows until no candidate passes or the node cap (or the depth cap)
  is reached (`SmartTree.grow`, `smart_tree`).
- The paper leaves the caps open. The depth cap is `BUDGET_TREE_DEPTH` (16), as deep as sage-cost and
  best-first may grow (10, SAGE's `depth_max_limit`, until 2026-12-04: at 16 SMART ran 1.07× faster end to
  end with the sure draft, 1.01× with the hesitant one, docs/benchmarks.md).

The draft runs level by level (`drafting.grow_tree`): after each draft forward the new level's children join
the candidates and the rule grows the tree; a node of the newest level is drafted on only when it is in the
tree and a child as likely as itself would pass the rule now (no child can be likelier: every factor is at
most 1), so a round spends no draft forward that the rule could not use. The tree verified is the kept
nodes, closed under parents; it depends only on the draft's outputs, past verdicts and the cost curve, never
on this round's target logits, so greedy output stays the target's and sampling stays exact.

Records: the round's own record (`SmartRecord`, `RoundRecord.own`) holds its growth in sage-cost's budget
columns (after each expansion: the node count, the depth reached, E and the modelled tokens per second; the
node count chosen), which replay and the explainer read (`describe_round`, `SmartRecord.words`); each kept
node's benefit/cost and the speedup it beat (`node_ratios`, `node_speedups`), and for the likeliest refused
candidates, shared cut candidates of rule "cost" (`refusal_fields`), theirs (`cut_ratios`, `cut_speedups`).
Every candidate's last verdict is in `RoundShape.own` (a `SmartRound`) and in `SmartProposer.last_round`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..cost_curve import COST_SIZES, CostCurve
from ..errors import ConfigError
from ..method_settings import BUDGET_TREE_DEPTH, settle_numbers
from ..policy import Candidate, Expansion
from ..proposers import Adaptation, Drafter, Proposal, Proposer, RoundShape, RunStart
from ..records import MAX_RATIO, RoundRecord, is_number
from ..trees import ROOT, Tree
from ..verify import Verdict
from .budget import RankCalibration, SageCostRecord, drafted_outcomes
from .registry import MethodSpec, RunConfig, Setting
from .run_costs import costs_for_run
from .sage_cost import keep_nodes

#: The ranges of SMART's whole-number settings.
SMART_RANGES: dict[str, tuple[int, int]] = {"node_cap": (1, 256), "depth_cap": (1, 16), "candidates": (1, 50)}
Probabilities = Literal["draft", "calibrated"]


@dataclass(frozen=True)
class SmartConfig:
    """SMART's caps: at most `node_cap` nodes and `depth_cap` levels a tree; each node drafted on offers its
    `candidates` most likely children; path probabilities from the draft's own probabilities ("draft") or
    calibrated from the run's verdicts ("calibrated")."""

    node_cap: int = 64
    depth_cap: int = BUDGET_TREE_DEPTH
    candidates: int = 10
    probabilities: Probabilities = "draft"

    def __post_init__(self) -> None:
        problems = settle_numbers(self, SMART_RANGES, whole=True)
        if self.probabilities not in ("draft", "calibrated"):
            problems.append(f"probabilities must be 'draft' or 'calibrated', not {self.probabilities!r}")
        if problems:
            raise ConfigError("invalid SMART settings: " + "; ".join(problems))


# -- the rule -------------------------------------------------------------------------------------------


def tree_speedup(expected: float, cost: float) -> float:
    """S = (E + 1) / C: tokens a round is expected to give per one-token step it costs."""
    return (expected + 1.0) / cost


def smart_expands(p: float, added_cost: float, expected: float, cost: float) -> bool:
    """SMART's rule: expand a node of path probability `p` and marginal cost `added_cost` iff p / ΔC beats
    the tree's speedup (E + 1) / C, i.e. iff adding it raises (E + 1) / C (a free node: iff p > 0)."""
    if added_cost <= 0:
        return p > 0
    return p / added_cost > tree_speedup(expected, cost)


def round_cost(level_counts: Sequence[int], curve: CostCurve, fed: int = 1) -> float:
    """C in one-token steps for a tree with `level_counts[l]` nodes on level l + 1: the draft's feed of `fed`
    committed tokens, a draft level over each level with a level below it, the verification of every node
    and the curve's round overhead (if it gives one)."""
    return CurveReadings(curve).round_cost(level_counts, fed)


class CurveReadings:
    """A curve's readings at whole node counts, each interpolated once: a round's scans ask for the same few
    thousands of times (`round_cost`, the same numbers in the same order as reading the curve each time). A
    run's proposer keeps one for its curve and hands it to each round's trees."""

    def __init__(self, curve: CostCurve, block: int = 0) -> None:
        self.curve = curve
        self.block = block  # a one-pass draft's: its feed reads block - 1 masks too, and its levels are free
        self.draft: dict[int, float] = {}
        self.verify: dict[int, float] = {}
        self.overhead = curve.round_overhead_ms or 0.0

    def draft_at(self, nodes: int) -> float:
        value = self.draft.get(nodes)
        if value is None:
            value = self.draft[nodes] = self.curve.draft_at(nodes)
        return value

    def verify_at(self, nodes: int) -> float:
        value = self.verify.get(nodes)
        if value is None:
            value = self.verify[nodes] = self.curve.verify_at(nodes)
        return value

    def round_cost(self, level_counts: Sequence[int], fed: int) -> float:
        if self.block:
            drafting = self.draft_at(fed + self.block - 1)
        else:
            drafting = self.draft_at(fed) + sum(self.draft_at(n) for n in level_counts[:-1])
        return (drafting + self.verify_at(sum(level_counts)) + self.overhead) / self.curve.one_token_ms


def with_node(level_counts: Sequence[int], depth: int) -> tuple[int, ...]:
    """The level counts with one more node at `depth` (at most one level below the deepest)."""
    counts = list(level_counts) + [0] * (depth - len(level_counts))
    counts[depth - 1] += 1
    return tuple(counts)


@dataclass(frozen=True)
class SmartCandidate:
    """A node the draft offered: its parent (an index among the candidates, or ROOT), path probability, depth."""

    parent: int
    p: float
    depth: int


@dataclass(frozen=True)
class SmartDecision:
    """One candidate weighed: its path probability, marginal cost ΔC (one-token steps), the tree's speedup S
    it was weighed against, and whether the rule expanded it."""

    node: int
    p: float
    added_cost: float
    speedup: float
    expanded: bool

    @property
    def ratio(self) -> float:
        """p / ΔC (infinite for a node that costs nothing)."""
        return self.p / self.added_cost if self.added_cost > 0 else math.inf


@dataclass(frozen=True)
class SmartStep:
    """The tree after one expansion: its node count, depth, E, C (one-token steps) and speedup."""

    nodes: int
    depth: int
    expected: float
    cost: float

    @property
    def speedup(self) -> float:
        return tree_speedup(self.expected, self.cost)


@dataclass(frozen=True)
class SmartRound:
    """What the rule did in one round: the nodes it kept (candidate indices, in the order it expanded them),
    the tree after each expansion, and every candidate's last verdict."""

    kept: tuple[int, ...]
    steps: tuple[SmartStep, ...]
    decisions: tuple[SmartDecision, ...]
    base_cost: float  # C of the empty tree (the draft's feed and a one-token step)

    @property
    def refused(self) -> tuple[SmartDecision, ...]:
        return tuple(d for d in self.decisions if not d.expanded)


@dataclass
class SmartTree:
    """The tree SMART grows: candidates join (`offer`), the rule grows it (`grow`), best-first."""

    curve: CostCurve
    node_cap: int
    depth_cap: int
    fed: int = 1
    candidates: list[SmartCandidate] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    level_counts: tuple[int, ...] = ()
    expected: float = 0.0
    steps: list[SmartStep] = field(default_factory=list)
    readings: CurveReadings | None = field(default=None, repr=False, compare=False)  # shared by a run's trees

    def __post_init__(self) -> None:
        given = self.readings
        self._readings = given if given is not None and given.curve is self.curve else CurveReadings(self.curve)
        self.base_cost = self.cost = self._readings.round_cost((), self.fed)
        self.in_tree: set[int] = set()
        # ΔC by depth for the tree as it stands (it depends on nothing else): a scan weighs many candidates
        # at the same few depths, so each is worked out once per expansion
        self._added: dict[int, float] = {}
        # each candidate's last verdict, (p, ΔC, S, expanded): `decisions` makes the records when asked
        self._verdicts: dict[int, tuple[float, float, float, bool]] = {}

    @property
    def decisions(self) -> dict[int, SmartDecision]:
        """Each candidate weighed: its last verdict."""
        return {node: SmartDecision(node, *verdict) for node, verdict in self._verdicts.items()}

    @property
    def speedup(self) -> float:
        return tree_speedup(self.expected, self.cost)

    def offer(self, candidates: Sequence[SmartCandidate]) -> None:
        self.candidates.extend(candidates)

    def added_cost(self, depth: int) -> float:
        """ΔC of one more node at `depth`."""
        if depth not in self._added:
            wider = self._readings.round_cost(with_node(self.level_counts, depth), self.fed)
            self._added[depth] = wider - self.cost
        return self._added[depth]

    def judge(self, node: int) -> tuple[float, float, float, bool]:
        """The rule's verdict on a candidate, (p, ΔC, S, expanded), recorded as its last (`decisions`)."""
        candidate = self.candidates[node]
        added = self.added_cost(candidate.depth)
        verdict = (candidate.p, added, self.speedup, smart_expands(candidate.p, added, self.expected, self.cost))
        self._verdicts[node] = verdict
        return verdict

    def worth_drafting(self, node: int) -> bool:
        """Whether a child as likely as `node` (none is likelier) would be expanded now."""
        candidate = self.candidates[node]
        if node not in self.in_tree or len(self.kept) >= self.node_cap or candidate.depth >= self.depth_cap:
            return False
        return smart_expands(candidate.p, self.added_cost(candidate.depth + 1), self.expected, self.cost)

    def grow(self) -> None:
        """Expand the best candidate that passes the rule, then scan again from the best, until none passes
        or the node cap is reached. A candidate is weighed once its parent is in the tree (the root's
        children from the start, a node's children once it is expanded)."""
        children: dict[int, list[int]] = {}
        for i, c in enumerate(self.candidates):
            if i not in self.in_tree and c.p > 0 and c.depth <= self.depth_cap:
                children.setdefault(c.parent, []).append(i)

        ranks = [(-c.p, c.depth, i) for i, c in enumerate(self.candidates)]  # best first: likeliest, shallowest
        rank = ranks.__getitem__

        order = sorted((i for parent in (ROOT, *self.in_tree) for i in children.get(parent, ())), key=rank)
        while len(self.kept) < self.node_cap:
            for position, node in enumerate(order):
                if self.judge(node)[3]:
                    self._add(node)
                    del order[position]
                    for child in children.get(node, ()):
                        bisect.insort(order, child, key=rank)
                    break
            else:
                return

    def _add(self, node: int) -> None:
        candidate = self.candidates[node]
        self.level_counts = with_node(self.level_counts, candidate.depth)
        self.cost = self._readings.round_cost(self.level_counts, self.fed)
        self._added.clear()
        self.expected += candidate.p
        self.kept.append(node)
        self.in_tree.add(node)
        self.steps.append(SmartStep(len(self.kept), len(self.level_counts), self.expected, self.cost))

    def result(self) -> SmartRound:
        weighed = self.decisions
        decisions = tuple(weighed[n] for n in sorted(weighed))
        return SmartRound(tuple(self.kept), tuple(self.steps), decisions, self.base_cost)


def smart_tree(
    candidates: Sequence[SmartCandidate], curve: CostCurve, node_cap: int, depth_cap: int = 16, fed: int = 1
) -> SmartRound:
    """SMART's tree from these candidates (parents before children), best-first (`SmartTree.grow`)."""
    tree = SmartTree(curve, node_cap, depth_cap, fed)
    tree.offer(candidates)
    tree.grow()
    return tree.result()


# -- the proposer ---------------------------------------------------------------------------------------


class SmartProposer(Proposer):
    """SMART's tree each round (module docstring), from the pair's measured cost curve."""

    def __init__(self, config: SmartConfig, curve: CostCurve | None = None) -> None:
        self.config = config
        self.candidates = config.candidates
        self.max_depth = config.depth_cap
        # Verified: at most node_cap; drafted on: at most node_cap a round (`_Growth.expand`). The cost curve's
        # measurement on this run's caches verifies up to 64 nodes and the root. Every cache keeps room for this
        # many rows of scratch, and room costs time (sage_cost.SageCostProposer), so it is what a round can use.
        self.max_nodes = max(config.node_cap, COST_SIZES[-1] + 1)
        self.curve = curve
        self.calibration = RankCalibration() if config.probabilities == "calibrated" else None
        self.offered: tuple[Tree, tuple[int, ...]] | None = None  # this round's drafted tree, its kept nodes
        self.last_round: SmartRound | None = None
        self.readings: CurveReadings | None = None  # the curve's readings, kept for this run's rounds

    def start_run(self, run: RunStart) -> None:
        """The pair's cost curve, measured on this run's prefilled caches the first time (costs_for_run)."""
        if self.curve is None:
            self.curve = costs_for_run(run.pair, run.backend, run.target, run.target_state, run.drafter, run.root)

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None and self.curve is not None, "SMART drafts with a draft and a cost curve"
        config = self.config
        root = drafter.root(pending, config.candidates)
        if self.readings is None or self.readings.curve is not self.curve:
            self.readings = CurveReadings(self.curve, drafter.block_size)
        fed = max(len(pending), 1)
        tree = SmartTree(self.curve, config.node_cap, config.depth_cap, fed, readings=self.readings)
        growth = _Growth(tree, self.calibration)
        drafted = drafter.grow(root, growth.choose, config.depth_cap, config.candidates, growth.expand)
        smart = growth.tree.result()
        self.last_round = smart
        kept = frozenset(smart.kept)
        self.offered = (drafted.tree, tuple(sorted(kept)))
        own_record, fields = smart_record(smart, self.curve, drafted.tree), refusal_fields(smart, drafted.tree)
        shape = RoundShape(root_top=root, own=smart, own_fields=fields, own_record=own_record)
        return Proposal(keep_nodes(drafted, kept), shape)

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        """With calibrated probabilities, the verdict calibrates the draft (every node drafted under the root
        or the accepted path, verified or not: `budget.drafted_outcomes`)."""
        if self.calibration is not None and self.offered is not None:
            drafted, kept = self.offered
            path = [kept[n] for n in verdict.accepted_nodes]
            choices = (*verdict.accepted_tokens, verdict.bonus_token)
            probs, ranks, outcomes = drafted_outcomes(drafted, path, choices)
            self.calibration = self.calibration.after(probs, ranks, outcomes)
        return Adaptation()


class _Growth:
    """One round's growth: each draft level's children join the candidates, and the tree is grown again from
    all of them (best-first over every candidate drafted so far: a level's unlikely nodes, taken while nothing
    better was known, give way to likelier children when the cap binds)."""

    def __init__(self, tree: SmartTree, calibration: RankCalibration | None) -> None:
        self.tree, self.calibration = tree, calibration
        self.drafted_on = 0  # nodes given a draft forward this round (at most the node cap: the draft's scratch)

    def choose(self, level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
        known, rate = self.tree.candidates, self.calibration
        offered, smart = [], []
        for node in frontier:
            above = 1.0 if node.node == ROOT else known[node.node].p
            for rank, (token, prob) in enumerate(zip(node.top_tokens, node.top_probs, strict=True)):
                factor = prob if rate is None else rate.rate(prob, rank)
                offered.append(Candidate(node.node, token, prob, node.cumulative * prob))
                smart.append(SmartCandidate(node.node, above * factor, level))
        old = self.tree
        self.tree = SmartTree(old.curve, old.node_cap, old.depth_cap, old.fed, readings=old._readings)
        self.tree.offer([*known, *smart])
        self.tree.grow()
        return offered

    def expand(self, node: int, level: int, cumulative: float) -> bool:
        if self.drafted_on >= self.tree.node_cap or not self.tree.worth_drafting(node):
            return False
        self.drafted_on += 1
        return True


#: The refused candidates a record keeps (the likeliest first).
REFUSED_SHOWN = 6
WEIGHED_LISTED = 4  # the expanded nodes and refused candidates the explainer names, each; the rest counted
#: SMART's cut rule, and its words (the tree panel's): a candidate refused for its benefit over its cost.
COST_RULE = "cost"


@dataclass(frozen=True)
class SmartRecord(SageCostRecord):
    """SMART's own record of a round (`RoundRecord.own`): its growth in sage-cost's budget columns (after each
    expansion: the node count, the depth reached, E and the modelled tokens per second; the node count
    verified, None for an empty tree), then its weighing: per tree node, its benefit over its cost when the
    rule expanded it (path probability / marginal cost in one-token steps) and the tree's speedup (E + 1) / C
    it beat; per cut candidate of rule "cost" (the round's shared cut columns), the same for the refusal."""

    node_ratios: tuple[float, ...] = ()
    node_speedups: tuple[float, ...] = ()
    cut_ratios: tuple[float, ...] = ()
    cut_speedups: tuple[float, ...] = ()

    cut_rules: ClassVar[Mapping[str, str]] = {
        COST_RULE: "refused by SMART: its path probability over its marginal cost did not beat the tree's speedup"
    }

    def problem(self, record: RoundRecord) -> str | None:
        """The budget columns' problems (sage-cost's), then the weighing's: one ratio and one speedup per tree
        node and per cut candidate (or none), finite and non-negative."""
        pairs = (
            (self.node_ratios, self.node_speedups, len(record.tree_tokens)),
            (self.cut_ratios, self.cut_speedups, len(record.cut_tokens)),
        )
        for ratios, speedups, count in pairs:
            if not isinstance(ratios, tuple) or not isinstance(speedups, tuple) or len(ratios) != len(speedups):
                return "each benefit/cost ratio needs the speedup it was weighed against"
            if len(ratios) not in (0, count):
                return "SMART's weighing needs one ratio per tree node and per cut candidate"
            if not all(is_number(v, 0.0, MAX_RATIO) for v in (*ratios, *speedups)):
                return "benefit/cost ratios and speedups must be finite, non-negative numbers"
        return super().problem(record)

    def words(self, record: RoundRecord) -> str:
        """Where the growth stopped, then the first expanded nodes and the likeliest refused candidates, each
        with p/ΔC against S ("" for an empty tree)."""
        if self.budget_chosen is None or not self.budget_nodes:
            return ""
        expected, rate = self.budget_expected[-1], self.budget_rates[-1]
        return (
            f"It stopped at {self.budget_chosen} nodes (depth {self.budget_depths[-1]}), {expected:.2f} accepted "
            f"tokens expected, {rate:.0f} tokens/s modelled." + weighing_words(self, record)
        )


def smart_record(smart: SmartRound, curve: CostCurve, drafted: Tree) -> SmartRecord:
    """The round's own record: the tree after each expansion (node count, depth, E, modelled tokens per second)
    and the node count verified (None for an empty tree); each kept node's benefit/cost and the speedup it beat
    (in the order of the verified tree: the kept candidates, renumbered in drafted order), and those of the
    likeliest refused candidates (`refusal_fields`)."""
    per_second = 1000.0 / curve.one_token_ms  # one-token steps a second
    verdicts = {d.node: d for d in smart.decisions}
    kept, refused = sorted(smart.kept), _refused(smart, drafted)
    return SmartRecord(
        budget_nodes=tuple(s.nodes for s in smart.steps),
        budget_depths=tuple(s.depth for s in smart.steps),
        budget_expected=tuple(round(s.expected, 4) for s in smart.steps),
        budget_rates=tuple(round(s.speedup * per_second, 2) for s in smart.steps),
        budget_chosen=len(smart.kept) if smart.kept else None,
        node_ratios=tuple(_shown_ratio(verdicts[n].ratio) for n in kept),
        node_speedups=tuple(round(verdicts[n].speedup, 4) for n in kept),
        cut_ratios=tuple(_shown_ratio(d.ratio) for d in refused),
        cut_speedups=tuple(round(d.speedup, 4) for d in refused),
    )


def _refused(smart: SmartRound, drafted: Tree) -> list[SmartDecision]:
    """The likeliest refused candidates a record keeps (`REFUSED_SHOWN`), likeliest first."""
    refused = (d for d in smart.refused if d.node < len(drafted.tokens))
    return sorted(refused, key=lambda d: (-d.p, d.node))[:REFUSED_SHOWN]


def refusal_fields(smart: SmartRound, drafted: Tree) -> dict[str, Any]:
    """The round record's shared cut columns for the likeliest refused candidates: parent in the verified tree,
    token, draft probability, rule "cost" (their ratios and speedups are in its own record)."""
    position = {node: index for index, node in enumerate(sorted(smart.kept))}
    refused = _refused(smart, drafted)
    parents = [drafted.parents[d.node] for d in refused]
    return {
        "cut_parents": tuple(position.get(p, -1) if p >= 0 else -1 for p in parents),
        "cut_tokens": tuple(drafted.tokens[d.node] for d in refused),
        "cut_probs": tuple(drafted.draft_probs[d.node] for d in refused),
        "cut_rules": (COST_RULE,) * len(refused),
    }


def _shown_ratio(ratio: float) -> float:
    return round(min(ratio, MAX_RATIO), 4)


def describe_round(record: RoundRecord, settings: Any) -> str:
    """The explainer's sentence for a SMART round: its rule (its own record, `SmartRecord.words`, then says
    where it stopped, the nodes it expanded and the likeliest it refused)."""
    if not isinstance(record.own, SmartRecord) or record.own.budget_chosen is None or not record.own.budget_nodes:
        return "SMART: no candidate's benefit over its cost beat the speedup of verifying no tree."
    return (
        "SMART: each candidate, likeliest first, was expanded only while its path probability over its measured "
        "marginal cost beat the tree's speedup (E + 1) / C."
    )


def weighing_words(own: SmartRecord, record: RoundRecord, most: int = WEIGHED_LISTED) -> str:
    """The first expanded nodes and the likeliest refused candidates, each with p/ΔC against S."""
    expanded = [
        f"node {n} {r:.2f} > {s:.2f}" for n, (r, s) in enumerate(zip(own.node_ratios, own.node_speedups, strict=True))
    ][:most]
    refused = [
        f"under node {parent} (draft p {p:.3f}) {r:.2f} ≤ {s:.2f}"
        for parent, p, r, s, rule in zip(
            record.cut_parents, record.cut_probs, own.cut_ratios, own.cut_speedups, record.cut_rules, strict=False
        )
        if rule == COST_RULE
    ][:most]
    words = ""
    if expanded:
        more = len(own.node_ratios) - len(expanded)
        words += f" Expanded (p/ΔC > S): {'; '.join(expanded)}{f'; {more} more' if more > 0 else ''}."
    if refused:
        words += f" Refused, likeliest first (p/ΔC ≤ S): {'; '.join(refused)}."
    return words


def _smart_proposer(settings: SmartConfig, config: RunConfig) -> Proposer:
    return SmartProposer(settings)


SMART_CONTROLS: tuple[Setting, ...] = (
    Setting("smart_node_cap", "node_cap", "SMART: node cap", "the most nodes in one SMART tree, in [1, 256].", 1, 256),
    Setting("smart_depth_cap", "depth_cap", "SMART: depth cap", "the deepest SMART tree, in [1, 16].", 1, 16),
    Setting("smart_candidates", "candidates", "SMART: candidates per node",
            "the children each node drafted on offers SMART, in [1, 50].", 1, 50, form=False),
    Setting("smart_probabilities", "probabilities", "SMART: path probabilities",
            "the draft's own probabilities or calibrated from the run's verdicts",
            choices=("draft", "calibrated"), form=False),
)  # fmt: skip

SMART_SPEC = MethodSpec(
    name="smart",
    label="SMART (expand while it beats the tree's speedup)",
    short="SMART",
    subtitle="expands a node only when its benefit over its measured cost beats the tree's speedup",
    colour="#00C0E0",  # a cyan apart from the built-in colours (tests/test_palette.py's check)
    order=1,
    drafts=True,
    proposer=_smart_proposer,
    pruned_label="SMART + pruning",
    settings=SmartConfig,
    controls=SMART_CONTROLS,
    settings_title="SMART, --method smart (arXiv 2604.09731)",
    explainer="tree",
    describe=describe_round,
    record=SmartRecord,
    dash="12px,4px",  # a dash and marker no built-in method has
    marker="hexagon",
    chooses_budget=True,
    chosen_marker="hexagram",
    called="SMART (cost-shaped, 2026)",
)
