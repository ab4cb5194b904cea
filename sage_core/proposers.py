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
- every other method: its own proposer beside its registry entry in `methods/` (SAGE's in
  `methods/sage.py`, the dynamic tree's in `methods/dynamic.py`, sage-cost's, SMART's and the ablations'
  in theirs), built on the pieces here (`Drafter`, `Proposal`, `RoundShape`, `Adaptation`).
"""

from __future__ import annotations

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
    block_offers,
    draft_block,
    feed_committed,
    grow_tree,
    template_chooser,
    top_candidates,
)
from .models import KVState, ModelPair
from .models.one_pass import OnePass
from .policy import (
    Candidate,
    LevelDecision,
)
from .records import OwnRecord
from .trees import EMPTY_TREE, RankPath, Tree
from .verify import Verdict, Warp


@dataclass(frozen=True)
class Drafter:
    """What a round drafts with: the draft's backend and cache, the shared vocabulary, the warp
    (sampling), the tokens that end the sequence (never expanded), and, for a one-pass draft, its
    mask and block (`one_pass`: the whole round's draft is one forward, `drafting.draft_block`).

    `forwards` counts the draft forwards run so far (the loop reads each round's), `head_calls` and
    `head_seconds` a one-pass draft's conditional head's calls and time apart from them, and a one-pass
    round's block logits wait in `block` between `root` and `grow`."""

    backend: ModelBackend
    state: KVState
    vocab: int
    warp: Warp | None
    stop: frozenset[int]
    one_pass: OnePass | None = None
    forwards: list[int] = field(default_factory=lambda: [0])
    block: list[torch.Tensor] = field(default_factory=list)
    head_calls: list[int] = field(default_factory=lambda: [0])
    head_seconds: list[float] = field(default_factory=lambda: [0.0])

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
        offers = None
        if self.one_pass is not None:
            assert self.block, "a one-pass round drafts its block in root() first"
            offers = block_offers(self.block[0], root, self.one_pass.head, k, self)
        drafted = grow_tree(self, root, choose, depth, k, expand, offers)
        self.forwards[0] += drafted.level_forwards
        self.head_calls[0] += drafted.head_calls
        self.head_seconds[0] += drafted.head_seconds
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
        measure their cost curve here); nothing by default. Its time is on no round's clock (`decode._prefill`)."""
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
