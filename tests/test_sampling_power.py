"""Speculative sampling is exact in distribution for every tree method, tested where a test has power.

Why this file. test_sampling.py samples with top-k 4 and top-p 0.95: two or three tokens are left at
each position, so a tree method that drew its tokens a little wrongly could pass. Here the target
samples at temperature 1 with no top-k and no top-p: every token of the vocabulary can come, and after
"What colour is it?" (an open answer for a tiny random model) the tiny Qwen2.5-VL target's first token
has 52 categories with an expected count of 5 or more in RUNS = 2,000 runs (its likeliest has 0.165),
the second token (marginal) 114. The draft is the noised one: at the first position its distribution
is 0.43 away from the target's in total variation, so most trees have all their children rejected at
some level and the bonus is drawn from the residual (the target's distribution without them).

The runs. Every registered drafting method (`DRAFTING_METHODS`, parametrised: a method added to the
built-in registry is tested too) decodes 3 new tokens RUNS times, seeds 0..RUNS-1, through
`SequenceOracle` (the real decode loop, trees, verifier and commits; each token sequence's logits
computed once by the real model). The first token is the prefill's sample (no tree: the same for every
method under one seed, so it is tested once); the second comes from the first round's tree; the third
from the first round's tree or, when that round accepted nothing (most runs), from the second round's,
shaped by what the method learned from the first verdict. sage-cost and SMART decide from a fixed cost
curve remembered for this module's own pair (`CURVE`: a cheap verification per node, as on an
accelerator), on which they grow trees of about 10 nodes (up to about 20) with 7 to 9 children at the
root on average, and a third of their accepted children were not their parent's first; a curve measured
on the oracle would time its table lookups.

The statistics. The references are computed exactly, never sampled:

- position 1: the prefill's distribution;
- position 2, marginal: p(y) = sum over x of p(x) p(y | x), every x of the vocabulary enumerated by a
  plain forward of the whole sequence (`full_forward_logits`; after a sampled special token, which a
  plain forward would read as markup, the target's tree forward, as `generate` and the loop read it);
- the joint of positions 1 and 2: every pair (x, y) with its probability p(x) p(y | x) (48 cells);
- the joint of positions 1 to 3: the triples below every pair whose expected count is at least 5 (no
  other triple can reach 5; 16 cells), the rest in one cell of the exact mass left (0.62);
- positions 2 and 3, conditional: the randomised probability integral transform of each run's token
  under the target's distribution given that run's own earlier tokens (tokens most likely first;
  u = F(token-) + V p(token), V uniform): u is exactly uniform on [0, 1] and independent across runs
  when the sampler is exact, whatever the prefixes, so every prefix the runs reached counts (the rare
  ones and all the second rounds); 20 equal bins;
- the tree's places: which of the children the walk offered each token was (1st, 2nd, 3rd, later, or
  none), against each place's exact probability given the run's earlier tokens; the differences are a
  martingale (a tree depends on earlier tokens only), tested with their summed covariance (chi-square).
  This is the one that sees an acceptance probability wrong for later children, which moves little
  mass among 100 categories.

The first five are chi-square goodness-of-fit tests (`chi_square_p_value`, cells with an expected count
below 5 pooled). The conditional distributions come from one tree forward of the target over all the
prefixes reached (the losslessness suite checks that forward), checked here against plain forwards.

False-failure odds. A test fails when a p-value falls below ALPHA, a Bonferroni share of FAMILY_ALPHA =
1e-3 among the 6 statistics of each drafting method with each draft and the first position's: a correct
implementation fails any of them with probability below 1e-3 over a random choice of seeds (ALPHA = 1e-3 / 97
= 1.0e-5 with the 8 built-in drafting methods and the 2 drafts: the noised draft, and the same weights declared
a one-pass draft, whose trees take every depth from one forward's block: the draft's marginals). The seeds are
fixed, so the outcome is deterministic: a pass
stays a pass. Measured (the smallest of each method's six p-values): chain 5e-4 (the joint of positions
1 to 3; 0.19 with seeds 2,000..5,999 and 0.59 with 10,000 more), static 0.20, sage 0.13, dynamic 0.09,
sage-frozen 0.011, best-first 0.014, sage-cost 0.16, smart 0.09; position 1: 0.34. With 10,000 runs of
other seeds every p-value of chain, best-first, dynamic, sage-cost and smart is above 0.01.

Power: the negative controls fail the same statistics with the same RUNS. A verifier whose bonus comes
from the target's distribution instead of the residual: p = 1e-18 (joint of positions 1 and 2) and
1e-126 (the tree's places) under SMART, 2e-18 and 1e-126 under sage-cost. A verifier whose acceptance is
not renormalised by the residual's mass (wrong only for second and later children): 7e-12 (the tree's
places) under SMART (under sage-cost, not asserted: 7e-6). The draft's own sampling and the target's at
temperature 0.8 (plain decoding): p = 0 and 3e-37 at the first position, below 1e-44 for every other
statistic.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import pytest
import torch
from sequence_oracle import SequenceOracle, SequenceState
from test_sampling import BonusFromTarget, UnnormalisedAcceptance  # the wrong verifiers of the negative controls

from sage_core import DecodeConfig, SageConfig, decode, load_pair
from sage_core.config import SamplingConfig
from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.media import Media
from sage_core.methods.builtin import DRAFTING_METHODS
from sage_core.methods.run_costs import remember_curve
from sage_core.models import ModelPair
from sage_core.prepared import PreparedInputs, prepare_inputs
from sage_core.records import RoundRecord
from sage_core.sampling import Warper
from sage_core.trees import ROOT
from sage_testkit.pairs import tiny_folder
from sage_testkit.references import SAMPLING_PROMPT, Tokens, chi_square_p_value, full_forward_logits

FAMILY = "qwen2_5_vl"
PROMPT = SAMPLING_PROMPT
SETTINGS = SamplingConfig(temperature=1.0, top_k=0, top_p=1.0)  # the target's whole distribution
STEPS = 3
RUNS = 2_000
BINS = 20  # the probability integral transform's bins (100 expected counts each)
STATISTICS = ("position 2", "joint 1-2", "joint 1-3", "position 2 | 1", "position 3 | 1-2", "tree places")
FAMILY_ALPHA = 1e-3
DRAFTS = ("noised", "one-pass")  # a sequential draft, and the same weights as a one-pass draft (its block)
ALPHA = FAMILY_ALPHA / (1 + len(STATISTICS) * len(DRAFTING_METHODS) * len(DRAFTS))
REST: Tokens = (-1,)  # the pooled cell of the outcomes a reference leaves unlisted
ENDED: Tokens = ()  # a run that ended (end-of-sequence) before the position asked for
# A one-token step of 2 ms, each node verified 0.02 ms more, a draft level 0.1 ms, no round overhead.
CURVE = CostCurve(
    "cpu",
    "float32",
    "fast",
    COST_SIZES,
    2.0,
    tuple(2.0 + 0.02 * n for n in COST_SIZES),
    (0.1,) * len(COST_SIZES),
    round_overhead_ms=0.0,
)


# -- the setting: a private pair behind oracles, and the target's exact distributions ---------------


@dataclass
class Setting:
    pair: ModelPair  # the real tiny pair (this module's own objects: its remembered curve is this module's)
    oracle: ModelPair  # the same pair behind sequence oracles (the runs)
    prepared: PreparedInputs
    media: Media


def make_setting(tiny_root, image, draft: str) -> Setting:
    pair = load_pair(tiny_folder(tiny_root, FAMILY, "target"), tiny_folder(tiny_root, FAMILY, draft), "cpu", "float32")
    oracle = ModelPair(SequenceOracle(pair.target), SequenceOracle(pair.draft))
    assert remember_curve(oracle, "fast", CURVE)  # keyed by the inner models: this module's pair only
    return Setting(pair, oracle, prepare_inputs(oracle, image, PROMPT), image)


@pytest.fixture(scope="module")
def setting(tiny_root, image) -> Setting:
    return make_setting(tiny_root, image, "noised")


@pytest.fixture(scope="module")
def one_pass_setting(tiny_root, image) -> Setting:
    """The noised draft declared a one-pass draft: every depth of its tree from one forward's block."""
    return make_setting(tiny_root, image, "one-pass")


