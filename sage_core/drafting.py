"""Growing the draft tree (paper §3.1, step 1): a sequential draft runs one forward a level, a one-pass draft
one forward a round.

Two ways to decide which nodes a level holds, behind one seam:
- a rank template (the static tree, the chain, SAGE's planned template):
  `template_chooser`;
- SAGE's online rule from the live draft probabilities: `policy.choose_level`.

And three ways a level's children are found (`LevelOffers`): a sequential draft runs a forward a level
(`LevelForwards`); a one-pass draft offers its block's marginal at the next depth (`BlockOffers`), or, with a
conditional head, each expanded node its own next depth from the same block (`ConditionalOffers`: TreeFlash's
trees from conditional tables, no draft forward).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from .backends import ModelBackend
from .models import KVState
from .models.conditional_head import ConditionalHead
from .models.one_pass import OnePass
from .models.target_features import adding, feature_rows
from .policy import Candidate, Expansion
from .trees import ROOT, RankPath, Tree
from .verify import Warp

# (level, frontier, nodes so far) -> the nodes of this level
Chooser = Callable[[int, Sequence[Expansion], int], list[Candidate]]
# (node, its level, its cumulative draft probability) -> whether it gets children
Expand = Callable[[int, int, float], bool]


@dataclass(frozen=True)
class DraftedTree:
    tree: Tree
    # The draft's renormalisable top-k probabilities after the root (-1) and
    # after every expanded node: what SAGE's confidence is computed from.
    distributions: dict[int, tuple[float, ...]]
    # Draft forwards the levels ran (the root's, which fed the committed tokens, not counted).
    level_forwards: int = 0
    # A one-pass draft's conditional head: its calls (one a level it offered children at) and their seconds,
    # apart from the draft forwards (the head is a few small matrix products, not a forward).
    head_calls: int = 0
    head_seconds: float = 0.0


TopK = tuple[tuple[int, ...], tuple[float, ...]]  # (tokens, probabilities), most likely first


class DraftSide(Protocol):
    """What a tree is grown with (`proposers.Drafter`): the draft's backend and cache, the shared
    vocabulary, the warp (sampling) and the tokens that end the sequence."""

    @property
    def backend(self) -> ModelBackend: ...
    @property
    def state(self) -> KVState: ...
    @property
    def vocab(self) -> int: ...
    @property
    def warp(self) -> Warp | None: ...
    @property
    def stop(self) -> Collection[int]: ...


def top_candidates(logits: torch.Tensor, k: int, vocab: int, warp: Warp | None = None) -> list[TopK]:
    """Per row of logits, the k most likely tokens of the shared vocabulary and their probabilities.

    `warp` (sampling) processes the logits first, so the probabilities are the
    tempered ones the run samples from. One device-to-host copy for all rows:
    token ids travel as float64, exact for any vocabulary (on a CPU, two lists).
    """
    scores = logits
    if logits.dim() != 2 or logits.dtype != torch.float32:
        scores = logits.float().reshape(-1, logits.shape[-1])
    if scores.shape[-1] != vocab:
        scores = scores[:, :vocab]
    probs = torch.softmax(scores if warp is None else warp(scores), dim=-1)
    values, indices = probs.topk(k, dim=-1)
    if not _copies_to_host(values):  # on a CPU: two lists cost fewer tensor operations than one
        return [(tuple(i), tuple(p)) for i, p in zip(indices.tolist(), values.tolist(), strict=True)]
    rows = torch.cat((values.double(), indices.double()), dim=-1).tolist()
    return [(tuple(int(i) for i in row[k:]), tuple(row[:k])) for row in rows]


def _copies_to_host(tensor: torch.Tensor) -> bool:
    """Whether reading `tensor` as a list is a device-to-host copy (a CPU tensor is on the host)."""
    return tensor.device.type != "cpu"


def feed_committed(draft: ModelBackend, state: KVState, pending: Sequence[int]) -> torch.Tensor:
    """Feed the draft the tokens committed since its last round; returns the root's logits."""
    return feed_chain(draft, state, pending, len(pending))[-1]


