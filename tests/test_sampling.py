"""Speculative sampling is exact in distribution: statistical tests with their odds, and negative controls.

How the exactness tests work. The reference is never sampled: it is the
target's own sampling distribution computed exactly, by enumerating every
continuation the warped target probabilities allow (`generate`'s warpers,
checked against `generate` below). The tested code runs many times with
seeds 0..N-1; the counts of the outcomes are compared with the exact
probabilities by a chi-square goodness-of-fit test (cells with an expected
count below 5 are pooled). An outcome of probability 0 fails at once.

The decode-loop tests run the real loop (trees, verifier, commits, token
accounting) for chain, static tree and SAGE on a tiny Qwen2.5-VL target with
a noised draft, through `sequence_oracle.SequenceOracle`: each distinct token
sequence is computed once by the real model and looked up afterwards, so a
run costs milliseconds. The real KV caches under sampling are covered by the
top-k 1 test below (a point mass: the output must be greedy `generate`'s)
and, for greedy, by the losslessness suite.

False-alarm odds. Each test fails when its p-value is below ALPHA = 1e-4,
so a correct implementation fails one test with probability 1e-4 for a
random choice of seeds, and any of the 4 exactness tests with probability
below 4e-4. The seeds are fixed, so the outcome is deterministic: a pass
stays a pass (measured: p = 0.48 for the verifier on the hand-built tree,
6,000 verifications; p = 0.46, 0.85 and 0.88 for chain, static tree and
SAGE, 1,000 decode runs each).

Power: the negative controls fail the same tests. On the hand-built tree
(4,000 verifications) a bonus drawn from the target's distribution instead
of the residual produces outcomes of probability 0, and an acceptance
probability not renormalised by the residual's mass gives p < 1e-300. In
the decode loop the wrong residual gives p = 5e-9 over 400 runs of the
chain (6e-24 over 1,000 runs, and 1e-23 for the static tree).
"""

from __future__ import annotations

import importlib
import json
from collections import Counter

import pytest
import torch
from sequence_oracle import SequenceOracle

from sage_core import DecodeConfig, SageConfig, decode
from sage_core.config import SamplingConfig
from sage_core.errors import ConfigError, InputError
from sage_core.methods.builtin import DRAFTING_METHODS, METHODS
from sage_core.models import ModelPair
from sage_core.prepared import PreparedInputs, prepare_inputs
from sage_core.records import save_trace, trace_lines
from sage_core.sampling import SamplingVerifier, Warper, _sample, make_verifier
from sage_core.trace_check import load_trace, parse_trace
from sage_core.trees import ROOT, Tree
from sage_core.verify import GreedyVerifier
from sage_testkit.pairs import tiny_pair
from sage_testkit.references import (
    ALPHA,
    DECODE_SETTINGS,
    SAMPLING_PROMPT,
    Tokens,
    chi_square_p_value,
    target_sampling_distribution,
)


def test_chi_square_helper_accepts_a_fair_sample_and_rejects_a_biased_one():
    probs = {(0,): 0.5, (1,): 0.3, (2,): 0.2}
    assert chi_square_p_value(Counter({(0,): 502, (1,): 297, (2,): 201}), probs) > 0.9
    assert chi_square_p_value(Counter({(0,): 560, (1,): 270, (2,): 170}), probs) < 1e-3
    assert chi_square_p_value(Counter({(0,): 500, (1,): 300, (2,): 199, (3,): 1}), probs) == 0.0


# -- settings ------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": 0.7, "top_p": 0.0}, "top-p"),
        ({"temperature": 0.7, "top_p": 1.5}, "top-p"),
        ({"temperature": 0.7, "top_k": -1}, "top-k"),
        ({"temperature": 0.7, "seed": -3}, "seed"),
    ],
)
def test_bad_settings_get_a_clear_message(settings, message):
    with pytest.raises(ConfigError, match=message) as caught:
        SamplingConfig(**settings)
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ValueError)


def test_temperature_zero_is_the_greedy_verifier():
    assert isinstance(make_verifier(SamplingConfig(), None), GreedyVerifier)
    assert isinstance(make_verifier(SamplingConfig(temperature=0.5), 1), SamplingVerifier)


# -- the verifier alone, on a hand-built tree -------------------------------------

