"""The cost curve a run decides from (sage-cost, SMART), measured on its own prefilled caches the first time and
remembered for the pair's later runs: what a round of each size costs on this device, timed below the methods
that read it (the studies' measurements, `studies/costs.py`, use the same timed forwards).

Each timed forward's scratch entries are dropped after it, so every run reads the same cache; each point is
the fastest of several interleaved passes, then the straight line fitted to them (`_fastest_pass_curve`). A
curve shared by every visitor's runs is never made worse (`remember_curve`), and one that does not settle to
its stated precision is set aside (`settled_curve`).
"""

from __future__ import annotations

import functools
import math
import statistics
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ..backends import ModelBackend
from ..cost_curve import COST_SIZES, TREE_WIDTH, CostCurve
from ..drafting import top_candidates
from ..models import KVState, ModelPair
from ..proposers import Drafter
from ..timing import median_ms
from ..trees import Tree
from ..verify import verify_forward


def measured_tree(nodes: int, token: int) -> Tree:
    """A tree of `nodes` nodes, `TREE_WIDTH` children per node in breadth-first order."""
    parents = tuple(-1 if i < TREE_WIDTH else (i - TREE_WIDTH) // TREE_WIDTH for i in range(nodes))
    return Tree((token,) * nodes, parents, (0.5,) * nodes)


def _verify_once(target: ModelBackend, state: KVState, root: int, tree: Tree) -> None:
    verify_forward(target, state, root, tree).argmax(dim=-1).tolist()
    target.commit(state, [])


def _draft_level_once(draft: ModelBackend, state: KVState, token: int, nodes: int, vocab: int) -> None:
    logits = draft.extend(state, [token] * nodes, positions=[state.committed] * nodes, parents=[-1] * nodes)
    top_candidates(logits, min(10, vocab), vocab)
    draft.commit(state, [])


@dataclass(frozen=True)
class PrefilledCaches:
    """Both models' caches after a prompt's prefill, the token a round's root would be and the shared
    vocabulary: what the timings run on (every timed forward's scratch entries are dropped after it)."""

    target: ModelBackend
    target_state: KVState
    draft: ModelBackend
    draft_state: KVState
    root: int
    vocab: int

    def verify_run(self, nodes: int) -> Callable[[], None]:
        """One verification of a measured tree of `nodes` nodes (0: the one-token step)."""
        return functools.partial(
            _verify_once, self.target, self.target_state, self.root, measured_tree(nodes, self.root)
        )

    def level_run(self, nodes: int) -> Callable[[], None]:
        """One draft level over `nodes` nodes and its top-k."""
        return functools.partial(_draft_level_once, self.draft, self.draft_state, self.root, nodes, self.vocab)


#: Curves measured for runs, per target model: {(backend, the draft model's id): curve}. Keyed weakly, so a
#: pair that is let go takes its curves with it; a curve describes models and a device, never a user.
_RUN_CURVES: weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple[str, int], CostCurve]] = weakref.WeakKeyDictionary()
#: The run-time measurement: passes over every size in turn (so a busy moment of the machine hits all
#: sizes alike), each point the fastest of its passes (interference only ever adds time).
RUN_PASSES = 7


def _fastest_pass_curve(
    caches: PrefilledCaches,
    devices: Sequence[torch.device],
    sizes: tuple[int, ...] = COST_SIZES,
    passes: int = RUN_PASSES,
) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
    """The one-token step, the verify and draft-level times (ms): the fastest of `passes` interleaved passes
    after one untimed one; the verify and draft-level times then as the straight line (cost = a + b * nodes,
    b >= 0) fitted to them by least squares, so one point timed at a busy moment does not make one size
    look dearer than its neighbours (on a busy 2-core machine single points were off by half)."""
    runs = [caches.verify_run(0), *(caches.verify_run(n) for n in sizes), *(caches.level_run(n) for n in sizes)]
    best = [math.inf] * len(runs)
    with torch.inference_mode():
        for number in range(passes + 1):
            for index, run in enumerate(runs):
                milliseconds = median_ms(run, devices, 1, 0)
                if number:
                    best[index] = min(best[index], milliseconds)
    return best[0], line_fit(sizes, best[1 : 1 + len(sizes)]), line_fit(sizes, best[1 + len(sizes) :])