class TargetRows:
    """The target's sampling distribution (float64) after the prompt and a prefix: by a plain forward of
    the whole sequence (`exact`), or for many prefixes at once by one tree forward (`many`)."""

    def __init__(self, setting: Setting) -> None:
        self.setting = setting
        self.warp = Warper(SETTINGS)
        self.exact_rows: dict[Tokens, torch.Tensor] = {}
        self.tree = SequenceOracle(setting.pair.target)  # its own table: not the runs'
        self.tree_state: SequenceState | None = None
        self.eos = set(setting.pair.target.eos_token_ids)
        self.markup = set(setting.pair.target.tokenizer.added_tokens_decoder)  # the special tokens

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.warp(logits), dim=-1)[0].double()

    def exact(self, prefix: Tokens) -> torch.Tensor:
        if prefix not in self.exact_rows:
            if self.markup & set(prefix):
                # A plain forward would read a sampled vision or chat token as markup (an image placeholder
                # without its image); `generate`, as the loop, reads it as a token at the next position.
                self.exact_rows[prefix] = self.many([prefix])[prefix]
            else:
                logits = full_forward_logits(self.setting.pair, self.setting.media, prefix, PROMPT)
                self.exact_rows[prefix] = self.probs(logits)
        return self.exact_rows[prefix]

    def many(self, prefixes: Iterable[Tokens]) -> dict[Tokens, torch.Tensor]:
        """Each prefix's distribution, every missing one computed in one tree forward."""
        if self.tree_state is None:
            self.tree_state = self.tree.prefill(self.setting.prepared.target).state  # type: ignore[assignment]  # the oracle prefills a SequenceState
        state = self.tree_state
        assert isinstance(state, SequenceState)
        wanted = set(prefixes)
        longer = sorted(wanted - {()})
        tokens: list[int] = []
        parents: list[int] = []
        ends: list[int] = []
        for prefix in longer:  # each prefix a path of entries from the root, its last entry its row
            for depth, token in enumerate(prefix):
                parents.append(-1 if depth == 0 else len(tokens) - 1)
                tokens.append(token)
            ends.append(len(tokens) - 1)
        out: dict[Tokens, torch.Tensor] = {(): self.probs(self.tree.table[()])} if () in wanted else {}
        if longer:
            rows = self.tree.extend(state, tokens, [0] * len(tokens), parents=parents)
            self.tree.commit(state, [])
            out.update({prefix: self.probs(rows[end]) for prefix, end in zip(longer, ends, strict=True)})
        return out