VOCAB = 6
# root -> 2 (node 0) -> 1 (3) -> 2 (6)
#                    -> 3 (4)
#      -> 0 (1)      -> 5 (5)
#      -> 4 (2)
TREE = Tree(
    tokens=(2, 0, 4, 1, 3, 5, 2), parents=(-1, -1, -1, 0, 0, 1, 3), draft_probs=(0.5, 0.3, 0.1, 0.6, 0.2, 0.9, 0.8)
)
# Row 0: the target's logits after the root; row 1 + i: after node i.
LOGITS = torch.tensor(
    [
        [1.0, 0.2, 1.5, -0.5, 0.5, -3.0],  # root: children 2, 0, 4 and a residual of 1, 3
        [0.3, 1.2, -0.2, 0.8, 0.0, -0.4],  # node 0: children 1, 3
        [0.5, 1.0, 0.7, 0.2, 0.9, -5.0],  # node 1: its child 5 is cut by top-k
        [0.1, 0.4, -0.3, 0.6, 0.2, 0.0],  # node 2: a leaf
        [0.2, -0.1, 1.4, 0.3, -0.6, 0.5],  # node 3: child 2
        [0.6, 0.1, 0.0, -0.2, 0.3, 0.4],  # node 4: a leaf
        [-0.3, 0.2, 0.5, 0.1, 0.0, 0.7],  # node 5: a leaf
        [0.0, 0.5, 0.3, -0.2, 0.9, 0.1],  # node 6: the leaf at depth 3
    ]
)
SETTINGS = SamplingConfig(temperature=0.9, top_k=5, top_p=0.95)  # every warper acts; some children are truncated


def tree_outcomes(tree: Tree, probs: torch.Tensor) -> dict[Tokens, float]:
    """The exact distribution of (accepted tokens..., bonus): the target samples x ~ p at each node and the walk
    goes on while x is a child."""
    outcomes: dict[Tokens, float] = {}

    def visit(node: int, prefix: Tokens, mass: float) -> None:
        children = {tree.tokens[c]: c for c in tree.children(node)}
        for token, p in enumerate(probs[node + 1].tolist()):
            if p > 0:
                if token in children:
                    visit(children[token], (*prefix, token), mass * p)
                else:
                    outcomes[(*prefix, token)] = mass * p

    visit(ROOT, (), 1.0)
    return outcomes


def verifier_counts(verifier: SamplingVerifier, runs: int = 6_000) -> Counter[Tokens]:
    counts: Counter[Tokens] = Counter()
    for _ in range(runs):
        verdict = verifier.verify(TREE, LOGITS)
        counts[(*verdict.accepted_tokens, verdict.bonus_token)] += 1
    return counts


class BonusFromTarget(SamplingVerifier):
    """Wrong: after every child is rejected, the bonus comes from the target's p, not the residual."""

    def residual(self, row, rejected):
        return row


class UnnormalisedAcceptance(SamplingVerifier):
    """Wrong: a child is accepted with r(c) as if the residual still had mass 1."""

    def acceptance(self, mass, left):
        return mass


def test_the_hand_built_tree_exercises_every_case():
    probs = torch.softmax(Warper(SETTINGS)(LOGITS), dim=-1)
    truncated = [n for n in range(len(TREE)) if probs[TREE.parents[n] + 1, TREE.tokens[n]] == 0]
    assert truncated, "a child outside the target's top-k/top-p"
    outcomes = tree_outcomes(TREE, probs)
    assert any(len(o) == 4 for o in outcomes), "the full path and a bonus after the leaf"
    assert any(len(o) == 1 for o in outcomes), "every root child rejected"


def test_verifier_is_exact_on_a_hand_built_tree():
    """6,000 verifications of one tree: accepted path + bonus distributed as the target's sampling."""
    probs = torch.softmax(Warper(SETTINGS)(LOGITS), dim=-1).double()
    exact = tree_outcomes(TREE, probs)
    assert sum(exact.values()) == pytest.approx(1.0)
    p_value = chi_square_p_value(verifier_counts(SamplingVerifier(SETTINGS, seed=0)), exact)
    assert p_value > ALPHA


@pytest.mark.parametrize("wrong", [BonusFromTarget, UnnormalisedAcceptance])
def test_the_same_test_catches_a_wrong_verifier(wrong):
    probs = torch.softmax(Warper(SETTINGS)(LOGITS), dim=-1).double()
    p_value = chi_square_p_value(verifier_counts(wrong(SETTINGS, seed=0), 4_000), tree_outcomes(TREE, probs))
    assert p_value < ALPHA


def test_inverse_cdf_never_picks_a_token_without_weight():
    weights = torch.tensor([0.2, 0.8, 0.0], dtype=torch.float64)
    assert [_sample(weights, u, weights) for u in (0.0, 0.19, 0.21, 1 - 2**-53)] == [0, 0, 1, 1]
    assert _sample(torch.zeros(3, dtype=torch.float64), 0.1, fallback=weights) == 0  # an empty residual


