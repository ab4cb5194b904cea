"""The budget sweep (the figure DDTree's authors draw): τ, tokens per target forward and decode-only speedup
against the node budget, for the methods given one (the registry's `budget`: SAGE, the dynamic tree and a
same-budget best-first tree), with the budgets the cost-shaped methods chose marked (the registry's
`chooses_budget`: sage-cost and SMART).

Each method is run at each budget of `SWEEP_BUDGETS` on the same prepared inputs, plain decoding beside
them; runs are interleaved (each repeat rotates the order), so a busy machine hits all of them alike. The
decode-only speedup is a run's tokens per second after the prefill over plain decoding's on the same
example (median over repeats), then the median over examples. The budget a method is given is its settings'
field its registry entry names (`MethodSpec.budget`):

- SAGE: its node budget N_max (`SageConfig.node_budget`; the paper's 64);
- the dynamic tree: the nodes it verifies (`DynamicConfig.total_tokens`; EAGLE-2's 59);
- best-first: the N drafted nodes of highest cumulative draft probability, grown level by level
  (`BestFirstConfig.nodes`; run alone, so it holds nothing of SAGE's as its lane does in a race).

Every run of an example must give the same tokens (all greedy, all lossless); the sweep checks it.

`sage-cost` and `smart` run once per example with their own choice every round; the sweep marks the mean
node count each chose (sage-cost: the budget it picked, its own record's `budget_chosen`; SMART: the nodes its
rule kept), with its τ, tokens per forward and speedup.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..config import Backend, DecodeConfig
from ..decode import DecodeRun
from ..methods import budgeted, choosing_budget, method_spec
from ..methods.budget import SageCostRecord
from ..models import ModelPair
from ..prepared import PreparedInputs
from ..records import RoundRecord

SWEEP_BUDGETS: tuple[int, ...] = (4, 8, 12, 16, 24, 32, 48, 64)


def budget_config(method: str, budget: int, max_new_tokens: int, backend: Backend = "fast") -> DecodeConfig:
    """The settings that give `method` a budget of `budget` nodes: its settings' field its registry entry names
    (`MethodSpec.budget`, module docstring)."""
    spec = method_spec(method)
    if not spec.budget:
        raise ValueError(f"the sweep has no budget for {method!r}")
    settings = replace(spec.default_settings(), **{spec.budget: budget})
    return DecodeConfig(method, max_new_tokens, backend=backend).with_settings({method: settings})


@dataclass(frozen=True)
class SweepPoint:
    """One method at one budget (or sage-cost at its own), over the examples."""

    method: str
    budget: float  # the budget given; for sage-cost the mean node count it chose
    tau: float  # accepted draft tokens per round (bonus excluded), pooled over the examples' rounds
    tokens_per_forward: float  # committed tokens per target forward, the prefill's included
    nodes: float  # mean verified nodes per round
    speedup: float  # decode-only tokens/s over plain decoding's: median over examples


@dataclass(frozen=True)
class SweepResult:
    points: tuple[SweepPoint, ...]
    chosen: tuple[SweepPoint, ...]  # each choosing method's (`methods.choosing_budget`) at its mean choice
    examples: int
    repeats: int

    def chosen_by(self, method: str) -> SweepPoint | None:
        return next((p for p in self.chosen if p.method == method), None)

    def lines(self) -> list[str]:
        """The sweep as a text table, one row per method and budget, the choosing methods' choices last."""
        out = ["| method | budget | τ | tokens/forward | nodes/round | decode speedup × plain |", "|---" * 6 + "|"]
        for p in (*self.points, *self.chosen):
            budget = f"{p.budget:.0f}" if p not in self.chosen else f"chosen, mean {p.budget:.1f}"
            out.append(
                f"| {p.method} | {budget} | {p.tau:.2f} | {p.tokens_per_forward:.2f} | {p.nodes:.1f} | "
                f"{p.speedup:.2f} |"
            )
        return out


def _decode_rate(run: DecodeRun) -> float:
    summary = run.run_to_end()
    return summary.decode_tokens_per_second


