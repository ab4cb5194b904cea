"""Device-synchronised wall time: what every figure shown to a user is built on."""

from __future__ import annotations

import time

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
