"""Device-synchronised wall time: what every figure shown to a user is built on."""

from __future__ import annotations

import time
from collections.abc import Iterable

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Stopwatch:
    """Seconds between two synchronised points: `with Stopwatch(d) as s: ...; s.seconds`."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self._start


class Laps:
    """A step's wall time and its parts, with one synchronisation per device per step.

    The clock starts when made, without synchronising: the step before ended
    with a synchronisation, so the device is idle. `lap()` reads the clock
    without synchronising: call it right after a device-to-host copy (a
    `.tolist()`), which has waited for the device already. `stop()`
    synchronises once and returns the whole step's seconds.
    """

    def __init__(self, devices: Iterable[torch.device]) -> None:
        self.devices = tuple(dict.fromkeys(devices))
        self._start = self._last = time.perf_counter()

    def lap(self) -> float:
        """Seconds since the last lap (or the start)."""
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        return seconds

    def stop(self) -> float:
        for device in self.devices:
            synchronize(device)
        return time.perf_counter() - self._start
