"""The app on a free loopback port, queued and launched as app.py does (for scripts and tests)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import gradio as gr

from .inputs import Limits
from .models import CustomModels
from .ui import build_demo, launch_options, queued


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_demo(
    target: str, draft: str, limits: Limits | None = None, custom: CustomModels | None = None, **options: float
) -> Iterator[tuple[gr.Blocks, str]]:
    """The app on a free loopback port, queued and launched as app.py does; yields it and its URL."""
    demo = build_demo(default_target=target, default_draft=draft, limits=limits, custom=custom, **options)
    queued(demo, limits).launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        prevent_thread_lock=True,
        quiet=True,
        **launch_options(limits),
    )
    try:
        url = demo.local_url
        assert url is not None  # set by launch()
        yield demo, url
    finally:
        demo.close()


@contextmanager
def running_app(
    target: str, draft: str, limits: Limits | None = None, custom: CustomModels | None = None, **options: float
) -> Iterator[str]:
    """The app on a free loopback port, queued and launched as app.py does; yields its URL."""
    with running_demo(target, draft, limits, custom, **options) as (_, url):
        yield url