@dataclass
class Reference:
    rows: TargetRows
    first: dict[Tokens, float]  # position 1
    second: dict[Tokens, float]  # position 2, marginal (ENDED: the first token ended the answer)
    joint_two: dict[Tokens, float]  # positions 1 and 2 (a first token that ended the answer: alone)
    joint_three: dict[Tokens, float]  # positions 1 to 3: the triples of the likely pairs, REST the rest
    likely_pairs: tuple[Tokens, ...]  # the pairs whose expected count is at least 5


@pytest.fixture(scope="module")
def reference(setting) -> Reference:
    rows = TargetRows(setting)
    eos = rows.eos
    p1 = rows.exact(())
    vocab = p1.shape[0]
    first: dict[Tokens, float] = {(x,): float(p1[x]) for x in range(vocab)}
    second: dict[Tokens, float] = {ENDED: sum(first[(x,)] for x in eos)}
    joint_two: dict[Tokens, float] = {(x,): first[(x,)] for x in eos}
    for x in range(vocab):
        if x in eos:
            continue
        p2 = rows.exact((x,)) * first[(x,)]  # every first token: a plain forward each
        for y, mass in enumerate(p2.tolist()):
            second[(y,)] = second.get((y,), 0.0) + mass
            joint_two[(x, y)] = mass
    likely: tuple[Tokens, ...] = tuple(
        o for o, mass in joint_two.items() if len(o) == 2 and o[1] not in eos and mass * RUNS >= 5
    )
    joint_three: dict[Tokens, float] = {o: mass for o, mass in joint_two.items() if len(o) == 1 or o[1] in eos}
    for prefix in likely:
        for z, p in enumerate(rows.exact(prefix).tolist()):
            joint_three[(*prefix, z)] = joint_two[prefix] * p
    joint_three[REST] = 1.0 - sum(joint_three.values())
    for name, probs in (("first", first), ("second", second), ("joint_two", joint_two)):
        assert sum(probs.values()) == pytest.approx(1.0), name
    assert 0.2 < joint_three[REST] < 0.9
    # The tree forward behind the conditional statistics gives the plain forwards' distributions.
    tree = rows.many([(), *((x,) for x in range(0, vocab, 16)), *likely])
    for prefix, row in tree.items():
        assert torch.allclose(row, rows.exact(prefix), atol=1e-5), prefix
    return Reference(rows, first, second, joint_two, joint_three, likely)