def draft_block(draft: ModelBackend, state: KVState, pending: Sequence[int], one_pass: OnePass) -> torch.Tensor:
    """A one-pass draft's round: one forward over the tokens committed since its last round and
    `block_size - 1` masks after them, each mask at the position of the token it stands for; only the
    real tokens' entries are kept (the masks' are scratch, dropped). Returns the logits of depths
    1 .. block_size: the last real token's row, then the masks'. A draft that reads the target's features gets
    them added to the real tokens' embeddings when the loop gives them (`target_features.feeding`)."""
    fed = [*pending, *([one_pass.mask_token_id] * (one_pass.block_size - 1))]
    with adding(feature_rows(one_pass.features, len(pending), len(fed))):  # the target's features, where given
        return feed_chain(draft, state, fed, len(pending))[len(pending) - 1 :]


def feed_chain(draft: ModelBackend, state: KVState, tokens: Sequence[int], keep: int) -> torch.Tensor:
    """One forward over `tokens` as a chain after the committed sequence (consecutive positions); the first
    `keep` are committed, the rest dropped. Returns every token's logits."""
    start, scratch = state.committed, state.scratch
    logits = draft.extend(
        state,
        tokens,
        positions=[start + i for i in range(len(tokens))],
        parents=[-1] + [scratch + i for i in range(len(tokens) - 1)],
    )
    draft.commit(state, range(keep))
    return logits


def grow_tree(
    side: DraftSide,
    root: TopK,
    choose: Chooser,
    max_depth: int,
    top: int,
    expand: Expand,
    offers: LevelOffers | None = None,
) -> DraftedTree:
    """Grow a tree level by level under the draft's tree attention.

    `side.state` has the root committed last; `root` is the draft's top-k after
    it. Each level runs one draft forward over the nodes chosen for
    expansion (one device-to-host copy of its top-k); their KV entries are
    scratch and are dropped at the end (the draft is fed the accepted tokens
    next round). `expand(node, level, cumulative)` says whether a node of
    `level` (with that cumulative draft probability) gets children; a level
    with no node to expand ends the tree without a draft forward. A node whose
    token is in `side.stop` (the target's end-of-sequence ids) is never expanded:
    nothing after it could be accepted.

    A one-pass draft's `offers` (`block_offers`) run no forward: every node expanded at level l is offered the
    block's depth l + 1 (the draft's marginal there, the same whichever sibling it follows; with a conditional
    head, the node's own), and the tree ends at the block's depth.
    """
    levels: LevelOffers = offers if offers is not None else LevelForwards(side, top)
    max_depth = min(max_depth, levels.deepest)
    nodes: list[Candidate] = []  # each with its parent, token, draft probability and cumulative probability
    distributions = {ROOT: root[1]}
    frontier = [Expansion(ROOT, 1.0, 1.0, *root)]
    for level in range(1, max_depth + 1):
        chosen = choose(level, frontier, len(nodes))
        if not chosen:
            break
        first_new = len(nodes)
        nodes += chosen
        to_expand = [
            first_new + i
            for i, c in enumerate(chosen)
            if level < max_depth and c.token not in side.stop and expand(first_new + i, level, c.cumulative)
        ]
        if not to_expand:
            break
        frontier = []
        for node, (next_tokens, next_probs) in zip(to_expand, levels.offer(level, nodes, to_expand), strict=True):
            distributions[node] = next_probs
            frontier.append(Expansion(node, nodes[node].prob, nodes[node].cumulative, next_tokens, next_probs))
    levels.finish()
    tree = Tree(tuple(c.token for c in nodes), tuple(c.parent for c in nodes), tuple(c.prob for c in nodes))
    return DraftedTree(tree, distributions, levels.forwards, levels.head_calls, levels.head_seconds)


class LevelOffers(Protocol):
    """Where a level's children come from: the draft's top-k after each node expanded at `level`."""

    @property
    def deepest(self) -> int: ...
    @property
    def forwards(self) -> int: ...
    @property
    def head_calls(self) -> int: ...
    @property
    def head_seconds(self) -> float: ...
    def offer(self, level: int, nodes: Sequence[Candidate], to_expand: Sequence[int]) -> list[TopK]: ...
    def finish(self) -> None: ...


