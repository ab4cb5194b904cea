"""Verification cost, measured: what a tree of N nodes and a draft level cost on this device.

Speculative decoding pays off when a target forward over a tree costs little
more than a forward over one token, and a draft level costs little. Both
ratios depend on the device, the dtype and the models; nothing here assumes
them. `measure_costs` times, after a prompt's prefill:

- the target's verification of trees of 1, 2, 4, ... 64 nodes (one forward over
  the root and the nodes under tree attention, then the host copy of its argmax,
  as a round does), and its one-token step (plain decoding's forward);
- the draft's forward over a level of 1, 2, 4, ... 64 nodes and its top-k.

Each point is the median of `repeats` device-synchronised runs after
`warmup` untimed ones; the scratch entries are dropped after each, so every
run reads the same cache. `CostCurve.predicted_rate` turns a run's rounds
into the tokens per second these costs predict, so the speedup they predict
can stand beside the measured one.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy
import torch

from ..backends import ModelBackend, open_backend
from ..config import Backend
from ..cost_curve import COST_SIZES, TREE_WIDTH, CostCurve
from ..drafting import top_candidates
from ..media import Media
from ..models import KVState, ModelPair
from ..prepared import prepare_inputs, with_draft_inputs
from ..records import RoundRecord
from ..timing import median_ms
from ..trees import Tree
from ..verify import verify_forward

if TYPE_CHECKING:
    from ..proposers import Drafter


def measure_cost_spread(
    pair: ModelPair, media: Media, prompt: str, backend: Backend = "fast", passes: int = 9, warmup: int = 2
) -> CostCurve:
    """The curve of `measure_costs` with a spread: `passes` passes over every time in turn after `warmup`
    untimed ones (so a busy moment of the machine hits every size alike), each time the median of its
    passes and its spread their interquartile range; `CostCurve.noise` then names the points that are noise."""
    if passes < 4 or warmup < 0:
        raise ValueError("the spread needs at least 4 passes and warmup >= 0")
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, prompt))
    target, draft = open_backend(pair.target, backend), open_backend(pair.draft, backend, draft=True)
    assert prepared.draft is not None
    with torch.inference_mode():
        prefilled = target.prefill(prepared.target, COST_SIZES[-1] + 2)
        target_state, logits = prefilled.state, prefilled.logits
        draft_state = draft.prefill(prepared.draft, COST_SIZES[-1] + 2).state
    root, vocab = int(logits.argmax()), pair.shared_vocab_size
    trees = [measured_tree(n, root) for n in (0, *COST_SIZES)]
    runs = [functools.partial(_verify_once, target, target_state, root, tree) for tree in trees]
    runs += [functools.partial(_draft_level_once, draft, draft_state, root, n, vocab) for n in COST_SIZES]
    medians, spreads = _interleaved(runs, pair.devices, passes, warmup)
    n = len(COST_SIZES)
    dtype = str(pair.target.dtype).removeprefix("torch.")
    return CostCurve(
        str(pair.device),
        dtype,
        backend,
        COST_SIZES,
        medians[0],
        tuple(medians[1 : 1 + n]),
        tuple(medians[1 + n :]),
        spreads[0],
        tuple(spreads[1 : 1 + n]),
        tuple(spreads[1 + n :]),
        passes,
    )


def _interleaved(
    runs: Sequence[Callable[[], object]], devices: Sequence[torch.device], passes: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Each run's median time and interquartile range (ms) over `passes` passes over all of them in turn."""
    times: list[list[float]] = [[] for _ in runs]
    with torch.inference_mode():
        for number in range(warmup + passes):
            for run, kept in zip(runs, times, strict=True):
                milliseconds = median_ms(run, devices, 1, 0)
                if number >= warmup:
                    kept.append(milliseconds)
    spreads = [float(numpy.percentile(ms, 75) - numpy.percentile(ms, 25)) for ms in times]
    return [statistics.median(ms) for ms in times], spreads


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


