"""The ablation lanes (sage_core/methods/ablations.py): `sage-frozen` holds α, `best-first` grows SAGE's node count
best-first. Their losslessness and exact sampling are in test_lossless.py and test_sampling.py with every
method; here, that each does what it says."""

from __future__ import annotations

import random

import pytest

from sage_core import DecodeConfig, SageConfig, decode
from sage_core.drafting import DraftedTree
from sage_core.errors import ConfigError
from sage_core.method_settings import BestFirstConfig, FrozenSageConfig
from sage_core.methods import method_spec
from sage_core.methods.ablations import best_first
from sage_core.methods.dynamic import rerank_tree
from sage_core.policy import Candidate, Expansion, planned_depth
from sage_core.trees import Tree

TOP = 3


def fake_top(path: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """A made-up draft: the top-3 after a path, the same every time it is asked."""
    rng = random.Random(hash(path))
    weights = sorted((rng.random() ** 2 for _ in range(TOP)), reverse=True)
    total = sum(weights) * rng.uniform(1.05, 1.6)  # the rest of the vocabulary holds some mass
    return tuple(rng.randrange(100) * TOP + rank for rank in range(TOP)), tuple(w / total for w in weights)


class FakeDrafter:
    """`Drafter.grow` without a model: the chooser and the expand test as grow_tree calls them."""

    def grow(self, root, choose, depth, top, expand) -> DraftedTree:
        nodes: list[Candidate] = []
        paths: dict[int, tuple[int, ...]] = {-1: ()}
        distributions = {-1: root[1]}
        frontier = [Expansion(-1, 1.0, 1.0, *root)]
        for level in range(1, depth + 1):
            chosen = choose(level, frontier, len(nodes))
            if not chosen:
                break
            first = len(nodes)
            nodes += chosen
            for i, c in enumerate(chosen):
                paths[first + i] = (*paths[c.parent], c.token)
            grown = [
                first + i for i, c in enumerate(chosen) if level < depth and expand(first + i, level, c.cumulative)
            ]
            frontier = []
            for node in grown:
                tokens, probs = fake_top(paths[node])
                distributions[node] = probs
                frontier.append(Expansion(node, nodes[node].prob, nodes[node].cumulative, tokens, probs))
        tree = Tree(tuple(c.token for c in nodes), tuple(c.parent for c in nodes), tuple(c.prob for c in nodes))
        return DraftedTree(tree, distributions)


def token_paths(tree: Tree) -> set[tuple[int, ...]]:
    out = set()
    for node in range(len(tree)):
        path, at = [], node
        while at != -1:
            path.append(tree.tokens[at])
            at = tree.parents[at]
        out.add(tuple(reversed(path)))
    return out


def brute_force_best(budget: int, depth: int) -> set[tuple[int, ...]]:
    """The `budget` paths of highest cumulative probability in the whole top-3 tree `depth` deep."""
    scored: list[tuple[float, tuple[int, ...]]] = []

    def walk(path: tuple[int, ...], cumulative: float) -> None:
        if len(path) == depth:
            return
        tokens, probs = fake_top(path)
        for token, prob in zip(tokens, probs, strict=True):
            scored.append((cumulative * prob, (*path, token)))
            walk((*path, token), cumulative * prob)

    walk((), 1.0)
    scored.sort(key=lambda item: (-item[0], len(item[1])))
    return {path for _, path in scored[:budget]}


@pytest.mark.parametrize(("budget", "depth"), [(1, 4), (5, 4), (12, 5), (30, 4), (39, 3)])
def test_best_first_keeps_the_budgets_most_likely_paths(budget: int, depth: int) -> None:
    drafted = best_first(FakeDrafter(), fake_top(()), budget, TOP, depth)
    kept, _ = rerank_tree(drafted, budget)
    assert len(kept.tree) == budget
    assert token_paths(kept.tree) == brute_force_best(budget, depth)


def test_best_first_drafts_fewer_nodes_than_the_whole_tree() -> None:
    drafted = best_first(FakeDrafter(), fake_top(()), 8, TOP, 6)
    assert len(drafted.tree) < sum(TOP**level for level in range(1, 7)) / 10


@pytest.fixture(scope="module")
def pair(tiny_pair):
    return tiny_pair("qwen2_vl")


def test_sage_frozen_holds_alpha_and_shapes_its_trees_with_sages_rules(pair, image) -> None:
    frozen = FrozenSageConfig(0.37)
    config = DecodeConfig("sage-frozen", 24, SageConfig(window=3)).with_settings({"sage-frozen": frozen})
    run = decode(pair, image, "Describe the picture.", config)
    run.run_to_end()
    assert run.header.settings_of("sage-frozen") == {"alpha": 0.37}
    shaped = [r for r in run.records if r.phase == "decode" and r.planned_depth is not None]
    assert shaped, "every round after the first is shaped"
    for record in shaped:
        assert record.alpha == 0.37
        assert record.planned_depth == planned_depth(0.37, 3, record.depth_max)
    entropies = {round(r.entropy, 6) for r in shaped if r.entropy is not None}
    assert len(entropies) > 1  # the draft's entropy moved; the shape did not follow it
    from app.explain_view import explain_html

    page = explain_html(run.records, shaped[0].round, {}, "sage-frozen", SageConfig(window=3), settings=frozen)
    assert "SAGE without adaptation: α is held at 0.370 for the whole answer" in page
    assert "the shape used α = <b>0.370</b>, held fixed" in page and "D(α)" in page


def test_best_first_verifies_its_node_count_drafting_only_its_own_tree(pair, image, monkeypatch) -> None:
    """Each best-first round verifies at most its `nodes` nodes (as many as the draft offers), drafts one
    forward per level and never SAGE's tree, and its tokens are plain decoding's."""
    import sage_core.methods.ablations as ablations

    shaped: list[int] = []

    class Counted(ablations.SageProposer):
        def propose(self, drafter, pending):
            shaped.append(1)
            return super().propose(drafter, pending)

    monkeypatch.setattr(ablations, "SageProposer", Counted)
    expected = decode(pair, image, "Describe the picture.", DecodeConfig("ar", 24)).run_to_end().token_ids
    config = DecodeConfig("best-first", 24).with_settings({"best-first": BestFirstConfig(7)})
    lane = decode(pair, image, "Describe the picture.", config)
    assert lane.run_to_end().token_ids == expected and lane.header.settings_of("best-first") == {"nodes": 7}
    rounds = [r for r in lane.records if r.phase == "decode"]
    assert shaped == [] and all(r.node_count <= 7 for r in rounds) and max(r.node_count for r in rounds) == 7
    assert all(r.alpha is not None and r.entropy is not None for r in rounds)  # recorded, not used


def test_in_a_race_an_unset_best_first_holds_sages_mean_node_count(pair, image) -> None:
    from app.handlers import last
    from app.race import RaceRequest, race_steps

    methods = ("sage", "best-first")
    request = RaceRequest(image, "Describe the picture.", methods, 16, holding=frozenset({"best-first"}))
    data = last(race_steps(pair, request))
    nodes = [r.node_count for r in data.lane("sage").records if r.phase == "decode" and r.node_count]
    assert nodes and data.lane("best-first").header.settings_of("best-first")["nodes"] == max(
        1, round(sum(nodes) / len(nodes))
    )
    given = RaceRequest(image, "Describe the picture.", methods, 16, {"best-first": BestFirstConfig(5)})
    assert last(race_steps(pair, given)).lane("best-first").header.settings_of("best-first")["nodes"] == 5


def test_the_lanes_are_registry_methods_off_by_default() -> None:
    for name in ("sage-frozen", "best-first"):
        spec = method_spec(name)
        assert spec.ablation and not spec.in_race and spec.drafts
    with pytest.raises(ConfigError, match=r"sage-frozen's α must be a number in \[0, 1\], not 1.5"):
        method_spec("sage-frozen").settings_from({"frozen_alpha": "1.5"})
    for bad in ("0", "257", "2.5", True, 10**400):
        with pytest.raises(ConfigError, match=r"best-first's nodes must be a whole number in \[1, 256\]|whole number"):
            method_spec("best-first").settings_from({"best_first_nodes": bad})
    assert method_spec("best-first").settings_from({"best_first_nodes": "7"}) == BestFirstConfig(7)


def test_a_configuration_carries_each_methods_settings_where_its_entry_says():
    from sage_core.decode import _cache_reserve, make_proposer

    config = DecodeConfig("sage-frozen", 16).with_settings(
        {"sage": SageConfig(depth_max=6), "sage-frozen": FrozenSageConfig(0.5)}
    )
    assert config.sage.depth_max == 6 and config.settings_for().alpha == 0.5
    assert config.settings_for("best-first") == BestFirstConfig() and config.settings_for("dynamic") == config.dynamic
    with pytest.raises(ConfigError, match="not the ones its registry entry names"):
        DecodeConfig("sage", method_settings=(("sage-frozen", SageConfig()),))
    chain, sage = make_proposer(DecodeConfig("chain", 16)), make_proposer(DecodeConfig("sage", 16))
    assert _cache_reserve(16, chain) == 16 + 5 + 1 + 5 + 1  # the chain's 5 nodes, 5 deep
    assert _cache_reserve(16, sage) == 16 + 64 + 1 + 10 + 1  # SAGE's node budget, depth_max_limit


def test_in_a_race_an_unset_frozen_alpha_is_sages_own_mean(pair, image) -> None:
    """A race of SAGE and sage-frozen whose α was not set: the frozen lane holds SAGE's mean α in that race
    (so a race whose α never moves credits reacting with nothing); a value given explicitly is kept."""
    from app.handlers import last
    from app.race import RaceRequest, race_steps

    methods = ("sage", "sage-frozen")
    data = last(
        race_steps(pair, RaceRequest(image, "Describe the picture.", methods, 16, holding=frozenset({"sage-frozen"})))
    )
    alphas = [r.alpha for r in data.lane("sage").records if r.alpha is not None]
    held = data.lane("sage-frozen").header.settings_of("sage-frozen")["alpha"]
    assert alphas and held == pytest.approx(sum(alphas) / len(alphas))
    assert data.lane("sage").finished and data.lane("sage-frozen").finished
    given = RaceRequest(image, "Describe the picture.", methods, 16, {"sage-frozen": FrozenSageConfig(0.37)})
    assert last(race_steps(pair, given)).lane("sage-frozen").header.settings_of("sage-frozen")["alpha"] == 0.37


def test_step_mode_holds_sages_averages_as_the_race_does(pair, image) -> None:
    """Stepped round by round, sage-frozen and best-first (their values not given) wait for SAGE's lane to
    finish, then hold its mean α and mean node count, as in a race."""
    from app.race import RaceRequest, live_stepper

    methods = ("sage", "sage-frozen", "best-first")
    request = RaceRequest(image, "Describe the picture.", methods, 16, holding=frozenset({"sage-frozen", "best-first"}))
    stepper = live_stepper(pair, request)
    waited = 0
    for _ in range(100):
        if stepper.finished:
            break
        data = stepper.step()
        if not data.lane("sage").finished:
            waited += 1
            assert not data.lane("sage-frozen").records and not data.lane("best-first").records
    sage = [r for r in data.lane("sage").records if r.phase == "decode"]
    alphas = [r.alpha for r in sage if r.alpha is not None]
    nodes = [r.node_count for r in sage if r.node_count]
    assert waited > 1 and stepper.finished
    assert data.lane("sage-frozen").header.settings_of("sage-frozen")["alpha"] == pytest.approx(
        sum(alphas) / len(alphas)
    )
    assert data.lane("best-first").header.settings_of("best-first")["nodes"] == max(1, round(sum(nodes) / len(nodes)))
    assert data.lane("sage-frozen").finished and data.lane("best-first").finished
