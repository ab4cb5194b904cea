"""The app's pruning pieces: the control's ratios, a pruned race (same texts, the labels), and the
picture of what the draft sees."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from app.inputs import resolve_prune_ratio
from app.panels import DIMMED, draft_view_caption, draft_view_image
from app.pruning_panel import show_draft_view
from app.race import RaceRequest, race_steps
from app.render import lane_html
from app.view import race_view
from sage_core.errors import InputError
from sage_core.media import Media, image_media


def test_the_control_gives_the_papers_ratios_or_the_chosen_one():
    assert resolve_prune_ratio("off", 0.7, "image") == 0.0
    assert resolve_prune_ratio("paper", 0.7, "image") == 0.8
    assert resolve_prune_ratio("paper", 0.7, "video") == 0.9
    assert resolve_prune_ratio("chosen", 0.7, "video") == 0.7
    with pytest.raises(InputError, match=r"\[0, 1\)"):
        resolve_prune_ratio("chosen", 1.0, "image")
    with pytest.raises(InputError, match="unknown pruning choice"):
        resolve_prune_ratio("most", 0.5, "image")
    with pytest.raises(InputError, match="must be a number in"):
        resolve_prune_ratio("chosen", "abc", "image")


def test_the_picture_dims_the_pruned_patches():
    white = image_media(Image.new("RGB", (40, 40), "white"), "white.png")
    boxes = [(0, 0, x / 2, y / 2, (x + 1) / 2, (y + 1) / 2) for y in range(2) for x in range(2)]
    picture = np.asarray(draft_view_image(white, boxes, kept=[1]))
    height, width = picture.shape[:2]
    assert picture[height // 4, 3 * width // 4].tolist() == [255, 255, 255]  # kept: top right
    for y, x in ((1, 1), (3, 1), (3, 3)):  # pruned: the other quarters
        assert picture[y * height // 4, x * width // 4].tolist() == [round(255 * DIMMED)] * 3
    frames = np.full((4, 20, 20, 3), 200, np.uint8)
    video = Media("video", "v.mp4", frames=frames, fps=2.0, total_frames=4, frame_indices=(0, 1, 2, 3))
    sheet = draft_view_image(video, [(0, 1, 0.0, 0.0, 1.0, 1.0), (2, 3, 0.0, 0.0, 1.0, 1.0)], kept=[1])
    tiles = np.asarray(sheet)
    tile = sheet.width // 4  # four frames side by side (4 px gaps)
    assert tiles[5, 2].tolist() == [round(200 * DIMMED)] * 3  # frame 0: its token was pruned
    assert tiles[5, sheet.width - tile // 2].tolist() == [200, 200, 200]  # frame 3: kept


@pytest.mark.parametrize("kind", ["image", "video"])
def test_a_pruned_race_has_the_same_texts_labels_and_a_picture(tiny_pair, image, video, kind):
    pair = tiny_pair("qwen2_vl")
    media = image if kind == "image" else video
    ratio = resolve_prune_ratio("paper", 0.0, kind)
    races = list(race_steps(pair, RaceRequest(media, "Describe it.", ("sage", "static", "ar"), 12, prune_ratio=ratio)))
    data = races[-1]
    texts = {lane.method: lane.text for lane in data.lanes}
    assert texts["sage"] == texts["static"] == texts["ar"]
    headers = {lane.method: lane.header for lane in data.lanes}
    assert headers["ar"].prune_ratio == 0 and headers["ar"].kept_visual_indices is None
    assert headers["sage"].kept_visual_indices and headers["sage"].prune_ratio == ratio
    race = race_view(data)
    assert "SAGE + pruning" in lane_html(race.lanes[0], race)
    assert "SD-Tree + pruning (SpecVLM)" in lane_html(race.lane("static"), race)
    assert "Plain AR" in lane_html(race.lane("ar"), race)
    update, caption = show_draft_view(data)
    assert update["visible"] is True and isinstance(update["value"], Image.Image)
    kept = len(headers["sage"].kept_visual_indices)
    assert f"reads {kept} of {headers['sage'].visual_tokens} visual tokens" in caption
    assert draft_view_caption(headers["ar"]).startswith("The draft reads every visual token")
