"""ZeroGPU on Hugging Face Spaces: `spaces.GPU` when the package is there, a no-op otherwise.

On a ZeroGPU Space a GPU is attached only while a function decorated with
`spaces.GPU` runs (generators included); elsewhere the decorator does
nothing, so the same code runs on a laptop, a dedicated GPU, or in CI.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

try:  # pragma: no cover - only where the `spaces` package is installed
    import spaces as _spaces
except ImportError:
    _spaces = None

# Spaces sets SPACES_ZERO_GPU=true on ZeroGPU hardware.
ZERO_GPU = _spaces is not None and os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def gpu(duration: int = 120) -> Callable[[F], F]:
    """Decorate a handler that needs the GPU for up to `duration` seconds."""

    def decorate(fn: F) -> F:
        if _spaces is None:
            return fn
        return _spaces.GPU(duration=duration)(fn)

    return decorate
