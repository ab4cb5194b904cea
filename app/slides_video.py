"""A race as a video for slides: the GIF's frames (`slides_gif.slide`) written as a WebM (VP9), no browser.

The pip build of OpenCV encodes VP9 in WebM but not H.264 (its FFmpeg has no H.264 encoder), so the video
is a WebM: Chrome, Firefox, Edge, Safari 14.1 and later, and PowerPoint 365 play it. Frames are encoded as
they are drawn, so the memory an export holds is one frame whatever the race's length. One frame a round
at `FRAME_MS`, the last held three times as long, as in the GIF.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from sage_core.errors import SageError

#: How long a round is shown (ms), the GIF's and the HTML player's pace.
FRAME_MS = 900
#: OpenCV's name for VP9.
CODEC = "VP90"


class VideoError(SageError):
    """A video this machine's OpenCV cannot write."""


def open_video(path: Path, size: tuple[int, int]) -> Any:
    """An OpenCV writer of a VP9 WebM at one frame a round (VideoError when this OpenCV cannot encode VP9)."""
    import cv2

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*CODEC), 1000 / FRAME_MS, size)
    if not writer.isOpened():
        raise VideoError("this server's OpenCV cannot encode VP9 video: export the GIF or the HTML replay instead")
    return writer


def add_frame(writer: Any, picture: Image.Image, times: int = 1) -> None:
    """One slide, shown `times` rounds long."""
    frame = np.ascontiguousarray(np.asarray(picture.convert("RGB"))[:, :, ::-1])  # RGB -> OpenCV's BGR
    for _ in range(times):
        writer.write(frame)


@contextlib.contextmanager
def video(path: Path, size: tuple[int, int]) -> Iterator[Any]:
    """A writer released however its block ends."""
    writer = open_video(path, size)
    try:
        yield writer
    finally:
        writer.release()


__all__ = ["CODEC", "FRAME_MS", "VideoError", "add_frame", "open_video", "video"]
