"""A race as a video for slides: the GIF's frames (`slides_gif.slide`) written as a WebM (VP9), no browser.

The pip build of OpenCV encodes VP9 in WebM but not H.264 (its FFmpeg has no H.264 encoder), so the video
is a WebM: Chrome, Firefox, Edge, Safari 14.1 and later, and PowerPoint 365 play it. Frames are encoded as
they are drawn, so the memory an export holds is one frame whatever the race's length. One frame a round
at `FRAME_MS`, the last held three times as long, as in the GIF.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
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
#: FFmpeg's note, through OpenCV, for a WebM writer given a codec tag (see `without_tag_note`).
TAG_NOTE = b"is not supported with codec id"
#: Held while a writer opens with stderr caught.
QUIET = threading.Lock()


class VideoError(SageError):
    """A video this machine's OpenCV cannot write."""


@contextlib.contextmanager
def without_tag_note() -> Iterator[None]:
    """The process's stderr (fd 2) caught while OpenCV opens a WebM writer and given back after, less FFmpeg's
    note that the codec tag is "not supported": the WebM muxer has no use for a tag, OpenCV prints the note with
    a raw fprintf (no log level silences it) and writes VP9 all the same. Whatever else was printed meanwhile is
    printed after; one writer opens at a time (`QUIET`), so fd 2 is always given back to what it was."""
    with QUIET, tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().splitlines(keepends=True) if TAG_NOTE not in line]
            if kept:
                os.write(2, b"".join(kept))


def open_video(path: Path, size: tuple[int, int]) -> Any:
    """An OpenCV writer of a VP9 WebM at one frame a round (VideoError when this OpenCV cannot encode VP9)."""
    import cv2

    with without_tag_note():
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


__all__ = ["CODEC", "FRAME_MS", "VideoError", "add_frame", "open_video", "video", "without_tag_note"]
