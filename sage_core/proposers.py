"""The proposer seam: how each method drafts a round's tree, and what it learns from the verdict.

As transformers' candidate generators (`get_candidates`, then
`update_candidate_strategy` with the number of matches), a `Proposer`
drafts the round's tree from the draft model (`propose`) and takes in the
target's verdict on it (`observe`). The decode loop calls every method the
same way; the loop makes the one its method's registry entry names
(decode.make_proposer), as `make_verifier` picks the verifier. One proposer
per method of the registry (methods/registry.py):

- plain decoding: no draft, the empty tree;
- the chain and the static tree: a fixed rank template (`TemplateProposer`);
- SAGE (paper §3.2-3.3): online (the tree shaped level by level from this
  round's draft entropy) or template (planned from the previous round);
  its state across rounds (the acceptance window, last round's draft) is the
  proposer's;
- the dynamic tree (EAGLE-2): grown where the cumulative draft probability is
  highest, then reranked (`DynamicProposer`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from .backends import ModelBackend
from .drafting import (
    Chooser,
    DraftedTree,
    Expand,
    TopK,
    draft_block,
    feed_committed,
    grow_tree,
    template_chooser,
    top_candidates,
)
from .method_settings import DynamicConfig, SageConfig
from .models import KVState, ModelPair
from .models.one_pass import OnePass
from .policy import (
    CUT_LISTED,
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
from .records import OwnRecord
from .trees import EMPTY_TREE, ROOT, STATIC_TREE, RankPath, Tree
from .verify import Verdict, Warp


@dataclass(frozen=True)
class Drafter:
    """What a round drafts with: the draft's backend and cache, the shared vocabulary, the warp
    (sampling), the tokens that end the sequence (never expanded), and, for a one-pass draft, its
    mask and block (`one_pass`: the whole round's draft is one forward, `drafting.draft_block`).

    `forwards` counts the draft forwards run so far (the loop reads each round's), and a one-pass
    round's block logits wait in `block` between `root` and `grow`."""

    backend: ModelBackend
    state: KVState
    vocab: int
    warp: Warp | None
    stop: frozenset[int]
    one_pass: OnePass | None = None
    forwards: list[int] = field(default_factory=lambda: [0])
    block: list[torch.Tensor] = field(default_factory=list)

    @property
    def block_size(self) -> int:
        """Depths one forward drafts (0: a sequential draft, one forward per level)."""
        return self.one_pass.block_size if self.one_pass is not None else 0

    def root(self, pending: Sequence[int], k: int) -> TopK:
        """Feed the tokens committed since last round; the draft's top-k after the root (a one-pass
        draft: its whole block, from the same forward)."""
        self.forwards[0] += 1
        if self.one_pass is None:
            logits = feed_committed(self.backend, self.state, pending)
        else:
            self.block[:] = [draft_block(self.backend, self.state, pending, self.one_pass)]
            logits = self.block[0][0]
        return top_candidates(logits, k, self.vocab, self.warp)[0]

    def grow(self, root: TopK, choose: Chooser, depth: int, k: int, expand: Expand) -> DraftedTree:
        block = None
        if self.one_pass is not None:
            assert self.block, "a one-pass round drafts its block in root() first"
            block = [root, *top_candidates(self.block[0][1:], k, self.vocab, self.warp)]
        drafted = grow_tree(self, root, choose, depth, k, expand, block)
        self.forwards[0] += drafted.level_forwards
        return drafted


@dataclass(frozen=True)
class Rerank:
    """The dynamic tree's rerank: the cumulative probability of the last node kept, the drafted
    nodes left out per level, and the best few left out whose parent was kept."""

    cutoff: float
    dropped_per_level: tuple[int, ...]
    listed: tuple[Candidate, ...]  # parent = its index in the kept tree (-1 = the root)


@dataclass(frozen=True)
class RoundShape:
    """What a method decided for a round (None where it has no such number)."""

    entropy: float | None = None
    alpha: float | None = None
    depth_max: int | None = None
    planned_depth: int | None = None
    planned_width: int | None = None
    root_top: TopK | None = None  # the draft's top-k after the root
    levels: tuple[LevelDecision, ...] = ()  # SAGE's online rule, level by level
    rerank: Rerank | None = None  # the dynamic tree's rerank
    # The method's own: what it decided that only it reads back (`observe`; sage-cost's budgets weighed), the
    # shared record fields it fills for it (SMART's refusals among the cut candidates) and its own record of
    # the round (`RoundRecord.own`, of its `MethodSpec.record` type); opaque to the loop, which names no method.
    own: Any = None
    own_fields: Mapping[str, Any] = field(default_factory=dict)
    own_record: OwnRecord | None = None

    def record_fields(self) -> dict[str, Any]:
        """The round record's policy and teaching fields."""
        fields: dict[str, Any] = {
            "entropy": self.entropy,
            "alpha": self.alpha,
            "depth_max": self.depth_max,
            "planned_depth": self.planned_depth,
            "planned_width": self.planned_width,
            "root_top_tokens": self.root_top[0] if self.root_top else (),
            "root_top_probs": self.root_top[1] if self.root_top else (),
            "own": self.own_record,
        }
        fields |= _rerank_fields(self.rerank) if self.rerank is not None else _level_fields(self.levels)
        return fields | dict(self.own_fields)  # the method's own last: they may fill the teaching fields too


def _level_fields(levels: Sequence[LevelDecision]) -> dict[str, Any]:
    shown = [cut for level in levels for cut in level.cut]
    offers = [(parent, width) for level in levels for parent, _, width in level.widths]
    return {
        "level_thresholds": tuple(level.threshold for level in levels),
        "cut_by_width": tuple(level.cut_count("width") for level in levels),
        "cut_by_threshold": tuple(level.cut_count("threshold") for level in levels),
        "cut_by_budget": tuple(level.cut_count("budget") for level in levels),
        "offer_parents": tuple(parent for parent, _ in offers),
        "offer_widths": tuple(width for _, width in offers),
        "cut_parents": tuple(c.candidate.parent for c in shown),
        "cut_tokens": tuple(c.candidate.token for c in shown),
        "cut_probs": tuple(c.candidate.prob for c in shown),
        "cut_rules": tuple(c.rule for c in shown),
    }


def _rerank_fields(rerank: Rerank) -> dict[str, Any]:
    """The rerank in the record's level fields: every level's threshold is the rerank's cutoff, and
    the nodes it left out are cut by the budget (the N kept)."""
    levels = len(rerank.dropped_per_level)
    return {
        "level_thresholds": (rerank.cutoff,) * levels,
        "cut_by_width": (0,) * levels,
        "cut_by_threshold": (0,) * levels,
        "cut_by_budget": rerank.dropped_per_level,
        "cut_parents": tuple(c.parent for c in rerank.listed),
        "cut_tokens": tuple(c.token for c in rerank.listed),
        "cut_probs": tuple(c.prob for c in rerank.listed),
        "cut_rules": ("budget",) * len(rerank.listed),
    }


@dataclass(frozen=True)
class Proposal:
    """A round's draft: the tree (with the draft's distributions) and what shaped it."""

    drafted: DraftedTree
    shape: RoundShape = RoundShape()

    @property
    def tree(self) -> Tree:
        return self.drafted.tree


@dataclass(frozen=True)
class Adaptation:
    """What a proposer changed after a verdict (SAGE: its window's mean when it closed, the next D_max)."""

    window_mean: float | None = None
    next_depth_max: int | None = None


@dataclass(frozen=True)
class RunStart:
    """What a run has once both models read the prompt, handed to a proposer's optional start-of-run hook
    (`start_run(run)`, called once before the first round; sage-cost measures its cost curve there)."""

    pair: ModelPair
    backend: str  # the backend's label, as the run header records it
    target: ModelBackend
    target_state: KVState
    drafter: Drafter
    root: int  # the first new token, the first round's root


class Proposer(Protocol):
    """Drafts each round's tree and learns from the verdict; says how large its trees can get (the caches
    reserve room for them). A proposer subclasses this seam (as transformers' candidate generators do
    theirs), which gives it a `start_run` that does nothing."""

    candidates: int  # draft candidates per node (0: no draft)
    max_nodes: int  # the most tree nodes one round verifies, or feeds the draft (0: no draft)
    max_depth: int  # the deepest tree one round drafts, in levels below the root

    def start_run(self, run: RunStart) -> None:
        """Called once after the prefill, before the first round, when the run drafts (sage-cost and SMART
        measure their cost curve here); nothing by default."""
        return None

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        """The round's tree; `pending`: the tokens committed since the last round, the root last."""
        ...

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation: ...


class PlainProposer(Proposer):
    """Plain decoding: the target alone, the empty tree."""

    candidates = max_nodes = max_depth = 0

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        return Proposal(DraftedTree(EMPTY_TREE, {}))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


class TemplateProposer(Proposer):
    """A fixed tree, the same rank template every round (the chain, the static tree)."""

    def __init__(self, template: Sequence[RankPath], top: int) -> None:
        self.template = tuple(template)
        self.candidates = top
        self.max_nodes = len(self.template)
        self.max_depth = max((len(path) for path in self.template), default=0)

    def propose(self, drafter: Drafter | None, pending: Sequence[int]) -> Proposal:
        assert drafter is not None
        root = drafter.root(pending, self.candidates)
        choose, expand, depth = template_chooser(self.template)
        return Proposal(drafter.grow(root, choose, depth, self.candidates, expand), RoundShape(root_top=root))

    def observe(self, proposal: Proposal, verdict: Verdict) -> Adaptation:
        return Adaptation()


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