def measure_costs(
    pair: ModelPair,
    media: Media,
    prompt: str,
    backend: Backend = "fast",
    sizes: Sequence[int] = COST_SIZES,
    repeats: int = 5,
    warmup: int = 2,
) -> CostCurve:
    """Time the target's verification and the draft's levels after this prompt's prefill (module docstring)."""
    sizes = tuple(sorted(set(sizes)))
    if not sizes or sizes[0] < 1 or repeats < 1 or warmup < 0:
        raise ValueError("the cost curve needs node counts >= 1, at least one repeat and warmup >= 0")
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, prompt))
    target, draft = open_backend(pair.target, backend), open_backend(pair.draft, backend, draft=True)
    assert prepared.draft is not None
    with torch.inference_mode():
        prefilled = target.prefill(prepared.target, sizes[-1] + 2)
        target_state, logits = prefilled.state, prefilled.logits
        draft_state = draft.prefill(prepared.draft, sizes[-1] + 2).state
    dtype = str(pair.target.dtype).removeprefix("torch.")
    timing = _Timing(pair.devices, sizes, repeats, warmup)
    caches = PrefilledCaches(target, target_state, draft, draft_state, int(logits.argmax()), pair.shared_vocab_size)
    one, verify_ms, level_ms = timing.curve(caches)
    return CostCurve(str(pair.device), dtype, backend, sizes, one, verify_ms, level_ms)


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


@dataclass(frozen=True)
class _Timing:
    devices: Sequence[torch.device]
    sizes: tuple[int, ...]
    repeats: int
    warmup: int

    def curve(self, caches: PrefilledCaches) -> tuple[float, tuple[float, ...], tuple[float, ...]]:
        """The one-token step, the verify times and the draft-level times (ms) on prefilled caches."""
        with torch.inference_mode():
            one = self.median(caches.verify_run(0))
            verify = tuple(self.median(caches.verify_run(n)) for n in self.sizes)
            levels = tuple(self.median(caches.level_run(n)) for n in self.sizes)
        return one, verify, levels

    def median(self, run: Callable[[], object]) -> float:
        return median_ms(run, self.devices, self.repeats, self.warmup)


@dataclass(frozen=True)
class CurveSettings:
    """How a curve on prefilled caches is measured and labelled (`curve_on_prefilled`)."""

    device: torch.device
    dtype: str
    backend: str
    sizes: Sequence[int] = COST_SIZES
    repeats: int = 5
    warmup: int = 2


def curve_on_prefilled(caches: PrefilledCaches, settings: CurveSettings) -> CostCurve:
    """The curve on caches a caller prefilled itself (text-only prompts, no processors)."""
    timing = _Timing((settings.device,), tuple(sorted(set(settings.sizes))), settings.repeats, settings.warmup)
    one, verify_ms, level_ms = timing.curve(caches)
    return CostCurve(str(settings.device), settings.dtype, settings.backend, timing.sizes, one, verify_ms, level_ms)


def predicted_speedups(curve: CostCurve, runs: Mapping[str, Sequence[RoundRecord]], lead: str) -> dict[str, float]:
    """The lead method's predicted decode-only tokens/s over each other method's, by the curve."""
    rates = {m: curve.predicted_rate(records) for m, records in runs.items()}
    mine = rates.get(lead)
    if mine is None:
        return {}
    return {m: mine / r for m, r in rates.items() if m != lead and r}


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


def read_recorded_curve(path: Path) -> CostCurve | None:
    """A curve recorded with a pair (JSON: `CostCurve`'s fields), labelled "recorded with the pair"; None
    when the file is missing or not a trusted curve."""
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
        lists = ("sizes", "verify_ms", "draft_level_ms", "verify_spread_ms", "draft_spread_ms")
        curve = CostCurve(**{**fields, **{k: tuple(fields[k]) for k in lists if k in fields}})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    curve = replace(curve, origin="recorded with the pair")
    return curve if curve.trusted else None


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
        return CostCurve(str(pair.device), dtype, backend, COST_SIZES, one, verify, levels)

    curve = settled_curve(measure, passes=(RUN_PASSES, 2 * RUN_PASSES))
    remember_curve(pair, backend, curve)  # (only when trusted: else the next run measures again)
    return curve
