"""SAGE's proposer (paper §3.2-3.3): the tree's depth and width follow the draft's confidence, online (the tree
shaped level by level from this round's draft entropy) or from a template planned from the previous round; its
state across rounds (the acceptance window, last round's draft) is the proposer's (`SagePlanner`). Its registry
entry is in `builtin.py`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ..drafting import DraftedTree, TopK, template_chooser
from ..method_settings import SageConfig
from ..policy import (
    Candidate,
    DepthWindow,
    Expansion,
    LevelDecision,
    confidence,
    judge_level,
    level_threshold,
    plan_template,
    planned_depth,
    planned_width,
)
from ..proposers import Adaptation, Drafter, Proposal, Proposer, RoundShape
from ..trees import ROOT, STATIC_TREE
from ..verify import Verdict


class SagePlanner:
    """SAGE's state across rounds: the acceptance window and last round's draft."""

    def __init__(self, config: SageConfig) -> None:
        self.config = config
        self.window = DepthWindow(config.depth_max)
        self.previous: DraftedTree | None = None
        self.previous_accepted: tuple[int, ...] = ()

    def template_alpha(self) -> float:
        """Confidence planned from the previous round (template mode)."""
        if self.previous is None:
            return self.config.initial_alpha
        dists = self.previous.distributions
        if self.config.alpha_source == "root":
            return confidence(dists[ROOT])[1]
        along = [ROOT, *self.previous_accepted]
        return statistics.fmean(confidence(dists[n])[1] for n in along if n in dists)

    def level_probs(self) -> list[tuple[float, ...]]:
        """Mean top-k distribution per level of the previous round's tree."""
        assert self.previous is not None
        tree, dists = self.previous.tree, self.previous.distributions
        by_level: dict[int, list[tuple[float, ...]]] = {0: [dists[ROOT]]}
        for node, dist in dists.items():
            if node != ROOT:
                by_level.setdefault(tree.depths[node], []).append(dist)
        return [tuple(statistics.fmean(col) for col in zip(*by_level[d], strict=True)) for d in sorted(by_level)]

    def after_round(self, drafted: DraftedTree, accepted_nodes: tuple[int, ...]) -> float | None:
        """Take in a verified round; returns the window's mean acceptance if the window closed."""
        recent = (*self.window.recent, len(accepted_nodes))
        closing = len(recent) >= self.config.window
        self.window = self.window.after(len(accepted_nodes), self.config)
        self.previous, self.previous_accepted = drafted, accepted_nodes
        return statistics.fmean(recent) if closing else None


class SageProposer(Proposer):
    """SAGE: the tree's depth and width follow the draft's confidence (paper §3.2); the acceptance
    window moves D_max (§3.3). The first round (and, in template mode, any round without a
    previous one) uses the static tree, as in the paper."""

    def __init__(self, config: SageConfig) -> None:
        self.config = config
        self.candidates = config.candidates
        self.planner = SagePlanner(config)
        self.rounds = 0
        # The first round's static tree, then at most the node budget, at most depth_max_limit deep.
        self.max_nodes = max(config.node_budget, len(STATIC_TREE))
        self.max_depth = max(config.depth_max_limit, max(len(path) for path in STATIC_TREE))

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        self.rounds += 1
        sage = self.config
        root = drafter.root(pending, sage.candidates)
        depth_max = self.planner.window.depth_max
        no_history = sage.shape == "template" and self.planner.previous is None
        if (self.rounds == 1 and sage.static_first_round) or no_history:
            choose, expand, depth = template_chooser(STATIC_TREE)
            drafted = drafter.grow(root, choose, depth, sage.candidates, expand)
            entropy, alpha = confidence(drafted.distributions[ROOT])
            return Proposal(drafted, RoundShape(entropy, alpha, depth_max, root_top=root))
        if sage.shape == "template":
            return self._template(drafter, root, depth_max)
        return self._online(drafter, root, depth_max)

    def _template(self, drafter: Drafter, root: TopK, depth_max: int) -> Proposal:
        """Algorithm 1: a rank template planned from the previous round's draft distributions."""
        sage = self.config
        alpha = self.shape_alpha(self.planner.template_alpha())
        template = plan_template(alpha, depth_max, self.planner.level_probs(), sage)
        choose, expand, depth = template_chooser(template)
        drafted = drafter.grow(root, choose, depth, sage.candidates, expand)
        entropy = confidence(drafted.distributions[ROOT])[0]
        width = planned_width(alpha, sage.width_min, sage.width_max)
        return Proposal(drafted, RoundShape(entropy, alpha, depth_max, depth, width, root_top=root))

    def _online(self, drafter: Drafter, root: TopK, depth_max: int) -> Proposal:
        """Alpha from this round's root distribution shapes the tree as it grows (the default)."""
        sage = self.config
        entropy, measured = confidence(root[1])
        alpha = self.shape_alpha(measured)
        depth = planned_depth(alpha, sage.depth_min, depth_max)
        width = planned_width(alpha, sage.width_min, sage.width_max)
        decisions: list[LevelDecision] = []

        def grow_online(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
            decision = judge_level(frontier, level, width, depth, sage.node_budget - count, sage.threshold_base)
            decisions.append(decision)
            return list(decision.kept)

        def worth_expanding(node: int, level: int, cumulative: float) -> bool:
            # A child's cumulative probability is at most its parent's: below the next level's
            # threshold no child could be kept, so the node needs no draft forward (the tree is
            # the same; a round whose tree ends before D saves its last draft level).
            return cumulative > level_threshold(level + 1, depth, sage.threshold_base)

        drafted = drafter.grow(root, grow_online, depth, sage.candidates, worth_expanding)
        return Proposal(drafted, RoundShape(entropy, alpha, depth_max, depth, width, root, tuple(decisions)))

    def shape_alpha(self, measured: float) -> float:
        """The α that shapes the round's tree from the draft's measured one (SAGE: the measured one)."""
        return measured

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        window_mean = self.planner.after_round(proposal.drafted, verdict.accepted_nodes)
        return Adaptation(window_mean, self.planner.window.depth_max)
