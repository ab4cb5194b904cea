"""The budget model of `sage-cost`: how many of a candidate tree's nodes to verify, by expected tokens per second.

SAGE sizes its tree from the draft's entropy alone (paper §3.2); what a node costs
never enters. Here a round's budget (how many nodes, and so how deep the tree
reaches) is the one that maximises

    expected tokens per second = (1 + E[accepted length]) / (modelled round time)

(the bonus token is the 1), as CaDDTree (arXiv 2606.01813) chooses each round's
budget from modelled draft and verify latency:

- **Expected accepted length.** Under greedy verification a node is accepted
  exactly when every node on its path is, so E[accepted] = the sum over the
  verified nodes of P(its path is accepted). Each node's factor is its draft
  probability *calibrated for the pair* (`Calibration`): the share of the
  nodes drafted with about that probability that the target accepted, learned
  from the run's own verdicts, starting from the draft's own probability (a
  prior worth `PRIOR_WEIGHT` nodes per bin). Every node the draft offered under
  the root or an accepted node counts (`drafted_outcomes`), the ones the budget
  cut included: the target's choice after their parent is known, so the bins
  the budget seldom verifies (a hesitant draft's low probabilities) learn too.
- **Round time.** `CostCurve` (costs.py), measured on this device and dtype: the
  draft's feed of the committed tokens, one draft level per tree level above the
  deepest (over that level's nodes), and the target's verification of the nodes.

Candidates are ordered by calibrated path probability (ties: shallower first);
a node's factor is at most 1, so it never ranks above its parent and every
prefix of the order is a tree. `choose_budget` weighs each prefix size up to the
cap and keeps the best. Pure numbers: tests/test_budget.py checks them by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ..cost_curve import CostCurve
from ..method_settings import shown as said
from ..records import OwnRecord, RoundRecord, is_count, is_number
from ..trees import ROOT, Tree

#: The calibration's bins of draft probability: [0, 0.1), [0.1, 0.2), ... [0.9, 1].
CALIBRATION_BINS = 10
#: How many nodes' worth of belief the draft's own probability gets in each bin before verdicts come in.
PRIOR_WEIGHT = 4.0
#: The budgets a round's record lists beside the one chosen (the sweep's node counts).
SHOWN_BUDGETS: tuple[int, ...] = (4, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class Calibration:
    """P(the target accepts a node | its parent was accepted), by the node's draft probability, in bins.

    `tried[b]` nodes of bin b were tried, `accepted[b]` of them accepted, `prob_sum[b]` their draft
    probabilities summed. A bin's rate is (accepted + PRIOR_WEIGHT * mean draft probability) /
    (tried + PRIOR_WEIGHT): the draft's own probability until verdicts say otherwise. The rates are
    then made non-decreasing in the draft probability (pooling adjacent bins that disagree, weighted
    by their evidence), so a less likely sibling never ranks above a likelier one, and read between
    the bins' centres by linear interpolation (from 0 at probability 0; above the last centre the last
    segment's slope, at most 1). Without verdicts, the rate of p is p.
    """

    tried: tuple[int, ...] = (0,) * CALIBRATION_BINS
    accepted: tuple[int, ...] = (0,) * CALIBRATION_BINS
    prob_sum: tuple[float, ...] = (0.0,) * CALIBRATION_BINS

    @staticmethod
    def bin_of(prob: float) -> int:
        return min(CALIBRATION_BINS - 1, max(0, int(prob * CALIBRATION_BINS)))

    @cached_property
    def bin_rates(self) -> tuple[float, ...]:
        """Each bin's rate at its centre, made non-decreasing (pool adjacent violators)."""
        blocks: list[list[float]] = []  # [rate, weight, bins]
        for b in range(CALIBRATION_BINS):
            mean = self.prob_sum[b] / self.tried[b] if self.tried[b] else (b + 0.5) / CALIBRATION_BINS
            weight = self.tried[b] + PRIOR_WEIGHT
            blocks.append([(self.accepted[b] + PRIOR_WEIGHT * mean) / weight, weight, 1])
            while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
                rate, weight, bins = blocks.pop()
                low = blocks[-1]
                low[0] = (low[0] * low[1] + rate * weight) / (low[1] + weight)
                low[1] += weight
                low[2] += bins
        return tuple(rate for rate, _, bins in blocks for _ in range(int(bins)))

    def rate(self, prob: float) -> float:
        """The calibrated probability that a node drafted with `prob` is accepted (its parent accepted)."""
        rates, width = self.bin_rates, 1.0 / CALIBRATION_BINS
        position = prob / width - 0.5  # in bin centres: 0 at the first centre
        if position <= 0:
            return rates[0] * max(prob, 0.0) / (0.5 * width)
        low = min(int(position), CALIBRATION_BINS - 2)
        value = rates[low] + (rates[low + 1] - rates[low]) * (position - low)
        return min(max(value, rates[-1] if position >= CALIBRATION_BINS - 1 else value), 1.0)

    def after(self, probs: Sequence[float], outcomes: Sequence[bool]) -> Calibration:
        """The calibration with these tried nodes' draft probabilities and verdicts added."""
        tried, accepted, prob_sum = list(self.tried), list(self.accepted), list(self.prob_sum)
        for prob, outcome in zip(probs, outcomes, strict=True):
            b = self.bin_of(prob)
            tried[b] += 1
            accepted[b] += outcome
            prob_sum[b] += prob
        return Calibration(tuple(tried), tuple(accepted), tuple(prob_sum))

    def rows(self) -> list[tuple[float, float, int, float]]:
        """Per bin with verdicts: (mean draft probability, accepted share, nodes tried, calibrated rate)."""
        out = []
        for b in range(CALIBRATION_BINS):
            if self.tried[b]:
                mean = self.prob_sum[b] / self.tried[b]
                out.append((mean, self.accepted[b] / self.tried[b], self.tried[b], self.rate(mean)))
        return out


