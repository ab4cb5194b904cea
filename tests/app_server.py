"""Launching the app for the API and browser tests, on the built-in pair or tiny test models."""

from __future__ import annotations

from pathlib import Path

from app.inputs import RACE_FIELDS, RaceForm
from app.serving import free_port, running_app
from sage_testkit.pairs import tiny_folder

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "builtin"


def model_pair(tiny_root: Path) -> tuple[str, str]:
    """The built-in pair when it has been trained, else a tiny Qwen2-VL target with a noised copy as draft."""
    if all((BUILTIN / role / "config.json").is_file() for role in ("target", "draft")):
        return "builtin", "builtin"
    return tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised")


def form_values(**fields: object) -> list:
    """The page's race inputs in their order (`app.inputs.RACE_FIELDS`), the form's defaults where not
    given (the built-in pair, SAGE against the static tree): what a hand-written call of the streamed
    race or of the raw API sends before its endpoint's own last inputs."""
    form = RaceForm(**{"pair": "builtin", "methods": ["sage", "static"]} | fields)
    return [getattr(form, name) for name in RACE_FIELDS]


__all__ = ["form_values", "free_port", "model_pair", "running_app"]