class LevelForwards:
    """A sequential draft: one forward over the nodes a level expands, under tree attention (scratch
    entries, dropped at the end)."""

    deepest = 1 << 30
    head_calls, head_seconds = 0, 0.0

    def __init__(self, side: DraftSide, top: int) -> None:
        self.side, self.top = side, top
        self.root_position = side.state.committed - 1
        self.scratch_of: dict[int, int] = {ROOT: -1}  # node -> its index among the draft's scratch entries
        self.forwards = 0

    def offer(self, level: int, nodes: Sequence[Candidate], to_expand: Sequence[int]) -> list[TopK]:
        side, state = self.side, self.side.state
        self.forwards += 1
        first = state.scratch
        self.scratch_of.update((node, first + offset) for offset, node in enumerate(to_expand))
        logits = side.backend.extend(
            state,
            [nodes[n].token for n in to_expand],
            positions=[self.root_position + level] * len(to_expand),
            parents=[self.scratch_of[nodes[n].parent] for n in to_expand],
        )
        return top_candidates(logits, self.top, side.vocab, side.warp)

    def finish(self) -> None:
        if self.forwards:
            self.side.backend.commit(self.side.state, [])


class BlockOffers:
    """A one-pass draft: a node expanded at level l is offered the block's depth l + 1, no forward."""

    forwards, head_calls, head_seconds = 0, 0, 0.0

    def __init__(self, block: Sequence[TopK]) -> None:
        self.block = block
        self.deepest = len(block)

    def offer(self, level: int, nodes: Sequence[Candidate], to_expand: Sequence[int]) -> list[TopK]:
        return [self.block[level]] * len(to_expand)

    def finish(self) -> None:
        pass


class ConditionalOffers:
    """A one-pass draft with a conditional head: a node expanded at level l is offered its own depth l + 1, the
    head applied to the block's logits there and the node's token (siblings get children of their own); one
    head call a level for all its nodes, no forward. Depth 1 is the block's (it read the root itself)."""

    forwards = 0

    def __init__(self, logits: torch.Tensor, head: ConditionalHead, top: int, vocab: int, warp: Warp | None) -> None:
        self.logits, self.head, self.top, self.vocab, self.warp = logits, head, top, vocab, warp
        self.deepest = int(logits.shape[0])
        self.head_calls, self.head_seconds = 0, 0.0

    def offer(self, level: int, nodes: Sequence[Candidate], to_expand: Sequence[int]) -> list[TopK]:
        started = time.perf_counter()
        prev = torch.tensor([nodes[n].token for n in to_expand], device=self.logits.device)
        conditioned = self.head.apply(self.logits[level][None], prev, level + 1)  # one block row for every node
        offered = top_candidates(conditioned, self.top, self.vocab, self.warp)
        self.head_calls += 1
        self.head_seconds += time.perf_counter() - started
        return offered

    def finish(self) -> None:
        pass


def block_offers(
    block: torch.Tensor, root: TopK, head: ConditionalHead | None, top: int, side: DraftSide
) -> LevelOffers:
    """A one-pass round's offers from its block's logits (depths 1 .. K, `draft_block`) and the root's top-k:
    the block's marginals, or with a `head` each node's own next depth."""
    if head is not None:
        return ConditionalOffers(block, head, top, side.vocab, side.warp)
    return BlockOffers([root, *top_candidates(block[1:], top, side.vocab, side.warp)])


def template_chooser(template: Sequence[RankPath]) -> tuple[Chooser, Expand, int]:
    """Choose nodes by rank paths; returns the chooser, the expand test and the depth."""
    paths = sorted(set(template), key=lambda p: (len(p), p))
    with_children = {p[:-1] for p in paths}
    path_of: dict[int, RankPath] = {ROOT: ()}

    def choose(level: int, frontier: Sequence[Expansion], count: int) -> list[Candidate]:
        chosen: list[Candidate] = []
        for node in frontier:
            prefix = path_of[node.node]
            for path in paths:
                if len(path) == level and path[:-1] == prefix:
                    rank = path[-1]
                    prob = node.top_probs[rank]
                    path_of[count + len(chosen)] = path
                    chosen.append(Candidate(node.node, node.top_tokens[rank], prob, node.cumulative * prob))
        return chosen

    def expand(node: int, level: int, cumulative: float) -> bool:
        return path_of[node] in with_children

    return choose, expand, max(len(p) for p in paths)