@dataclass(frozen=True)
class RankCalibration:
    """Two calibrations: one for the draft's most likely child of a node (rank 0), one for its other
    children. A hesitant draft spreads its probability thin, yet its first choice is the target's far more
    often than a runner-up drafted with the same probability: one table would blur the two."""

    first: Calibration = field(default_factory=Calibration)
    others: Calibration = field(default_factory=Calibration)

    def rate(self, prob: float, rank: int) -> float:
        return (self.first if rank == 0 else self.others).rate(prob)

    def after(self, probs: Sequence[float], ranks: Sequence[int], outcomes: Sequence[bool]) -> RankCalibration:
        """The calibration with these tried nodes (draft probability, rank among siblings, verdict) added."""
        tables = []
        for table, first in ((self.first, True), (self.others, False)):
            mine = [i for i, rank in enumerate(ranks) if (rank == 0) == first]
            tables.append(table.after([probs[i] for i in mine], [outcomes[i] for i in mine]))
        return RankCalibration(*tables)


def sibling_ranks(tree: Tree) -> tuple[int, ...]:
    """Each node's rank among its parent's children (the draft offers them most likely first)."""
    seen: dict[int, int] = {}
    ranks = []
    for parent in tree.parents:
        ranks.append(seen.get(parent, 0))
        seen[parent] = ranks[-1] + 1
    return tuple(ranks)


def tried_outcomes(tree: Tree, accepted_nodes: Sequence[int]) -> tuple[tuple[float, ...], tuple[bool, ...]]:
    """The nodes a verdict tried (those whose parent was the root or accepted): their draft probabilities
    and whether each was accepted."""
    on_path = set(accepted_nodes)
    tried = [n for n, parent in enumerate(tree.parents) if parent == ROOT or parent in on_path]
    return tuple(tree.draft_probs[n] for n in tried), tuple(n in on_path for n in tried)


def drafted_outcomes(
    tree: Tree, path: Sequence[int], choices: Sequence[int]
) -> tuple[tuple[float, ...], tuple[int, ...], tuple[bool, ...]]:
    """Every node the draft offered under the root or a node of the accepted `path`, verified or cut by the
    budget: its draft probability and whether it is the target's choice after its parent (`choices`: the
    target's token after the root and after each node of the path, i.e. the accepted tokens and the bonus),
    with its rank among its siblings.
    Under greedy verification that is exactly whether the target would have accepted it; a node the budget
    cut gets its verdict too, so bins the budget rarely verifies are calibrated all the same."""
    after = {ROOT: choices[0]} | {node: choices[i + 1] for i, node in enumerate(path)}
    tried = [n for n, parent in enumerate(tree.parents) if parent in after]
    ranks = sibling_ranks(tree)
    return (
        tuple(tree.draft_probs[n] for n in tried),
        tuple(ranks[n] for n in tried),
        tuple(tree.tokens[n] == after[tree.parents[n]] for n in tried),
    )