def line_fit(sizes: Sequence[int], values: Sequence[float]) -> tuple[float, ...]:
    """The least-squares line through (size, value), its slope at least 0, read at each size."""
    mean_x, mean_y = statistics.fmean(sizes), statistics.fmean(values)
    spread = sum((x - mean_x) ** 2 for x in sizes)
    slope = (
        max(0.0, sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, values, strict=True)) / spread)
        if spread
        else 0.0
    )
    intercept = mean_y - slope * mean_x
    if intercept <= 0:  # a line through the origin's side: keep the smallest measured cost as the floor
        intercept = min(values)
    return tuple(intercept + slope * x for x in sizes)


def remember_curve(pair: ModelPair, backend: str, curve: CostCurve) -> bool:
    """Let runs of this pair on this backend use a curve measured elsewhere (the app's warm-up); whether it
    was taken. The curve every visitor's runs share is never made worse: a curve with `problems` is never
    taken, and a trusted one replaces only a recorded fallback or no curve, never a measured one."""
    if not curve.trusted:
        return False
    known = _RUN_CURVES.setdefault(pair.target.model, {})
    held = known.get((backend, id(pair.draft.model)))
    if held is not None and held.origin == "measured" and curve.origin != "measured":
        return False
    known[(backend, id(pair.draft.model))] = curve
    return True


def known_curve(pair: ModelPair, backend: str) -> CostCurve | None:
    """The curve this pair's runs on this backend decide from (None: the next run measures one)."""
    return _RUN_CURVES.get(pair.target.model, {}).get((backend, id(pair.draft.model)))


#: The passes of each measurement `settled_curve` makes before it sets the measurement aside: more each time,
#: so a busy machine's spread can still settle to the stated precision (`NOISY_SPREAD`).
SETTLE_PASSES = (9, 25)


def settled_curve(
    measure: Callable[[int], CostCurve], fallback: CostCurve | None = None, passes: Sequence[int] = SETTLE_PASSES
) -> CostCurve:
    """A curve measured to its stated precision: `measure(passes)` again, over more passes each time, until
    it has no `problems` (noise, non-monotone, insane ratios). When none settles, `fallback` (a curve recorded
    with the pair) labelled with why the measurement was set aside; without one, the measurement with the
    fewest problems, which `remember_curve` will not let any run decide from."""
    tries = []
    for count in passes:
        curve = replace(measure(count), measured_at=utc_now())
        if curve.trusted:
            return curve
        tries.append(curve)
    best = min(tries, key=lambda c: len(c.problems()))
    if fallback is None:
        return best
    why = f"{len(tries)} measurements did not settle ({'; '.join(best.problems()[:2])})"
    return replace(fallback, set_aside=why)


def utc_now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def costs_for_run(
    pair: ModelPair, backend: str, target: ModelBackend, target_state: KVState, drafter: Drafter, root: int
) -> CostCurve:
    """The pair's cost curve on this backend: measured on this run's prefilled caches the first time (they are
    left as they were), remembered for the pair's later runs."""
    known = known_curve(pair, backend)
    if known is not None:
        return known
    dtype = str(pair.target.dtype).removeprefix("torch.")
    caches = PrefilledCaches(target, target_state, drafter.backend, drafter.state, root, drafter.vocab)

    def measure(passes: int) -> CostCurve:
        one, verify, levels = _fastest_pass_curve(caches, pair.devices, passes=passes)
        return CostCurve(
            str(pair.device), dtype, backend, COST_SIZES, one, verify, levels, threads=torch.get_num_threads()
        )

    curve = settled_curve(measure, passes=(RUN_PASSES, 2 * RUN_PASSES))
    remember_curve(pair, backend, curve)  # (only when trusted: else the next run measures again)
    return curve
