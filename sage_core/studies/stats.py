"""The studies' one interval: a mean and the half-width of its normal 95 % interval."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def interval(values: Sequence[float]) -> tuple[float, float]:
    """Mean and the half-width of its normal 95 % interval (NaN for fewer than two values)."""
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return mean, half