def test_the_setting_leaves_many_tokens_at_every_position(reference):
    """Many categories have an expected count of 5 or more: each position, and each joint."""
    big = {
        name: sum(1 for p in probs.values() if p * RUNS >= 5)
        for name, probs in (
            ("position 1", reference.first),
            ("position 2", reference.second),
            ("joint 1-2", reference.joint_two),
            ("joint 1-3", reference.joint_three),
        )
    }
    # Measured: 52, 114, 48 and 16 (+ the rest, 0.62 of the mass).
    assert min(big.values()) >= 10 and sorted(big.values())[1] >= 40, big
    assert reference.second[ENDED] * RUNS < 5  # hardly any answer ends at once


# -- the runs and the statistics -------------------------------------------------------------------


@dataclass
class Runs:
    answers: list[Tokens]  # each run's tokens, seeds 0..RUNS-1
    records: list[list[RoundRecord]]  # each run's decode rounds


def sampled_runs(setting: Setting, method: str, sampling: SamplingConfig = SETTINGS, pair=None) -> Runs:
    pair = pair or setting.oracle
    prepared = setting.prepared if pair is setting.oracle else prepare_inputs(pair, setting.media, PROMPT)
    sage = SageConfig(static_first_round=False)  # the methods grow their own trees from the first round
    answers, records = [], []
    for seed in range(RUNS):
        config = DecodeConfig(method, STEPS, sage, sampling=replace(sampling, seed=seed))
        run = decode(pair, setting.media, PROMPT, config, prepared)
        answers.append(run.run_to_end().token_ids)
        records.append([r for r in run.records if r.phase == "decode"])
    return Runs(answers, records)


def pooled(counts: Counter[Tokens], probs: Mapping[Tokens, float]) -> Counter[Tokens]:
    """The counts with each outcome the reference does not list moved to REST."""
    out: Counter[Tokens] = Counter()
    for outcome, count in counts.items():
        out[outcome if outcome in probs else REST] += count
    return out


def mass_before(row: torch.Tensor) -> torch.Tensor:
    """Per token, the probability of the tokens before it, most likely first (ties: lower id first)."""
    order = torch.argsort(row, descending=True, stable=True)
    ranked = row[order]
    out = torch.empty_like(row)
    out[order] = ranked.cumsum(dim=0) - ranked
    return out


