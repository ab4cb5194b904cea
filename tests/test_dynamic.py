"""The dynamic tree (EAGLE-2): its growth and rerank against a direct reading of the algorithm,
on a fake draft whose next-token distribution is a fixed function of the last token."""

from __future__ import annotations

import math

import pytest
import torch

from sage_core.config import DecodeConfig
from sage_core.decode import make_proposer
from sage_core.drafting import DraftedTree
from sage_core.errors import ConfigError
from sage_core.method_settings import DynamicConfig
from sage_core.methods.dynamic import DynamicProposer, rerank_tree
from sage_core.proposers import Drafter
from sage_core.trees import ROOT, Tree

VOCAB = 40


def next_logits(token: int) -> torch.Tensor:
    """A fixed, token-dependent distribution with distinct probabilities."""
    generator = torch.Generator().manual_seed(1000 + token)
    return torch.randn(VOCAB, generator=generator) * 2.0


class FakeState:
    committed = 12
    scratch = 0


class FakeDraft:
    """Logits after each fed token depend on that token only; caches are not needed for that."""

    def __init__(self) -> None:
        self.forwards = 0

    def extend(self, state, tokens, positions, parents):
        self.forwards += 1
        return torch.stack([next_logits(t) for t in tokens])

    def commit(self, state, keep):
        return None


def probs_after(token: int) -> list[float]:
    return torch.softmax(next_logits(token), dim=-1).tolist()


def eagle2_reference(root_token: int, config: DynamicConfig, stop: frozenset[int]) -> set[tuple[int, ...]]:
    """EAGLE-2's topK_genrate read directly: the token paths of the nodes it verifies."""
    k = config.candidates

    def children(path: tuple[int, ...], cumulative: float) -> list[tuple[tuple[int, ...], float]]:
        probs = probs_after(path[-1] if path else root_token)
        best = sorted(range(VOCAB), key=lambda t: -probs[t])[:k]
        return [((*path, t), cumulative * probs[t]) for t in best]

    level = children((), 1.0)
    drafted = list(level)
    for _ in range(config.depth):
        frontier = sorted((n for n in level if n[0][-1] not in stop), key=lambda n: -n[1])[:k]
        level = [child for path, cumulative in frontier for child in children(path, cumulative)]
        drafted += level
    drafted.sort(key=lambda n: (-n[1], len(n[0])))
    return {path for path, _ in drafted[: config.total_tokens]}


def tree_paths(tree: Tree) -> set[tuple[int, ...]]:
    return {tuple(tree.tokens[n] for n in tree.path_to(node)) for node in range(len(tree))}


@pytest.mark.parametrize(
    ("config", "stop"),
    [
        (DynamicConfig(), frozenset()),
        (DynamicConfig(depth=3, candidates=4, total_tokens=20), frozenset()),
        (DynamicConfig(depth=4, candidates=5, total_tokens=30), frozenset(range(0, VOCAB, 3))),
    ],
)
def test_the_dynamic_tree_is_eagle2s(config, stop):
    draft = FakeDraft()
    drafter = Drafter(draft, FakeState(), VOCAB, None, stop)
    proposal = DynamicProposer(config).propose(drafter, [7])
    tree = proposal.tree
    assert len(tree) == config.total_tokens
    assert tree.depth <= config.depth + 1
    assert tree_paths(tree) == eagle2_reference(7, config, stop)
    assert draft.forwards == 1 + config.depth  # the root's feed, then one forward per level
    cumulative = tree.cumulative_probs()
    assert min(cumulative) == pytest.approx(proposal.shape.rerank.cutoff)
    for node in range(len(tree)):
        if tree.tokens[node] in stop:
            assert not tree.children(node)


def test_the_rerank_keeps_the_best_nodes_and_their_ancestors():
    # A chain a (0.9) -> b (0.9) -> c (0.9) and a wide root: b and c beat the root's weaker children.
    tokens = (1, 2, 3, 4, 5, 6)
    parents = (ROOT, 0, 1, ROOT, ROOT, 3)
    probs = (0.9, 0.9, 0.9, 0.05, 0.04, 1.0)
    drafted = DraftedTree(Tree(tokens, parents, probs), {ROOT: (0.9, 0.05, 0.04)})
    kept, rerank = rerank_tree(drafted, 4)
    assert (kept.tree.tokens, kept.tree.parents) == ((1, 2, 3, 4), (ROOT, 0, 1, ROOT))
    assert tree_paths(kept.tree) == {(1,), (1, 2), (1, 2, 3), (4,)}
    # Token 6 has the same cumulative probability as its parent 4 (p = 1): the tie goes to the shallower.
    kept, rerank = rerank_tree(drafted, 5)
    assert tree_paths(kept.tree) == {(1,), (1, 2), (1, 2, 3), (4,), (4, 6)}
    assert rerank.dropped_per_level == (1, 0, 0)
    assert [c.token for c in rerank.listed] == [5]
    assert math.isclose(rerank.cutoff, 0.05)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"depth": 0}, "depth must be a whole number in [1, 10], not 0"),
        ({"candidates": 0}, "candidates must be a whole number in [1, 50], not 0"),
        ({"total_tokens": 1000}, "total_tokens must be a whole number in [1, 256], not 1000"),
        ({"depth": 2.5}, "depth must be a whole number"),
    ],
)
def test_bad_dynamic_settings_get_one_clear_message(settings, message):
    with pytest.raises(ConfigError, match=r"invalid dynamic tree settings: " + message.replace("[", r"\[")):
        DynamicConfig(**settings)


def test_the_settings_choose_the_proposer():
    assert isinstance(make_proposer(DecodeConfig("dynamic")), DynamicProposer)
    assert make_proposer(DecodeConfig("dynamic", dynamic=DynamicConfig(candidates=7))).candidates == 7
    with pytest.raises(ConfigError, match="unknown method 'eagle'; choose one of ar, chain, static, sage, dynamic"):
        DecodeConfig("eagle")
