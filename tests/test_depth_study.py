"""The equal-budget study of depth rules (sage_core/studies/depth_rules.py, scripts/depth_study.py): chains
simulated on recorded draft signals, rules compared at the same mean node count, and a signal that is really
there is found (a test that can fail: a rule reading noise finds nothing)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from sage_core.cost_curve import COST_SIZES, CostCurve
from sage_core.studies.depth_rules import (
    Answer,
    Costs,
    DepthTop,
    compare,
    draft_signals,
    reach,
    simulate,
    target_answer,
)
from sage_testkit.pairs import declare_one_pass

CURVE = CostCurve("cpu", "float32", "fast", COST_SIZES, 4.0, tuple(4.0 + 0.1 * n for n in COST_SIZES), (1.0,) * 7)
SURE, UNSURE = DepthTop((1, 2), (0.97, 0.02)), DepthTop((1, 2), (0.4, 0.35))


def answer_with(rights: list[list[bool]], tops: list[list[DepthTop]] | None = None) -> Answer:
    """An answer of len(rights) + 1 tokens (all 1s); round t's depth d is right when rights[t][d] (else it
    proposes token 2) and carries tops[t][d]'s probabilities (SURE by default)."""
    rounds = []
    for t, row in enumerate(rights):
        depths = []
        for d, right in enumerate(row):
            probs = (tops[t][d] if tops else SURE).probs
            depths.append(DepthTop((1 if right else 2, 3), probs))
        rounds.append(tuple(depths))
    return Answer("toy", (1,) * (len(rights) + 1), tuple(rounds))


def test_a_chain_accepts_the_leading_right_depths_and_moves_by_them_plus_the_bonus():
    answer = answer_with([[True, True, False, True]] * 12)
    tally = simulate(answer, "fixed", 4, Costs(CURVE))
    # t = 0: 2 accepted, t -> 3; t = 3: 2, t -> 6; t = 6: 2, t -> 9; t = 9: 2 of the 2 left... the end at 12
    assert (tally.rounds, tally.accepted, tally.nodes) == (4, 8, 16)
    assert tally.tokens == 12
    one_pass = simulate(answer, "fixed", 4, Costs(CURVE, block=8))
    assert one_pass.ms < tally.ms  # three draft levels fewer a round


def test_a_signal_that_is_there_is_found_and_noise_is_not():
    """Rounds alternate between sure blocks (every depth right) and rounds whose draft is unsure and wrong
    from depth 2: entropy and margin read it and stop early, so at the fixed depth's node count they accept
    more; with the probabilities shuffled (no signal), they gain nothing beyond the interval."""
    rng = random.Random(0)
    answers, noise = [], []
    for _ in range(30):
        rights, tops = [], []
        for _ in range(40):
            sure = rng.random() < 0.5
            rights.append([True] * 6 if sure else [True] + [False] * 5)
            tops.append([SURE] * 6 if sure else [SURE] + [UNSURE] * 5)
        answers.append(answer_with(rights, tops))
        shuffled = [[rng.choice((SURE, UNSURE)) for _ in row] for row in tops]
        noise.append(answer_with(rights, shuffled))
    costs = Costs(CURVE, block=6)
    found = compare(answers, costs, 3.0, "signal", resamples=100)
    assert found is not None
    for rule in ("entropy", "margin", "probability"):
        gain, low, _ = found.gain[rule]
        assert gain > 0.3 and low > 0, rule
    blind = compare(noise, costs, 3.0, "noise", resamples=100)
    assert blind is not None
    assert blind.gain["entropy"][0] < 0.15


def test_reach_counts_the_marginal_and_the_chain():
    answer = answer_with([[True, False, True]] * 6)
    right, chain = reach([answer], 3)
    assert right[0] == 1.0 and right[1] == 0.0 and chain[2] == 0.0


def test_the_study_records_a_sequential_and_a_one_pass_draft_and_prints_its_tables(tmp_path, capsys):
    """The script end to end on the built-in pair: its sure draft, and the same weights declared a one-pass
    draft (never trained as one: its deeper depths are wrong, and the study says so)."""
    import runpy

    from sage_core.models.loading import BUILTIN_DRAFT

    copy = tmp_path / "one-pass"
    shutil.copytree(BUILTIN_DRAFT, copy)
    declare_one_pass(copy, 0, 4)
    script = Path(__file__).resolve().parent.parent / "scripts" / "depth_study.py"
    main = runpy.run_path(str(script), run_name="depth_study")["main"]
    args = ["--drafts", f"builtin,{copy}", "--n", "2", "--held-out", "1", "--kinds", "describe", "--depths", "4"]
    out = main([*args, "--budgets", "2", "--resamples", "20", "--recorded-costs", "--markdown", str(tmp_path / "s.md")])
    printed = capsys.readouterr().out
    assert "one-pass, block 4" in printed and "sequential (teacher-forced signals)" in printed
    assert (tmp_path / "s.md").read_text().startswith("# Which signal sets the depth")
    one_pass = out["drafts"][str(copy)]
    assert one_pass["block"] == 4
    assert one_pass["reach"]["describe"]["right"][0] > 0.8  # depth 1 is the sure draft's next token
    assert one_pass["reach"]["describe"]["chain"][2] < one_pass["reach"]["describe"]["chain"][0]


@pytest.mark.parametrize("kind", ["one-pass", "sequential"])
def test_the_recorded_signals_predict_the_next_tokens(builtin_pair, image, kind, tmp_path):
    """depth 1 of every round start is the draft's next-token distribution after the answer so far: for
    the sure draft on its own pair's answer, mostly right."""
    from sage_core import load_pair
    from sage_core.models.loading import BUILTIN_DRAFT

    pair = builtin_pair
    if kind == "one-pass":
        copy = tmp_path / "one-pass"
        shutil.copytree(BUILTIN_DRAFT, copy)
        declare_one_pass(copy, 0, 3)
        pair = load_pair("builtin", str(copy), "cpu", "float32")
    tokens = target_answer(builtin_pair, image, "describe the picture.", 24)
    rounds = draft_signals(pair, image, "describe the picture.", tokens, 3)
    assert len(rounds) == len(tokens) - 1 and all(1 <= len(r) <= 3 for r in rounds)
    right = sum(r[0].tokens[0] == tokens[t + 1] for t, r in enumerate(rounds))
    assert right >= 0.5 * len(rounds)
