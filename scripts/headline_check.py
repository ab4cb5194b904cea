"""Does the race's headline keep its verdict on a shared machine? A benchmark printout, not a test.

Runs the same races through the route `/race` takes (the app's pair cache, thread choice and warm-up,
`race_steps` in the race slot, `app.api.race_result`) on describe_five and chart, `--races` each, first on a
quiet machine, then while another process spins on one core, then while another visitor exports the landing
race as a GIF and as a WebM over and over (the app's own export thread), and prints each race's headline
(speedup, interval, verdict), the clock's ratio (tokens/s) beside it, the race's own measured time (both
sides' decode time summed) and its wall time. It checks:

- no input says "faster" in one race and "slower" in another;
- quiet: at least 5 of 6 races give a verdict, with an interval at most 0.4 wide;
- busy and exporting: the interval covers the quiet races' median speedup in at least 5 of 6;
- busy and exporting: the median race's measured time is at most 1.6 times the quiet median.

With `--sage-cost` it checks instead that a busy warm-up cannot collapse sage-cost: its τ on describe_five and
chart in an app whose warm-up (where the cost curve is measured) ran quiet, then in a freshly loaded app whose
warm-up ran with one core spinning, in that app's first race and its next one (the core still spinning): each
keeps at least 0.8 of the quiet τ. It prints the curve each app decided from.

    PYTHONPATH=. python scripts/headline_check.py            # 2 x 6 races quiet, then 2 x 6 busy
    PYTHONPATH=. python scripts/headline_check.py --races 1  # a smoke run (thresholds scale with --races)
    PYTHONPATH=. python scripts/headline_check.py --sage-cost

Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from app import models
from app.api import race_result
from app.handlers import last
from app.inputs import load_examples
from app.race import RaceData, RaceRequest, race_steps
from sage_core import load_media, summarize
from sage_core.methods import race_default, rivals

INPUTS = ("describe_five.png", "chart.png")
METHODS = race_default()  # SAGE against the static tree
WIDEST = 0.4
#: The most a race's measured time may grow under load (busy core, another visitor's export) over its quiet time.
MOST_SLOWDOWN = 1.6


def spin() -> None:
    """Hold one core: pinned to the last core where the system allows it."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {(os.cpu_count() or 1) - 1})
    while True:
        pass


def race_of(loaded: models.LoadedPair, name: str, methods: Sequence[str] = METHODS) -> RaceData:
    request = race_request(name, methods)
    return last(race_steps(loaded.pair, request, loaded.token_texts, loaded.slot, costs=loaded.costs))


def race_headline(loaded: models.LoadedPair, name: str) -> dict:
    """The race's headline, with the clock's ratio, its measured time and its wall time beside it."""
    start = time.perf_counter()
    steps = race_steps(loaded.pair, race_request(name), loaded.token_texts, loaded.slot, costs=loaded.costs)
    data = last(models.racing(steps))
    wall = time.perf_counter() - start
    result = race_result(data, with_trace=False)
    measured = sum(lane.records[-1].total_seconds for lane in data.lanes if lane.records)
    clock = next(iter(result["wall_clock_speedups"].values()), math.nan)
    return {**result["headline"], "clock": clock, "measured_s": measured, "wall_s": wall}


def race_request(name: str, methods: Sequence[str] = METHODS) -> RaceRequest:
    example = next(e for e in load_examples() if Path(e.file).name == name)
    return RaceRequest(load_media(example.file), example.prompt, tuple(methods))


def sage_cost_tau(loaded: models.LoadedPair, name: str) -> float:
    """sage-cost's τ (accepted draft tokens per round) in one race beside the static tree."""
    lane = race_of(loaded, name, ("sage-cost", rivals()[0])).lane("sage-cost")
    assert lane is not None
    return summarize(lane.records).mean_accepted


def sage_cost_check() -> list[str]:
    """A busy warm-up against a quiet one (module docstring); every failed check in one sentence each."""
    loaded = models.PAIRS.get("builtin", "builtin")
    print(f"quiet warm-up: {loaded.costs.label() if loaded.costs else 'no curve'}")
    quiet = {name: sage_cost_tau(loaded, name) for name in INPUTS}
    print("quiet: " + ", ".join(f"{name} τ {tau:.2f}" for name, tau in quiet.items()), flush=True)
    models.PAIRS.clear()
    del loaded
    gc.collect()  # the pair's remembered curve goes with its model
    failed = []
    with spinning():
        loaded = models.PAIRS.get("builtin", "builtin")
        print(f"busy warm-up: {loaded.costs.label() if loaded.costs else 'no curve'}", flush=True)
        for which in ("first", "next"):
            for name in INPUTS:
                tau = sage_cost_tau(loaded, name)
                kept = tau / quiet[name] if quiet[name] else float("nan")
                print(f"busy, {which} race: {name} τ {tau:.2f} ({kept:.2f} of quiet)", flush=True)
                if not kept >= 0.8:
                    failed.append(f"{name}: sage-cost's τ in the busy app's {which} race is {kept:.2f} of its quiet τ")
    return failed


