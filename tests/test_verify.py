"""Greedy verification against hand-built target choices that force each pattern."""

import pytest
import torch

from sage_core.trees import Tree
from sage_core.verify import verify_greedy

# root -> a(5) -> c(7) -> e(9)
#      -> b(6) -> d(8)
TREE = Tree(tokens=(5, 6, 7, 8, 9), parents=(-1, -1, 0, 1, 2), draft_probs=(0.6, 0.3, 0.9, 0.8, 0.7))


def argmax_rows(*choices: int) -> list[int]:
    """Build logits whose argmax per row is `choices`, then take argmax, as the loop does."""
    logits = torch.randn(len(choices), 12)
    for row, token in enumerate(choices):
        logits[row, token] = logits[row].max() + 1.0
    return logits.argmax(dim=-1).tolist()


def test_reject_everything():
    verdict = verify_greedy(TREE, argmax_rows(3, 0, 0, 0, 0, 0))
    assert verdict.accepted_nodes == ()
    assert verdict.bonus_token == 3


def test_accept_the_full_first_branch():
    # after root -> 5, after a -> 7, after c -> 9, after e -> 4 (bonus)
    verdict = verify_greedy(TREE, argmax_rows(5, 7, 0, 9, 0, 4))
    assert verdict.accepted_nodes == (0, 2, 4)
    assert verdict.accepted_tokens == (5, 7, 9)
    assert verdict.bonus_token == 4


def test_accept_the_second_sibling():
    verdict = verify_greedy(TREE, argmax_rows(6, 0, 8, 0, 2, 0))
    assert verdict.accepted_nodes == (1, 3)
    assert verdict.bonus_token == 2


def test_partial_path_stops_at_first_disagreement():
    verdict = verify_greedy(TREE, argmax_rows(5, 1, 0, 0, 0, 0))
    assert verdict.accepted_tokens == (5,)
    assert verdict.bonus_token == 1


def test_a_matching_token_under_a_rejected_parent_is_not_accepted():
    # Node c (7) matches the choice after a, but a itself is rejected.
    verdict = verify_greedy(TREE, argmax_rows(6, 7, 0, 0, 0, 0))
    assert verdict.accepted_nodes == (1,)
    assert verdict.bonus_token == 0


def test_empty_tree_gives_plain_decoding():
    verdict = verify_greedy(Tree((), (), ()), [11])
    assert verdict.accepted_nodes == () and verdict.bonus_token == 11


def test_wrong_length_is_refused():
    with pytest.raises(ValueError):
        verify_greedy(TREE, [1, 2])


def test_tree_derivations():
    assert TREE.depths == (1, 1, 2, 2, 3)
    assert TREE.depth == 3 and TREE.root_width == 2
    assert TREE.children(-1) == (0, 1) and TREE.children(1) == (3,)
    assert TREE.path_to(4) == (0, 2, 4)
    assert TREE.ancestor_rows()[3] == (1, 3)
    assert TREE.cumulative_probs()[4] == pytest.approx(0.6 * 0.9 * 0.7)
    with pytest.raises(ValueError):
        Tree((1, 2), (1, -1), (0.5, 0.5))  # a parent after its child
