"""The page's draft-side pruning pieces (SpecVLM): the control and the picture of what the draft sees.

The control picks off, the paper's ratios (80% of an image's visual tokens, 90% of a video's) or a
chosen ratio, for every side of a race that drafts (`inputs.resolve_prune_ratio`). After a race the
picture shows the image, or each sampled frame, with the patches the draft did not read dimmed
(`panels.draft_view_image`), from the kept indices in the runs' headers.
"""

from __future__ import annotations

import html
from typing import Any

import gradio as gr

from .panels import draft_view_caption, draft_view_image
from .race import RaceData

CHOICES = [
    ("Off: the draft reads every visual token", "off"),
    ("Paper: prune 80% of an image's, 90% of a video's", "paper"),
    ("Chosen ratio", "chosen"),
]


def pruning_controls() -> tuple[gr.Radio, gr.Slider]:
    choice = gr.Radio(CHOICES, value="off", label="Draft-side visual token pruning (SpecVLM)", elem_id="prune-choice")
    chosen = gr.Slider(0.0, 0.95, value=0.5, step=0.05, label="Pruned share of the visual tokens (chosen ratio)")
    return choice, chosen


def draft_view_outputs() -> tuple[gr.Image, gr.HTML]:
    picture = gr.Image(label="What the draft sees", visible=False, interactive=False, elem_id="draft-view", height=190)
    note = gr.HTML("", elem_id="draft-view-note")
    return picture, note


def show_draft_view(data: RaceData | None) -> tuple[Any, str]:
    """The picture and its caption after a race (hidden when the race did not prune)."""
    if data is None or data.draft_view is None:
        return gr.update(visible=False, value=None), ""
    header = next((lane.header for lane in data.lanes if lane.header and lane.header.kept_visual_indices), None)
    if header is None or header.kept_visual_indices is None:
        return gr.update(visible=False, value=None), ""
    media, boxes = data.draft_view
    picture = draft_view_image(media, boxes, header.kept_visual_indices)
    caption = html.escape(draft_view_caption(header))
    return gr.update(visible=True, value=picture), f"<div class='sage-sub'>{caption}</div>"
