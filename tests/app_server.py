"""Launching the app for the API and browser tests, on the built-in pair or tiny test models."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import tiny_folder

from app.inputs import Limits
from app.models import CustomModels
from app.ui import build_demo, launch_options, queued

ROOT = Path(__file__).resolve().parent.parent
BUILTIN = ROOT / "assets" / "builtin"


def model_pair(tiny_root: Path) -> tuple[str, str]:
    """The built-in pair when it has been trained, else a tiny Qwen2-VL target with a noised copy as draft."""
    if all((BUILTIN / role / "config.json").is_file() for role in ("target", "draft")):
        return "builtin", "builtin"
    return tiny_folder(tiny_root, "qwen2_vl", "target"), tiny_folder(tiny_root, "qwen2_vl", "noised")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_app(
    target: str, draft: str, limits: Limits | None = None, custom: CustomModels | None = None, **options: float
) -> Iterator[str]:
    """The app on a free loopback port, queued and launched as app.py does; yields its URL."""
    demo = build_demo(default_target=target, default_draft=draft, limits=limits, custom=custom, **options)
    queued(demo, limits).launch(
        server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
        **launch_options(limits),
    )  # fmt: skip
    try:
        yield demo.local_url
    finally:
        demo.close()