def sweep(
    pair: ModelPair,
    cases: Sequence[tuple[str, PreparedInputs]],
    budgets: Sequence[int] = SWEEP_BUDGETS,
    methods: Sequence[str] | None = None,
    max_new_tokens: int = 128,
    repeats: int = 1,
    backend: Backend = "fast",
    progress: Callable[[str], None] = lambda line: None,
) -> SweepResult:
    """Run the sweep on these prepared examples (module docstring); a warm-up run of each setting first. `methods`:
    the methods given a budget (default: every one the registry gives one, `methods.budgeted`)."""
    methods = budgeted() if methods is None else methods
    settings = {(m, b): budget_config(m, b, max_new_tokens, backend) for m in methods for b in budgets}
    settings[("ar", 0)] = DecodeConfig("ar", max_new_tokens, backend=backend)
    for method in choosing_budget():
        settings[(method, 0)] = DecodeConfig(method, max_new_tokens, backend=backend)
    return _sweep(pair, cases, settings, list(settings), budgets, methods, repeats, progress)


def _sweep(
    pair: ModelPair,
    cases: Sequence[tuple[str, PreparedInputs]],
    settings: dict[tuple[str, int], DecodeConfig],
    keys: list[tuple[str, int]],
    budgets: Sequence[int],
    methods: Sequence[str],
    repeats: int,
    progress: Callable[[str], None],
) -> SweepResult:
    rates: dict[tuple[str, int], list[float]] = {key: [] for key in keys}  # per example: median decode tok/s
    records: dict[tuple[str, int], list[list[RoundRecord]]] = {key: [] for key in keys}
    for name, prepared in cases:
        per_run: dict[tuple[str, int], list[float]] = {key: [] for key in keys}
        tokens: set[tuple[int, ...]] = set()
        for repeat in range(repeats + 1):  # the first pass warms up
            shift = repeat % len(keys)
            for key in keys[shift:] + keys[:shift]:
                run = DecodeRun(pair, prepared.media, prepared.prompt, settings[key], prepared)
                rate = _decode_rate(run)
                tokens.add(tuple(t for r in run.records for t in r.new_tokens))
                if repeat:
                    per_run[key].append(rate)
                elif key != ("ar", 0):
                    records[key].append(run.records)
        if len(tokens) != 1:
            raise AssertionError(f"{name}: the sweep's greedy runs disagree ({len(tokens)} different outputs)")
        for key in keys:
            rates[key].append(statistics.median(per_run[key]))
        progress(f"  sweep {name}: done")
    return _result(rates, records, budgets, methods, len(cases), repeats)


def _point(method: str, budget: float, runs: list[list[RoundRecord]], speedups: list[float]) -> SweepPoint:
    rounds = [r for run in runs for r in run if r.phase == "decode"]
    forwards = sum(len(run) for run in runs)
    tokens = sum(len(r.new_tokens) for run in runs for r in run)
    tau = statistics.fmean(r.accepted_length for r in rounds) if rounds else 0.0
    nodes = statistics.fmean(r.node_count for r in rounds) if rounds else 0.0
    return SweepPoint(method, budget, tau, tokens / forwards, nodes, statistics.median(speedups))


def _result(
    rates: dict[tuple[str, int], list[float]],
    records: dict[tuple[str, int], list[list[RoundRecord]]],
    budgets: Sequence[int],
    methods: Sequence[str],
    examples: int,
    repeats: int,
) -> SweepResult:
    plain = rates[("ar", 0)]
    speedup = {key: [r / p for r, p in zip(values, plain, strict=True)] for key, values in rates.items()}
    points = tuple(_point(m, b, records[(m, b)], speedup[(m, b)]) for m in methods for b in budgets)
    chosen = []
    for method in choosing_budget():
        runs = records[(method, 0)]
        picked = [chosen_nodes(r) for run in runs for r in run if r.phase == "decode"]
        if picked:
            chosen.append(_point(method, statistics.fmean(picked), runs, speedup[(method, 0)]))
    return SweepResult(points, tuple(chosen), examples, repeats)


def chosen_nodes(record: RoundRecord) -> int:
    """The budget a choosing method took in one round: sage-cost's recorded choice (its own record's), else the
    nodes it verified."""
    own = record.own
    chosen = own.budget_chosen if isinstance(own, SageCostRecord) else None
    return chosen if chosen is not None else record.node_count