@dataclass(frozen=True)
class BudgetOption:
    """One budget weighed: the first `nodes` candidates, the depth they reach, and what the model expects."""

    nodes: int
    depth: int
    expected_accepted: float
    round_ms: float

    @property
    def tokens_per_s(self) -> float:
        return 1000 * (1 + self.expected_accepted) / self.round_ms if self.round_ms > 0 else 0.0


@dataclass(frozen=True)
class BudgetChoice:
    """Every prefix size weighed (1 .. the cap) of the candidates' calibrated order, and the best.

    Parallel tuples (a round weighs up to 64 budgets a level; `options` builds the records on demand):
    the first i + 1 nodes of `order` reach `depths[i]`, are expected to have `expected[i]` accepted
    and cost `round_ms[i]`."""

    order: tuple[int, ...]  # candidate nodes, best first (each after its parent)
    depths: tuple[int, ...]
    expected: tuple[float, ...]
    round_ms: tuple[float, ...]
    best: int  # index of the chosen prefix

    def option(self, index: int) -> BudgetOption:
        return BudgetOption(index + 1, self.depths[index], self.expected[index], self.round_ms[index])

    @property
    def options(self) -> tuple[BudgetOption, ...]:
        return tuple(self.option(i) for i in range(len(self.depths)))

    @property
    def chosen(self) -> BudgetOption:
        return self.option(self.best)

    @property
    def kept(self) -> frozenset[int]:
        return frozenset(self.order[: self.best + 1])

    def shown(self, budgets: Sequence[int] = SHOWN_BUDGETS) -> tuple[BudgetOption, ...]:
        """The options at the listed budgets (those the candidates reach) and the chosen one, by size."""
        sizes = {n for n in budgets if n <= len(self.depths)} | {self.best + 1}
        return tuple(self.option(n - 1) for n in sorted(sizes))


def path_probs(tree: Tree, calibration: Calibration) -> tuple[float, ...]:
    """Each node's calibrated probability that its whole path is accepted."""
    out: list[float] = []
    for parent, prob in zip(tree.parents, tree.draft_probs, strict=True):
        out.append(calibration.rate(prob) * (1.0 if parent == ROOT else out[parent]))
    return tuple(out)


@dataclass(frozen=True)
class RoundCosts:
    """A cost curve read at every node count up to `most` (ms): a round's choice looks them up. `overhead`:
    what every round costs besides its forwards (the loop's own work: acceptance, commits, records), the
    same for any budget; it makes a bigger tree's extra nodes relatively cheaper."""

    draft: tuple[float, ...]  # draft[n]: the feed of n committed tokens (a sequential draft: a level of n nodes)
    verify: tuple[float, ...]  # verify[n]: the verification of n nodes
    overhead: float = 0.0
    # level[n]: a draft level over n nodes; None: as `draft` (a sequential draft). A one-pass draft's levels
    # cost nothing (its feed carries the whole block).
    level: tuple[float, ...] | None = None

    @classmethod
    def of(cls, curve: CostCurve, most: int, overhead: float = 0.0, block: int = 0) -> RoundCosts:
        """The curve read at 0 .. `most` nodes; with a one-pass draft's `block`, the feed of n tokens is a
        forward over n + block - 1 (the masks too) and the levels are free."""
        span = range(most + 1)
        verify = tuple(curve.verify_at(n) for n in span)
        if not block:
            return cls(tuple(curve.draft_at(n) for n in span), verify, overhead)
        return cls(tuple(curve.draft_at(n + block - 1) for n in span), verify, overhead, (0.0,) * len(span))


def choose_budget(
    candidates: Tree, costs: CostCurve | RoundCosts, calibration: Calibration, node_cap: int, fed: int = 1
) -> BudgetChoice:
    """The prefix of the candidates (by calibrated path probability) with the most expected tokens per second.

    A prefix of n nodes reaching depth d costs the draft's feed of `fed` committed tokens, a draft level
    over each of its levels 1 .. d - 1, a verification of n nodes (`CostCurve.round_ms`'s model) and the
    round's fixed overhead (`RoundCosts.overhead`).
    """
    if not len(candidates) or node_cap < 1:
        raise ValueError("the budget needs at least one candidate and a cap of at least one node")
    size = min(node_cap, len(candidates))
    table = costs if isinstance(costs, RoundCosts) else RoundCosts.of(costs, max(size, fed))
    return weigh_prefixes(path_probs(candidates, calibration), candidates.depths, table, node_cap, fed)