def integral_transform(answers: list[Tokens], position: int, reference: Reference) -> Counter[Tokens]:
    """Each run's token at `position` (1-based) under the target's distribution given its earlier tokens:
    u = F(token-) + V p(token), tokens most likely first, V uniform (seeded); the counts of u's bins."""
    reached = [a for a in answers if len(a) >= position]
    rows = reference.rows.many({a[: position - 1] for a in reached})
    before = {prefix: mass_before(row) for prefix, row in rows.items()}
    jitter = torch.rand(len(reached), generator=torch.Generator().manual_seed(position), dtype=torch.float64)
    bins: Counter[Tokens] = Counter()
    for answer, v in zip(reached, jitter.tolist(), strict=True):
        prefix, token = answer[: position - 1], answer[position - 1]
        u = float(before[prefix][token]) + v * float(rows[prefix][token])
        bins[(min(BINS - 1, int(u * BINS)),)] += 1
    assert len(reached) > 0.99 * len(answers)
    return bins


UNIFORM: dict[Tokens, float] = {(b,): 1.0 / BINS for b in range(BINS)}


def offers(runs: Runs) -> list[tuple[Tokens, tuple[int, ...], int]]:
    """Each token a tree's walk produced at positions 2..STEPS: (the tokens before it, the tokens of the
    children the walk offered there in the tree's order, the token)."""
    out = []
    for answer, rounds in zip(runs.answers, runs.records, strict=True):
        prefix = answer[:1]  # the prefill's token: no tree
        for record in rounds:
            tree, node = record.tree, ROOT
            for j, token in enumerate(record.new_tokens[: STEPS - len(prefix)]):
                out.append((prefix, tuple(tree.tokens[c] for c in tree.children(node)), token))
                prefix = (*prefix, token)
                if j < len(record.accepted_nodes):
                    node = record.accepted_nodes[j]
        assert prefix == answer
    return out


RANKS = 4  # the children by their place in the tree's order: 1st, 2nd, 3rd, any later one


def tree_p_value(runs: Runs, reference: Reference) -> float:
    """Which of the offered children each token was (its place among them, or none), against the exact
    probabilities of each place under the target given the run's earlier tokens. The differences (count -
    expected) of the places are a martingale (each tree depends on earlier tokens only), so with the sum of
    the per-token covariances, diag(q) - q q', the quadratic form is chi-square (places never offered left
    out; none is the remaining one)."""
    offered = offers(runs)
    rows = reference.rows.many({prefix for prefix, _, _ in offered})
    difference = torch.zeros(RANKS, dtype=torch.float64)
    covariance = torch.zeros(RANKS, RANKS, dtype=torch.float64)
    for prefix, children, token in offered:
        q = torch.zeros(RANKS, dtype=torch.float64)
        hit = torch.zeros(RANKS, dtype=torch.float64)
        for place, child in enumerate(dict.fromkeys(children)):  # a repeated token is its first place's
            q[min(place, RANKS - 1)] += rows[prefix][child]
            if child == token:
                hit[min(place, RANKS - 1)] = 1.0
        difference += hit - q
        covariance += torch.diag(q) - torch.outer(q, q)
    kept = covariance.diagonal() > 25.0  # places offered often enough for the normal approximation
    assert kept[0], "no tree offered a child"
    d, v = difference[kept], covariance[kept][:, kept]
    statistic = float(d @ torch.linalg.solve(v, d))
    dof = torch.tensor(int(kept.sum()) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, torch.tensor(statistic / 2, dtype=torch.float64)))


def p_values(runs: Runs, reference: Reference) -> dict[str, float]:
    """Each statistic's p-value (the tree's places only when the runs drafted trees)."""
    answers = runs.answers
    second = Counter(a[1:2] for a in answers)  # ENDED when the answer ended at the first token
    joint_two = Counter(a[:2] for a in answers)
    joint_three = pooled(Counter(a[:3] for a in answers), reference.joint_three)
    values = {
        "position 2": chi_square_p_value(second, reference.second),
        "joint 1-2": chi_square_p_value(joint_two, reference.joint_two),
        "joint 1-3": chi_square_p_value(joint_three, reference.joint_three),
        "position 2 | 1": chi_square_p_value(integral_transform(answers, 2, reference), UNIFORM),
        "position 3 | 1-2": chi_square_p_value(integral_transform(answers, 3, reference), UNIFORM),
    }
    if any(r.tree_tokens for rounds in runs.records for r in rounds):
        values["tree places"] = tree_p_value(runs, reference)
    return values


