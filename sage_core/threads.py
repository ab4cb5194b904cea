"""The CPU threads torch runs a pair's forwards on: as asked, or chosen for the pair by measurement.

On a small CPU shared with other processes (a free Space, a speaker's laptop), torch's default of one
thread per core makes a tiny pair's forwards many times slower and their times erratic: each forward is a
few hundred small operations, and every one of them hands work to the other threads and waits for all of
them, so one busy core stalls every step (measured on the built-in pair, 2 cores, one kept busy by another
process: plain decoding 0.35 s at 1 thread against 1.16 s at 2). A large pair's matrix products are big
enough for more threads to pay. So the count is the pair's:

* asked for (a flag, then `SAGE_THREADS`, then `OMP_NUM_THREADS`, then `MKL_NUM_THREADS`, the first one
  given) and used as given; else
* measured (`choose_threads`): the target's one-token step at 1, 2, 4, … threads up to the cores this
  process may use, in interleaved passes; the fewest threads whose step is within `MORE_THREADS_GAIN` of the
  fastest, because a thread that buys little on an idle machine costs much on a busy one.

A pair on a GPU keeps torch's count (its forwards wait on the device, not on the CPU's threads), unless one
is asked for. The choice is process-wide (`torch.set_num_threads`): the app sets its pair's count around every
step of a race (`ThreadChoice.apply`), so two pairs never run on each other's count.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from PIL import Image

from .config import DecodeConfig
from .decode import decode
from .errors import ConfigError
from .media import image_media
from .records import MAX_THREADS

if TYPE_CHECKING:
    from .models import ModelPair

#: Where a count may be asked for, first given first (a flag given on the command line comes before them all).
THREAD_VARIABLES = ("SAGE_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: More threads are chosen only when they make the one-token step at least this many times faster than the
#: fewest threads within reach of it: on a busy machine an extra thread costs far more than it buys here.
MORE_THREADS_GAIN = 1.25
#: Interleaved passes over the candidate counts, and plain decoding steps timed in each.
MEASURE_PASSES = 3
MEASURE_STEPS = 6


def available_cores() -> int:
    """The cores this process may run on (its affinity where the system says it, else every core)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count a pair runs on, where it came from, and what was measured to choose it."""

    threads: int
    #: "measured", "asked (--threads)", a variable's name ("SAGE_THREADS", ...), "the GPU's pair: torch's
    #: default", or "one core".
    source: str
    cores: int
    #: The target's one-token step (ms, median of the passes) at each count tried; empty when not measured.
    step_ms: Mapping[int, float] = field(default_factory=dict)

    def apply(self) -> None:
        """Make torch run on this count (process-wide; cheap when it already does)."""
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def describe(self) -> str:
        """The choice in words, for the machine line: "1 thread of 2 cores (measured: one-token step ...)"."""
        count = f"{self.threads} thread{'s' * (self.threads != 1)} of {self.cores} core{'s' * (self.cores != 1)}"
        if not self.step_ms:
            return f"{count} ({self.source})"
        steps = ", ".join(f"{ms:.2f} ms at {n}" for n, ms in sorted(self.step_ms.items()))
        return f"{count} (measured: one-token step {steps})"

    def as_dict(self) -> dict[str, object]:
        """For `--json`, `/race` and the benchmark's report."""
        return {
            "threads": self.threads,
            "source": self.source,
            "cores": self.cores,
            "step_ms": {str(n): round(ms, 4) for n, ms in sorted(self.step_ms.items())},
        }


def parse_threads(text: str, where: str) -> int:
    """A thread count as given (`where` names the flag or variable in the refusal): a whole number 1-256."""
    try:
        count = int(text.strip())
    except ValueError:
        raise ConfigError(f"{where} must be a whole number of threads, 1-{MAX_THREADS}, not {text[:40]!r}") from None
    if not 1 <= count <= MAX_THREADS:
        raise ConfigError(f"{where} must be 1-{MAX_THREADS} threads, not {count}")
    return count


def asked_threads(flag: int | None = None, environ: Mapping[str, str] | None = None) -> tuple[int, str] | None:
    """The count asked for and where: the flag, else the first of `THREAD_VARIABLES` set (an empty one is
    unset); None when none is. A count out of range or not a number is refused in one sentence."""
    if flag is not None:
        return parse_threads(str(flag), "--threads"), "asked (--threads)"
    env = os.environ if environ is None else environ
    for name in THREAD_VARIABLES:
        value = env.get(name, "").strip()
        if value:
            return parse_threads(value, name), name
    return None


def candidate_counts(cores: int) -> tuple[int, ...]:
    """1, 2, 4, … up to the cores, and the cores themselves."""
    counts = [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    if counts[-1] != cores:
        counts.append(cores)
    return tuple(counts)


def pick(step_ms: Mapping[int, float]) -> int:
    """The fewest threads whose step is within `MORE_THREADS_GAIN` of the fastest count's."""
    fastest = min(step_ms.values())
    return min(n for n, ms in step_ms.items() if ms <= fastest * MORE_THREADS_GAIN)


def one_token_step_ms(pair: ModelPair, steps: int = MEASURE_STEPS) -> float:
    """The target's one-token step on this pair now (ms): the median of a short plain decode's rounds, each
    timed with device synchronisation by the decode loop itself."""
    media = image_media(Image.new("RGB", (112, 112), (255, 255, 255)), "thread count")
    run = decode(pair, media, "describe the image.", DecodeConfig(method="ar", max_new_tokens=steps + 1))
    run.run_to_end()
    rounds = [r.round_seconds for r in run.records if r.phase == "decode"]
    if not rounds:  # (the target ended its answer at once: its prefill is the one forward timed)
        rounds = [r.round_seconds for r in run.records]
    return 1000 * statistics.median(rounds)


def choose_threads(
    pair: ModelPair,
    flag: int | None = None,
    environ: Mapping[str, str] | None = None,
    measure: Callable[[ModelPair], float] = one_token_step_ms,
    passes: int = MEASURE_PASSES,
) -> ThreadChoice:
    """The pair's thread count, applied (`ThreadChoice.apply`): as asked (`asked_threads`), else measured on
    a CPU pair (`measure`: the one-token step in ms, timed at each candidate count in `passes` interleaved
    passes, after one untimed pass), else torch's own count for a GPU pair."""
    cores = available_cores()
    asked = asked_threads(flag, environ)
    if asked is not None:
        choice = ThreadChoice(asked[0], asked[1], cores)
    elif pair.device.type != "cpu":
        choice = ThreadChoice(torch.get_num_threads(), "a GPU pair: torch's default", cores)
    elif cores == 1:
        choice = ThreadChoice(1, "one core", cores)
    else:
        counts = candidate_counts(cores)
        times: dict[int, list[float]] = {n: [] for n in counts}
        for index in range(passes + 1):
            for n in counts if index % 2 else reversed(counts):
                torch.set_num_threads(n)
                ms = measure(pair)
                if index:  # the first pass warms each count up, untimed
                    times[n].append(ms)
        step_ms = {n: statistics.median(t) for n, t in times.items()}
        choice = ThreadChoice(pick(step_ms), "measured", cores, step_ms)
    choice.apply()
    return choice


def current_choice(source: str = "torch's count as set") -> ThreadChoice:
    """What torch runs on now, unmeasured (for a run whose caller set the count itself)."""
    return ThreadChoice(torch.get_num_threads(), source, available_cores())