def test_verdict_reports_each_tried_child_and_its_acceptance_probability():
    verdict = SamplingVerifier(SETTINGS, seed=3).verify(TREE, LOGITS)
    assert len(verdict.tried_nodes) == len(verdict.accept_probs) >= 1
    assert all(0.0 <= a <= 1.0 for a in verdict.accept_probs)
    assert set(verdict.accepted_nodes) <= set(verdict.tried_nodes)
    # The first tried child is the root's first, with acceptance p(c_1).
    probs = torch.softmax(Warper(SETTINGS)(LOGITS), dim=-1).double()
    assert verdict.tried_nodes[0] == 0
    assert verdict.accept_probs[0] == pytest.approx(float(probs[0, TREE.tokens[0]] / probs[0].sum()))


# -- the whole decode loop on a tiny real model -------------------------------------

FAMILY = "qwen2_5_vl"
PROMPT = SAMPLING_PROMPT
STEPS = 3  # the joint distribution of the first three tokens
RUNS = 1_000
CONTROL_RUNS = 400


@pytest.fixture(scope="module")
def oracle(tiny_root, image) -> tuple[ModelPair, PreparedInputs]:
    """The tiny pair behind sequence oracles (shared by the tests below), with its prepared inputs."""
    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    oracle_pair = ModelPair(SequenceOracle(pair.target), SequenceOracle(pair.draft))
    return oracle_pair, prepare_inputs(oracle_pair, image, PROMPT)


def decode_counts(oracle: tuple[ModelPair, PreparedInputs], method: str, runs: int) -> Counter[Tokens]:
    """The first tokens of `runs` decode runs with seeds 0..runs-1."""
    pair, prepared = oracle
    # SAGE grows its own tree from the first round (the paper's first round is the static tree).
    sage = SageConfig(static_first_round=False)
    counts: Counter[Tokens] = Counter()
    for seed in range(runs):
        config = DecodeConfig(method, STEPS, sage, sampling=SamplingConfig(**DECODE_SETTINGS, seed=seed))
        counts[decode(pair, prepared.media, PROMPT, config, prepared).run_to_end().token_ids] += 1
    return counts


@pytest.fixture(scope="module")
def exact_reference(tiny_root, image) -> dict[Tokens, float]:
    exact = target_sampling_distribution(tiny_pair(str(tiny_root), FAMILY, "noised"), image, STEPS)
    assert sum(exact.values()) == pytest.approx(1.0)
    return exact


@pytest.mark.parametrize("method", DRAFTING_METHODS)
def test_decoding_samples_exactly_as_the_target(oracle, exact_reference, method):
    """1,000 runs of the decode loop: the first three tokens are distributed as the target's own sampling."""
    counts = decode_counts(oracle, method, RUNS)
    assert chi_square_p_value(counts, exact_reference) > ALPHA
    assert len(counts) >= 20  # many joint outcomes were reached


def test_the_same_test_catches_a_wrong_residual_in_the_loop(oracle, exact_reference, monkeypatch):
    loop = importlib.import_module("sage_core.decode")  # the package's `decode` is the function
    monkeypatch.setattr(loop, "make_verifier", lambda settings, seed: BonusFromTarget(settings, seed))
    assert chi_square_p_value(decode_counts(oracle, "chain", CONTROL_RUNS), exact_reference) < ALPHA


# -- the settings reach the target as generate's, and the run is reproducible ---------------


@pytest.mark.parametrize(
    "settings, generate_kwargs",
    [
        (SamplingConfig(temperature=0.7, top_k=20, top_p=0.9), {"temperature": 0.7, "top_k": 20, "top_p": 0.9}),
        (SamplingConfig(temperature=1.0), {"temperature": 1.0}),  # generate's default top-k of 50, ours too
        (SamplingConfig(temperature=1.3, top_k=0, top_p=0.5), {"temperature": 1.3, "top_k": 0, "top_p": 0.5}),
    ],
)
def test_warper_processes_logits_exactly_as_generate(tiny_root, image, settings, generate_kwargs):
    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    inputs = pair.target.prepare(image, PROMPT)
    torch.manual_seed(0)
    with torch.no_grad():
        out = pair.target.model.generate(
            **inputs,
            do_sample=True,
            max_new_tokens=4,
            output_scores=True,
            output_logits=True,
            return_dict_in_generate=True,
            **generate_kwargs,
        )
    assert len(out.scores) >= 2
    for raw, processed in zip(out.logits, out.scores, strict=True):
        mine = Warper(settings)(raw)
        kept = torch.isfinite(processed)
        assert torch.equal(torch.isfinite(mine), kept)
        assert 0 < int(kept.sum()) < processed.shape[-1] or settings.top_k == 0
        assert torch.equal(mine[kept], processed[kept])


