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

import json
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy
import torch

from ..backends import open_backend
from ..config import Backend
from ..cost_curve import COST_SIZES, CostCurve
from ..media import Media
from ..methods.run_costs import PrefilledCaches
from ..models import ModelPair
from ..prepared import prepare_inputs, with_draft_inputs
from ..records import RoundRecord
from ..timing import median_ms


def measure_cost_spread(
    pair: ModelPair, media: Media, prompt: str, backend: Backend = "fast", passes: int = 9, warmup: int = 2
) -> CostCurve:
    """The curve of `measure_costs` with a spread: `passes` passes over every time in turn after `warmup`
    untimed ones (so a busy moment of the machine hits every size alike), each time the median of its
    passes and its spread their interquartile range; `CostCurve.noise` then names the points that are noise."""
    if passes < 4 or warmup < 0:
        raise ValueError("the spread needs at least 4 passes and warmup >= 0")
    caches = prefilled_caches(pair, media, prompt, backend, COST_SIZES[-1])
    runs = [caches.verify_run(n) for n in (0, *COST_SIZES)] + [caches.level_run(n) for n in COST_SIZES]
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
        threads=torch.get_num_threads(),
    )


def prefilled_caches(pair: ModelPair, media: Media, prompt: str, backend: Backend, nodes: int) -> PrefilledCaches:
    """Both models' caches after this prompt's prefill, with room for a tree of `nodes` nodes and its root."""
    prepared = with_draft_inputs(pair, prepare_inputs(pair, media, prompt))
    target, draft = open_backend(pair.target, backend), open_backend(pair.draft, backend, draft=True)
    assert prepared.draft is not None
    with torch.inference_mode():
        prefilled = target.prefill(prepared.target, nodes + 2)
        draft_state = draft.prefill(prepared.draft, nodes + 2).state
    root = int(prefilled.logits.argmax())
    return PrefilledCaches(target, prefilled.state, draft, draft_state, root, pair.shared_vocab_size)


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
    dtype = str(pair.target.dtype).removeprefix("torch.")
    timing = _Timing(pair.devices, sizes, repeats, warmup)
    one, verify_ms, level_ms = timing.curve(prefilled_caches(pair, media, prompt, backend, sizes[-1]))
    return CostCurve(str(pair.device), dtype, backend, sizes, one, verify_ms, level_ms, threads=torch.get_num_threads())


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
    return CostCurve(
        str(settings.device),
        settings.dtype,
        settings.backend,
        timing.sizes,
        one,
        verify_ms,
        level_ms,
        threads=torch.get_num_threads(),
    )


def predicted_speedups(curve: CostCurve, runs: Mapping[str, Sequence[RoundRecord]], lead: str) -> dict[str, float]:
    """The lead method's predicted decode-only tokens/s over each other method's, by the curve."""
    rates = {m: curve.predicted_rate(records) for m, records in runs.items()}
    mine = rates.get(lead)
    if mine is None:
        return {}
    return {m: mine / r for m, r in rates.items() if m != lead and r}


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


__all__ = [  # (the run-time curve, remembered and settled per pair: methods/run_costs.py)
    "CurveSettings",
    "curve_on_prefilled",
    "measure_cost_spread",
    "measure_costs",
    "predicted_speedups",
    "prefilled_caches",
    "read_recorded_curve",
]
