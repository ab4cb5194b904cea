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
  from the run's own verdicts (every node whose parent was accepted was tried:
  accepted or not), starting from the draft's own probability (a prior worth
  `PRIOR_WEIGHT` nodes per bin). Its table is in every round's record.
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
from dataclasses import dataclass

from .costs import CostCurve
from .trees import ROOT, Tree

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
    (tried + PRIOR_WEIGHT): the draft's own probability until verdicts say otherwise.
    """

    tried: tuple[int, ...] = (0,) * CALIBRATION_BINS
    accepted: tuple[int, ...] = (0,) * CALIBRATION_BINS
    prob_sum: tuple[float, ...] = (0.0,) * CALIBRATION_BINS

    @staticmethod
    def bin_of(prob: float) -> int:
        return min(CALIBRATION_BINS - 1, max(0, int(prob * CALIBRATION_BINS)))

    def rate(self, prob: float) -> float:
        """The calibrated probability that a node drafted with `prob` is accepted (its parent accepted)."""
        b = self.bin_of(prob)
        return (self.accepted[b] + PRIOR_WEIGHT * prob) / (self.tried[b] + PRIOR_WEIGHT)

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


def tried_outcomes(tree: Tree, accepted_nodes: Sequence[int]) -> tuple[tuple[float, ...], tuple[bool, ...]]:
    """The nodes a verdict tried (those whose parent was the root or accepted): their draft probabilities
    and whether each was accepted."""
    on_path = set(accepted_nodes)
    tried = [n for n, parent in enumerate(tree.parents) if parent == ROOT or parent in on_path]
    return tuple(tree.draft_probs[n] for n in tried), tuple(n in on_path for n in tried)


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
    """Every prefix size weighed (1 .. the cap), best first by the candidates' calibrated order."""

    order: tuple[int, ...]  # candidate nodes, best first (each after its parent)
    options: tuple[BudgetOption, ...]  # options[i]: the first i + 1 nodes of `order`
    best: int  # index into options

    @property
    def chosen(self) -> BudgetOption:
        return self.options[self.best]

    @property
    def kept(self) -> frozenset[int]:
        return frozenset(self.order[: self.chosen.nodes])

    def shown(self, budgets: Sequence[int] = SHOWN_BUDGETS) -> tuple[BudgetOption, ...]:
        """The options at the listed budgets (those the candidates reach) and the chosen one, by size."""
        sizes = {n for n in budgets if n <= len(self.options)} | {self.chosen.nodes}
        return tuple(self.options[n - 1] for n in sorted(sizes))


def path_probs(tree: Tree, calibration: Calibration) -> tuple[float, ...]:
    """Each node's calibrated probability that its whole path is accepted."""
    out: list[float] = []
    for parent, prob in zip(tree.parents, tree.draft_probs, strict=True):
        out.append(calibration.rate(prob) * (1.0 if parent == ROOT else out[parent]))
    return tuple(out)


def choose_budget(
    candidates: Tree, curve: CostCurve, calibration: Calibration, node_cap: int, fed: int = 1
) -> BudgetChoice:
    """The prefix of the candidates (by calibrated path probability) with the most expected tokens per second.

    A prefix of n nodes reaching depth d costs the draft's feed of `fed` committed tokens, a draft level
    over each of its levels 1 .. d - 1, and a verification of n nodes (`CostCurve.round_ms`'s model).
    """
    if not len(candidates) or node_cap < 1:
        raise ValueError("the budget needs at least one candidate and a cap of at least one node")
    probs, depths = path_probs(candidates, calibration), candidates.depths
    order = tuple(sorted(range(len(candidates)), key=lambda i: (-probs[i], depths[i], i)))
    per_level: list[int] = [0] * (candidates.depth + 1)
    expected, deepest = 0.0, 0
    options: list[BudgetOption] = []
    for node in order[:node_cap]:
        expected += probs[node]
        per_level[depths[node]] += 1
        deepest = max(deepest, depths[node])
        drafting = curve.draft_at(fed) + sum(curve.draft_at(per_level[level]) for level in range(1, deepest))
        options.append(BudgetOption(len(options) + 1, deepest, expected, drafting + curve.verify_at(len(options) + 1)))
    best = max(range(len(options)), key=lambda i: (options[i].tokens_per_s, -i))
    return BudgetChoice(order, tuple(options), best)