def weigh_prefixes(
    paths: Sequence[float], node_depths: Sequence[int], costs: RoundCosts, node_cap: int, fed: int
) -> BudgetChoice:
    """`choose_budget` on the candidates' calibrated path probabilities and depths (a round's growth keeps
    them as it drafts). The drafting cost is kept up to date node by node: ancestors come first, so a
    node is at most one level below the deepest so far."""
    size = min(node_cap, len(paths))
    draft, verify = costs.level if costs.level is not None else costs.draft, costs.verify
    order = tuple(sorted(range(len(paths)), key=lambda i: (-paths[i], node_depths[i], i)))
    per_level = [0] * (max(node_depths) + 2)
    expected, deepest, drafting = 0.0, 0, costs.draft[min(fed, len(costs.draft) - 1)] + costs.overhead
    depths, expectations, round_ms = [], [], []
    best, best_rate = 0, -1.0
    for index in range(size):
        node = order[index]
        depth = node_depths[node]
        if depth > deepest:  # the level above becomes one the draft must run
            drafting += draft[per_level[deepest]] if deepest else 0.0
            deepest = depth
        elif depth < deepest:
            drafting += draft[per_level[depth] + 1] - draft[per_level[depth]]
        per_level[depth] += 1
        expected += paths[node]
        cost = max(drafting + verify[index + 1], 1e-9)  # all zero (best-first): the largest prefix wins
        depths.append(deepest)
        expectations.append(expected)
        round_ms.append(cost)
        if (1 + expected) / cost > best_rate:
            best, best_rate = index, (1 + expected) / cost
    return BudgetChoice(order, tuple(depths), tuple(expectations), tuple(round_ms), best)


@dataclass(frozen=True)
class SageCostRecord(OwnRecord):
    """sage-cost's own record of a round (`RoundRecord.own`): the budgets it weighed (node counts, best first by
    calibrated path probability), the depth each reaches, its expected accepted length and expected tokens per
    second by the measured cost curve, and the node count it chose. SMART's record keeps its growth in the
    same columns (smart.SmartRecord)."""

    budget_nodes: tuple[int, ...] = ()
    budget_depths: tuple[int, ...] = ()
    budget_expected: tuple[float, ...] = ()
    budget_rates: tuple[float, ...] = ()
    budget_chosen: int | None = None

    def problem(self, record: RoundRecord) -> str | None:
        columns = (self.budget_nodes, self.budget_depths, self.budget_expected, self.budget_rates)
        if not all(isinstance(c, tuple) for c in columns) or len({len(c) for c in columns}) != 1:
            return "the budgets weighed need one node count, depth, expectation and rate each"
        if not all(is_count(v, 1) for v in (*self.budget_nodes, *self.budget_depths)):
            return "the budgets' node counts and depths must be positive integers"
        if not all(is_number(v) for v in (*self.budget_expected, *self.budget_rates)):
            return "the budgets' expectations and rates must be finite, non-negative numbers"
        if self.budget_chosen is not None and not is_count(self.budget_chosen, 1):
            return f"the budget chosen must be a whole number of nodes or null, not {said(self.budget_chosen)}"
        if self.budget_chosen is not None and self.budget_chosen not in self.budget_nodes:
            return "the budget chosen must be one of the budgets weighed"
        return None

    def words(self, record: RoundRecord) -> str:
        """Each budget weighed, the chosen one marked, and the one verified."""
        if self.budget_chosen is None:
            return ""
        weighed = ", ".join(
            f"{n} nodes (depth {d}): {e:.2f} accepted expected, {r:.0f} tokens/s"
            + (" (chosen)" if n == self.budget_chosen else "")
            for n, d, e, r in zip(
                self.budget_nodes, self.budget_depths, self.budget_expected, self.budget_rates, strict=True
            )
        )
        return f"Budgets weighed: {weighed}. It verified the best: {self.budget_chosen} nodes."


def budget_record(choice: BudgetChoice) -> SageCostRecord:
    """A round's own record (sage-cost's): the budgets shown (`SHOWN_BUDGETS` and the chosen one), the depth
    each reaches, its expected accepted length and expected tokens per second, and the chosen node count."""
    shown = choice.shown()
    return SageCostRecord(
        budget_nodes=tuple(o.nodes for o in shown),
        budget_depths=tuple(o.depth for o in shown),
        budget_expected=tuple(round(o.expected_accepted, 4) for o in shown),
        budget_rates=tuple(round(o.tokens_per_s, 2) for o in shown),
        budget_chosen=choice.chosen.nodes,
    )
