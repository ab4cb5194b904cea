"""The transformers and torch versions the library supports, checked at import, and the one
difference between them that the forwards meet: the name of the forward's cache argument.

transformers renamed the forward's `past_key_values=` to `cache=` between 5.17 and 5.24; a forward
that does not know the name it is given swallows it in `**kwargs` and silently runs without the
project's cache, so the name is read from the model's own signature (`cache_keyword`).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Protocol

from packaging.version import Version

from .errors import VersionError

# (lowest supported, first unsupported): the ranges pyproject.toml states. The lower ends are the
# lent GPU machine's image (torch 2.11.0, transformers 5.17.0); CI tests transformers 5.17 and the pins.
SUPPORTED: Mapping[str, tuple[str, str]] = {"transformers": ("5.17", "5.25"), "torch": ("2.11", "2.15")}
# set to 1 to import with versions outside the ranges (at your own risk: the lossless tests did not run there)
SKIP_VARIABLE = "SAGE_SKIP_VERSION_CHECK"


def installed_versions() -> dict[str, str]:
    """The installed version of each package in `SUPPORTED` ("none" where it is missing)."""
    found = {}
    for name in SUPPORTED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "none"
    return found


def version_problem(installed: Mapping[str, str]) -> str | None:
    """One sentence naming each package outside its range, its installed and its needed version; None if all fit."""
    wrong = []
    for name, (low, high) in SUPPORTED.items():
        version = installed.get(name, "none")
        if version == "none" or not Version(low) <= Version(Version(version).base_version) < Version(high):
            # (a local or pre-release build, 2.11.0+cu130, counts as its base version)
            wrong.append(f"{name} {version} is installed but sage_core needs {name}>={low},<{high}")
    if not wrong:
        return None
    advice = f"install the pinned versions with `pip install -r requirements.txt`, or set {SKIP_VARIABLE}=1 to try"
    return "; ".join(wrong) + f" ({advice})"


def check_versions(installed: Mapping[str, str] | None = None) -> None:
    """Raise `VersionError` (one sentence) when torch or transformers is outside the supported range."""
    if os.environ.get(SKIP_VARIABLE, "") == "1":
        return
    problem = version_problem(installed_versions() if installed is None else installed)
    if problem is not None:
        raise VersionError(problem)


class _Forwarding(Protocol):
    forward: Callable[..., Any]


def cache_keyword(model: _Forwarding) -> str:
    """The name under which `model`'s forward takes the KV cache: `cache` (transformers >= 5.24) or
    `past_key_values` (5.17)."""
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


check_versions()  # at import of sage_core (its __init__ imports this module first)