@contextmanager
def beside(start: Callable[[], None], stop: Callable[[], None]) -> Iterator[None]:
    """Some other work running while the block runs: started, given a second to settle, stopped after."""
    start()
    try:
        time.sleep(1.0)
        yield
    finally:
        stop()


def spinning() -> AbstractContextManager[None]:
    """Another process spinning on one core while the block runs."""
    spinner = multiprocessing.Process(target=spin, daemon=True)

    def halt() -> None:
        spinner.terminate()
        spinner.join()

    return beside(spinner.start, halt)


def run_all(loaded: models.LoadedPair, races: int, label: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {name: [] for name in INPUTS}
    for _ in range(races):
        for name in INPUTS:  # the inputs alternate, so a slow stretch of the machine hits both
            h = race_headline(loaded, name)
            found[name].append(h)
            low, high = h["interval"]
            print(
                f"{label:>9} {name:<18} {h['speedup']:.2f}x [{low:.2f}, {high:.2f}] {h['verdict']:<9} "
                f"clock {h['clock']:.2f}x  measured {h['measured_s']:.2f} s  wall {h['wall_s']:.2f} s",
                flush=True,
            )
    return found


@contextmanager
def exporting() -> Iterator[None]:
    """Another visitor exporting the landing race as a GIF, then a WebM, over and over, through the app's own
    export thread (`app.export.ExportThread`, which draws each frame between races), while the block runs."""
    import tempfile
    import threading

    from app.export import ExportThread, write_gif, write_webm
    from app.landing import LANDING_TRACE
    from app.race_trace import load_race

    data = load_race(LANDING_TRACE)
    stop = threading.Event()
    folder = Path(tempfile.mkdtemp(prefix="headline-check-"))

    def draw(writer: Callable[..., Iterator[int]], path: Path, halt: Callable[[], bool]) -> Iterator[int]:
        return writer(data, path, stop=halt)

    def keep_exporting() -> None:
        while not stop.is_set():
            for writer, name in ((write_gif, "race.gif"), (write_webm, "race.webm")):
                job = ExportThread(functools.partial(draw, writer, folder / name))
                for _ in job.frames():
                    if stop.is_set():
                        break

    worker = threading.Thread(target=keep_exporting, daemon=True)

    def halt() -> None:
        stop.set()
        worker.join(30)

    with beside(worker.start, halt):
        yield


def checks(quiet: dict[str, list[dict]], loaded: dict[str, dict[str, list[dict]]], races: int) -> list[str]:
    """Every failed check, in one sentence each (`loaded`: the races under each load, by its name)."""
    need = math.ceil(races * 5 / 6)
    failed = []
    for name in INPUTS:
        said = {h["verdict"] for h in (*quiet[name], *(h for found in loaded.values() for h in found[name]))}
        if {"faster", "slower"} <= said:
            failed.append(f"{name}: one race says faster and another slower")
        sure = [h for h in quiet[name] if h["verdict"] != "unclear" and width(h) <= WIDEST]
        if len(sure) < need:
            failed.append(f"{name}: quiet, {len(sure)} of {races} verdicts with an interval <= {WIDEST} wide")
        median = statistics.median(h["speedup"] for h in quiet[name])
        quiet_time = statistics.median(h["measured_s"] for h in quiet[name])
        for load, found in loaded.items():
            covered = [h for h in found[name] if h["interval"][0] <= median <= h["interval"][1]]
            if len(covered) < need:
                failed.append(
                    f"{name}: {load}, {len(covered)} of {races} intervals cover the quiet median {median:.2f}"
                )
            slower = statistics.median(h["measured_s"] for h in found[name]) / quiet_time
            if slower > MOST_SLOWDOWN:
                failed.append(f"{name}: {load}, the median race took {slower:.2f} times its quiet time")
    return failed


def width(h: dict) -> float:
    return h["interval"][1] - h["interval"][0]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--races", type=int, default=6, help="races per input and machine state (default 6)")
    parser.add_argument("--sage-cost", action="store_true", help="check sage-cost's τ after a busy warm-up instead")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    if args.sage_cost:
        failed = sage_cost_check()
    else:
        loaded = models.PAIRS.get("builtin", "builtin")
        curve = loaded.costs
        threads = loaded.threads.describe() if loaded.threads else "not chosen"
        print(f"cost curve in use: {curve.label() if curve else 'none'}; threads: {threads}")
        quiet = run_all(loaded, args.races, "quiet")
        with spinning():
            busy = run_all(loaded, args.races, "busy")
        with exporting():
            exported = run_all(loaded, args.races, "exporting")
        failed = checks(quiet, {"busy": busy, "exporting": exported}, args.races)
    for line in failed or ["every check holds"]:
        print(("FAILED: " if failed else "") + line)
    print(f"{time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
