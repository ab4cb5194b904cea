"""ZeroGPU on Hugging Face Spaces: `spaces.GPU` when the package is there, a no-op otherwise.

On a ZeroGPU Space a GPU is attached only while a function decorated with
`spaces.GPU` runs (generators included); elsewhere the decorator does
nothing, so the same code runs on a laptop, a dedicated GPU, or in CI.

A race asks for the GPU time its size needs (`race_seconds`: the pair, the
methods, the max new tokens), with headroom, rather than a fixed two minutes:
ZeroGPU refuses a call that asks for more than a visitor's quota has left, so
a short race should not ask for a long one's time.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable
from typing import Any, SupportsFloat, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

try:  # pragma: no cover - only where the `spaces` package is installed
    import spaces as _spaces
except ImportError:
    _spaces = None

# Spaces sets SPACES_ZERO_GPU=true on ZeroGPU hardware.
ZERO_GPU = _spaces is not None and os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")

#: Seconds a call needs whatever its size: moving the pair to the GPU, the processors, the prefills.
STARTUP_SECONDS = 10.0
#: Seconds to load a hub pair that is not loaded yet (the default pair is loaded at start).
LOAD_SECONDS = 30.0
#: Seconds per new token per side of the race (a generous bound for a round's share, prefill aside):
#: the built-in pair is tiny (a forward is kernel-launch time), a 7B target in bfloat16 is not.
BUILTIN_SECONDS_PER_TOKEN = 0.01
HUB_SECONDS_PER_TOKEN = 0.05
#: What a race asks for is this many times the estimate, within these bounds.
HEADROOM = 1.5
MIN_SECONDS, MAX_SECONDS = 15, 300
#: The methods a race runs when the call names none, and the token count when it names none or nonsense.
DEFAULT_METHODS = 2
FALLBACK_TOKENS = 512


def race_seconds(max_new_tokens: object, methods: object, pair: object) -> int:
    """The GPU seconds to ask for a race of `max_new_tokens` on each of `methods` with `pair`
    (a preset key: the built-in pairs start with "builtin"); odd values ask for the most a valid
    race could need, so the handler can refuse them itself."""
    try:
        tokens = float(max_new_tokens) if isinstance(max_new_tokens, str | SupportsFloat) else math.nan
    except ValueError:
        tokens = math.nan
    tokens = tokens if math.isfinite(tokens) and tokens >= 1 else FALLBACK_TOKENS
    sides = len(set(methods)) if isinstance(methods, list | tuple | set) and methods else DEFAULT_METHODS
    builtin = isinstance(pair, str) and pair.startswith("builtin")
    per_token = BUILTIN_SECONDS_PER_TOKEN if builtin else HUB_SECONDS_PER_TOKEN
    estimate = STARTUP_SECONDS + (0.0 if builtin else LOAD_SECONDS) + min(tokens, 4096) * sides * per_token
    return int(min(max(math.ceil(estimate * HEADROOM), MIN_SECONDS), MAX_SECONDS))


def race_duration(fn: Callable[..., Any]) -> Callable[..., int]:
    """A function of `fn`'s call arguments (as `spaces.GPU` passes them) giving `race_seconds`."""
    signature = inspect.signature(fn)

    def duration(*args: Any, **kwargs: Any) -> int:
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:
            bound = {}
        return race_seconds(bound.get("max_new_tokens"), bound.get("methods"), bound.get("pair"))

    return duration


def gpu(duration: int | Callable[..., int] = 120) -> Callable[[F], F]:
    """Decorate a handler that needs the GPU for up to `duration` seconds (or a function of its
    arguments giving the seconds)."""

    def decorate(fn: F) -> F:
        if _spaces is None:
            return fn
        return _spaces.GPU(duration=duration)(fn)

    return decorate


def gpu_for_race(fn: F) -> F:
    """Decorate a race handler: it asks for what its race needs (`race_duration`)."""
    return gpu(duration=race_duration(fn))(fn)
