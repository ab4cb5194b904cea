"""The GIF and the WebM: the slides drawn with PIL (`slides_gif.slide`) from the records, no browser."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .. import slides_gif, slides_video
from ..race import RaceData
from ..view import race_view
from .budget import GIF_BUDGET, Budget, ExportError, Spend, never_stops
from .files import export_plan, written_beside
from .frame_format import FRAME_MS, GIF_SIZE, race_at, rounds_of


def drawn_slides(
    shown: RaceData, steps: Sequence[int], spend: Spend, title: str, stop: Callable[[], bool]
) -> Iterator[Any]:
    """The GIF's and the video's slides, one a round of `steps`, each drawn under the export's budget and its
    visitor's leaving (`Spend.watch`, checked before and within the frame)."""
    rounds = rounds_of(shown)
    for count, step in enumerate(steps):
        check = spend.watch(count, len(steps), stop)
        check()
        yield slides_gif.slide(race_view(race_at(shown, step)), rounds, title, check)


def write_gif(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = GIF_BUDGET,
    stop: Callable[[], bool] = never_stops,
) -> Iterator[int]:
    """Draw the GIF frame by frame with PIL (no browser), yielding after each frame; stopped (`stop`,
    checked within a frame as the budget is) or failed, it leaves no partial file. At most
    `budget.frames` palette frames are held (0.9 MB each)."""
    path, steps, spend, shown = export_plan(data, path, budget, "gif")
    pictures = []
    palette = slides_gif.slide_palette()
    with written_beside(path) as temp:
        for count, picture in enumerate(drawn_slides(shown, steps, spend, title, stop), 1):
            pictures.append(slides_gif.palette_frame(picture, palette))
            yield count
        durations = [FRAME_MS] * (len(pictures) - 1) + [3 * FRAME_MS]  # hold the end
        slides_gif.write_gif(pictures, temp, durations)


def write_webm(
    data: RaceData,
    path: str | Path,
    title: str = "SAGE race",
    budget: Budget = GIF_BUDGET,
    stop: Callable[[], bool] = never_stops,
) -> Iterator[int]:
    """The GIF's frames as a WebM video (VP9, 1280 x 720, one frame a round at `FRAME_MS`, the end held),
    encoded as they are drawn (one frame held at a time); stopped or failed, it leaves no partial file."""
    path, steps, spend, shown = export_plan(data, path, budget, "webm")
    try:
        with written_beside(path) as temp:
            with slides_video.video(temp, GIF_SIZE) as writer:
                for count, picture in enumerate(drawn_slides(shown, steps, spend, title, stop), 1):
                    slides_video.add_frame(writer, picture, 3 if count == len(steps) else 1)  # (the end held)
                    yield count
            spend.bytes = temp.stat().st_size
            spend.check(len(steps), len(steps))
    except slides_video.VideoError as error:
        raise ExportError(str(error)) from error


def save_webm(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = GIF_BUDGET) -> Path:
    for _ in write_webm(data, path, title, budget):
        pass
    return Path(path)


def save_gif(data: RaceData, path: str | Path, title: str = "SAGE race", budget: Budget = GIF_BUDGET) -> Path:
    for _ in write_gif(data, path, title, budget):
        pass
    return Path(path)