def shown(values: Mapping[str, float]) -> str:
    return ", ".join(f"{name}: {p:.2g}" for name, p in values.items())


@pytest.fixture(scope="module")
def first_tokens(setting) -> list[Tokens]:
    """The prefill's samples, the same for every method under one seed: plain decoding's."""
    return [a[:1] for a in sampled_runs(setting, "ar").answers]


def test_the_first_token_is_the_targets_sample(first_tokens, reference):
    p_value = chi_square_p_value(Counter(first_tokens), reference.first)
    assert p_value > ALPHA, p_value


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("method", DRAFTING_METHODS)
def test_every_tree_method_samples_exactly_as_the_target(
    setting, one_pass_setting, reference, first_tokens, method, draft
):
    """RUNS runs of 3 tokens: position 2 and the joints against the exact distributions, positions 2 and 3
    and the tree's places given each run's own prefix; the runs rejected children and drew from the
    residual often. With the one-pass draft every round is one draft forward."""
    runs = sampled_runs(one_pass_setting if draft == "one-pass" else setting, method)
    if draft == "one-pass":
        assert {r.draft_forwards for run in runs.records for r in run} == {1}
    assert [a[:1] for a in runs.answers] == first_tokens  # the prefill's sample, whatever the method
    values = p_values(runs, reference)
    assert set(values) == set(STATISTICS)
    assert min(values.values()) > ALPHA, f"{method}: {shown(values)}"
    # Every case of the rule was reached many times: an accepted child, a level whose children were all
    # rejected (the bonus from the residual), and a second round (a tree shaped after the first verdict).
    rounds = [r for run in runs.records for r in run]
    assert sum(1 for r in rounds if r.accepted_nodes) > RUNS // 10
    assert sum(1 for r in rounds if len(r.tried_nodes) > len(r.accepted_nodes)) > RUNS // 2
    assert sum(1 for run in runs.records if len(run) >= 2) > RUNS // 4


# -- power: the same statistics, the same number of runs, reject what is not the target's sampling ----


@pytest.mark.parametrize(
    ("wrong", "method", "caught_by"),
    [
        (BonusFromTarget, "smart", ("joint 1-2", "position 2 | 1", "tree places")),
        (BonusFromTarget, "sage-cost", ("joint 1-2", "position 2 | 1", "tree places")),
        (UnnormalisedAcceptance, "smart", ("tree places",)),
    ],
)
def test_the_statistics_catch_a_wrong_verifier(setting, reference, wrong, method, caught_by, monkeypatch):
    loop = importlib.import_module("sage_core.decode")  # the package's `decode` is the function
    monkeypatch.setattr(loop, "make_verifier", lambda settings, seed: wrong(settings, seed))
    values = p_values(sampled_runs(setting, method), reference)
    assert all(values[name] < ALPHA for name in caught_by), shown(values)


@pytest.mark.parametrize("control", ["the draft's sampling", "the target's sampling at temperature 0.8"])
def test_the_statistics_reject_another_models_or_temperatures_sampling(setting, reference, control):
    """Plain decoding (no tree) of the draft at temperature 1, or of the target at 0.8."""
    if control == "the draft's sampling":
        draft = SequenceOracle(setting.pair.draft)
        runs = sampled_runs(setting, "ar", pair=ModelPair(draft, draft))
    else:
        runs = sampled_runs(setting, "ar", SamplingConfig(temperature=0.8, top_k=0))
    assert chi_square_p_value(Counter(a[:1] for a in runs.answers), reference.first) < ALPHA
    values = p_values(runs, reference)
    assert max(values.values()) < ALPHA, shown(values)
