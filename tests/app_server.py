"""Launching the app for the API and browser tests, on the built-in pair or tiny test models."""

from __future__ import annotations

from pathlib import Path

from conftest import tiny_folder

from app.serving import free_port, running_app

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "builtin"


def model_pair(tiny_root: Path) -> tuple[str, str]:
    """The built-in pair when it has been trained, else a tiny Qwen2-VL target with a noised copy as draft."""
    if all((BUILTIN / role / "config.json").is_file() for role in ("target", "draft")):
        return "builtin", "builtin"
    return tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised")


__all__ = ["free_port", "model_pair", "running_app"]
