"""The export's wiring on the page (`wire_export`) and its command line (`python -m app.export`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import gradio as gr

from sage_core.errors import SageError

from ..inputs import Limits
from ..page import Page
from ..race_trace import load_race
from .budget import GIF_BUDGET, HTML_BUDGET
from .frame_format import rounds_of
from .jobs import forget_export, gif_file, slides_file, video_file
from .player import save_html
from .slides import save_gif, save_webm


def wire_export(page: Page) -> None:
    """The Export for slides buttons. They run outside the races' concurrency group, with no Gradio limit
    (so they never wait in, or fill, the queue the races share): `ExportSlots` takes or refuses at once."""
    kept: gr.State = gr.State([], delete_callback=forget_export)  # the visitor's export files, removed with them
    outputs = [page.slides_file, page.status, kept]
    group = {"api_visibility": "private", "concurrency_limit": None, "concurrency_id": "sage-export"}
    page.slides.click(slides_file, [page.state, kept], outputs, **group)
    if page.gif is not None:
        page.gif.click(gif_file, [page.state, kept], outputs, **group)
    if page.video_export is not None:
        page.video_export.click(video_file, [page.state, kept], outputs, **group)


# -- the command line --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.export", description="A race trace for slides.")
    parser.add_argument("trace", help="a race trace (.jsonl), as the app's Download trace or sage --trace saves")
    parser.add_argument("--html", help="write a self-contained HTML replay here")
    parser.add_argument("--gif", help="write an animated GIF of the race here (drawn with PIL: no browser)")
    parser.add_argument("--webm", help="write a WebM video (VP9) of the GIF's frames here (no browser)")
    parser.add_argument("--title", default="SAGE race")
    args = parser.parse_args(argv)
    if not args.html and not args.gif and not args.webm:
        parser.error("say what to write: --html, --gif and/or --webm")
    try:
        data = load_race(args.trace, max_bytes=Limits.from_env().max_trace_bytes)
        data.replay = True
        rounds = rounds_of(data)
        if args.html:
            print(HTML_BUDGET.sentence(rounds, "HTML replay"))
            print(f"wrote {save_html(data, args.html, args.title)}")
        if args.gif:
            print(GIF_BUDGET.sentence(rounds, "GIF"))
            print(f"wrote {save_gif(data, args.gif, args.title)}")
        if args.webm:
            print(GIF_BUDGET.sentence(rounds, "WebM video"))
            print(f"wrote {save_webm(data, args.webm, args.title)}")
    except SageError as error:  # (TraceError is one)
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
