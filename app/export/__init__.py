"""A finished race (or a replay) for slides: one self-contained HTML file, an animated GIF and a WebM video.

The HTML file holds Plotly's offline bundle, the race's frames and a small player, so it replays in
any browser with no server and no network; it opens in the talk view's layout (the texts, the verdict,
panel ① and the round's tree on one 1280 x 720 screen; the explainer and panels ③–⑤ below). A frame
carries only what changed since the one before (`patch`: the new end of a text, the new points of a
panel), and the player rebuilds each frame from them, so the file grows with the race's length, not
with its square. The GIF is drawn from the records with PIL (`slides_gif`): no browser.

    python -m app.export race.jsonl --html race.html --gif race.gif --webm race.webm

Every export has a budget (`Budget`: frames, seconds, bytes), said in one sentence before it starts;
a race longer than its frames is sampled evenly (first and last rounds kept), and an export that
passes its time or size stops and says which bound it passed, within a frame as well as between
frames (the GIF's drawing runs the budget's check as it goes). A token's text is shown cut to
`slides_gif.TOKEN_CHARS` characters with a mark (…), in the HTML file as in the GIF, so no token makes a
frame slow or large.

The page's buttons run the export on a thread of its own (`ExportThread`), one frame each time the
page's generator asks (`export_job`); while a frame is drawn the generator yields its progress line
again every `HEARTBEAT_S` seconds, so that Gradio can close it when the visitor leaves (it cannot close a
generator while it runs). Closed, it stops the thread within the frame (the drawing's check) and its
partial file is removed; a thread whose page stops asking for `PATIENCE_S` seconds stops as well.
Exports take slots of their own (`ExportSlots`: small ones never wait behind large ones) outside the
races' concurrency group, a slot is given back only when its thread has stopped, and a visitor keeps one
export file of each kind, every one remembered in their session's list and removed with it (`forget_export`).

Every frame is drawn by the app's own pure renderers (`render`, `panels`, `explain_view`) from the
recorded records; nothing is measured here.

The package, by concern: `budget` (what an export may spend and its check: the one home of its cost),
`frame_format` (the frames and their patches), `files` (where an export writes), `player` (the HTML replay),
`slides` (the GIF and the WebM), `jobs` (the page's buttons: slots, threads, a visitor's files) and `cli`
(the page's wiring and the command line). Every name importers use is here.
"""

from __future__ import annotations

from .budget import GIF_BUDGET, HTML_BUDGET, Budget, ExportError, Spend, Stopped, never_stops
from .cli import main, wire_export
from .files import SUFFIXES, cannot_write, export_plan, open_for_writing, writable, written_beside
from .frame_format import (
    FRAME_MS,
    GIF_SIZE,
    PANEL_ORDER,
    TEXT_START,
    cut_record,
    for_showing,
    frame,
    frame_steps,
    frames,
    patch,
    race_at,
    rounds_of,
    script_json,
)
from .jobs import (
    EXPORT_DIR,
    EXPORTS,
    HEARTBEAT_S,
    JOIN_S,
    KEPT_LOCK,
    PATIENCE_S,
    SLOTS,
    SMALL_ROUNDS,
    ExportSlots,
    ExportThread,
    Slot,
    export_job,
    forget_export,
    gif_file,
    hidden,
    keep_export,
    kept_files,
    run_export,
    slides_file,
    video_file,
)
from .player import PAGE_CSS, PLAYER_JS, page_head, page_tail, save_html, talk_panels, write_html
from .slides import drawn_slides, save_gif, save_webm, write_gif, write_webm

__all__ = [
    "EXPORTS",
    "EXPORT_DIR",
    "FRAME_MS",
    "GIF_BUDGET",
    "GIF_SIZE",
    "HEARTBEAT_S",
    "HTML_BUDGET",
    "JOIN_S",
    "KEPT_LOCK",
    "PAGE_CSS",
    "PANEL_ORDER",
    "PATIENCE_S",
    "PLAYER_JS",
    "SLOTS",
    "SMALL_ROUNDS",
    "SUFFIXES",
    "TEXT_START",
    "Budget",
    "ExportError",
    "ExportSlots",
    "ExportThread",
    "Slot",
    "Spend",
    "Stopped",
    "cannot_write",
    "cut_record",
    "drawn_slides",
    "export_job",
    "export_plan",
    "for_showing",
    "forget_export",
    "frame",
    "frame_steps",
    "frames",
    "gif_file",
    "hidden",
    "keep_export",
    "kept_files",
    "main",
    "never_stops",
    "open_for_writing",
    "page_head",
    "page_tail",
    "patch",
    "race_at",
    "rounds_of",
    "run_export",
    "save_gif",
    "save_html",
    "save_webm",
    "script_json",
    "slides_file",
    "talk_panels",
    "video_file",
    "wire_export",
    "writable",
    "write_gif",
    "write_html",
    "write_webm",
    "written_beside",
]