@pytest.mark.parametrize("method", METHODS)
def test_sampling_from_a_point_mass_is_greedy_decoding(tiny_root, image, method):
    """top-k 1 leaves one token: the sampling verifier, on the real caches, must give greedy generate's tokens."""
    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    inputs = pair.target.prepare(image, PROMPT)
    with torch.no_grad():
        expected = pair.target.model.generate(**inputs, do_sample=False, max_new_tokens=20)[
            0, inputs["input_ids"].shape[1] :
        ]
    config = DecodeConfig(method, 20, sampling=SamplingConfig(temperature=1.0, top_k=1, seed=0))
    run = decode(pair, image, PROMPT, config)
    assert list(run.run_to_end().token_ids) == expected.tolist()
    if method != "ar":
        assert any(r.accepted_length > 0 for r in run.records)
        assert all(p in (0.0, 1.0) for r in run.records for p in r.accept_probs)


def test_a_seed_reproduces_a_run_and_is_recorded(tiny_root, image, tmp_path):
    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    settings = SamplingConfig(**DECODE_SETTINGS)  # no seed: the run draws one and records it
    first = decode(pair, image, PROMPT, DecodeConfig("sage", 16, sampling=settings))
    tokens = first.run_to_end().token_ids
    seed = first.header.sampling["seed"]
    assert isinstance(seed, int) and first.header.sampling["temperature"] == DECODE_SETTINGS["temperature"]
    again = decode(pair, image, PROMPT, DecodeConfig("sage", 16, sampling=SamplingConfig(**DECODE_SETTINGS, seed=seed)))
    assert again.run_to_end().token_ids == tokens
    assert [r.accept_probs for r in again.records] == [r.accept_probs for r in first.records]
    others = {
        decode(pair, image, PROMPT, DecodeConfig("sage", 16, sampling=SamplingConfig(**DECODE_SETTINGS, seed=s)))
        .run_to_end()
        .token_ids
        for s in range(4)
    }
    assert len(others) > 1
    # The trace keeps the settings, the seed and each tried child's acceptance probability.
    path = tmp_path / "sampled.jsonl"
    save_trace(path, first.header, first.records)
    header, records = load_trace(path)
    assert header == first.header and records == first.records
    assert any(r.tried_nodes for r in records)


def test_a_trace_written_before_sampling_still_loads(tiny_root, image, tmp_path):
    run = decode(tiny_pair(str(tiny_root), FAMILY, "noised"), image, PROMPT, DecodeConfig("static", 6))
    run.run_to_end()
    lines = []
    for line in trace_lines(run.header, run.records):
        data = json.loads(line)
        data.get("header", {}).pop("sampling", None)
        for key in ("tried_nodes", "accept_probs"):
            data.pop(key, None)
        lines.append(json.dumps(data))
    header, records = parse_trace(lines)
    assert header.sampling is None and records == run.records


# -- the app ------------------------------------------------------------------------------


def test_a_sampled_race_says_exact_in_distribution_and_a_greedy_one_stays_lossless(tiny_root, image):
    from app import render
    from app.handlers import last
    from app.inputs import sampling_settings
    from app.race import RaceRequest, race_steps
    from app.view import race_view

    pair = tiny_pair(str(tiny_root), FAMILY, "noised")
    sampling = sampling_settings(0.8, 4)
    data = last(race_steps(pair, RaceRequest(image, PROMPT, ("sage", "static"), 12, sampling=sampling)))
    recorded = {"temperature": 0.8, "top_p": 1.0, "top_k": 50, "seed": 4}
    assert all(lane.header.sampling == recorded for lane in data.lanes)
    html = render.badge_html(race_view(data))
    assert "Sampling: exact in distribution" in html and "temperature 0.8" in html and "seed 4" in html
    assert "Lossless" not in html
    # The tree panel shows each tried child's acceptance probability.
    from app import panels

    lane = data.lane("sage")
    step = next(i for i, r in enumerate(lane.records) if r.tried_nodes)
    figure = panels.tree_figure(lane.records, step, data.token_texts, "sage", False)
    hovers = [h for t in figure.data if t.hovertext is not None for h in t.hovertext]
    first = lane.records[step].accept_probs[0]
    assert any(f"acceptance probability {first:.3f}" in h for h in hovers)
    greedy = last(
        race_steps(pair, RaceRequest(image, PROMPT, ("sage", "static"), 12, sampling=sampling_settings(0, 4)))
    )
    assert "Lossless" in render.badge_html(race_view(greedy)) and "identical" in render.badge_html(race_view(greedy))
    with pytest.raises(ConfigError, match="temperature"):
        sampling_settings(-1, 0)
    with pytest.raises(ConfigError, match="seed"):
        sampling_settings(0.5, float("nan"))
