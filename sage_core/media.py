"""Reading the user's image or video into what the processors take.

Video frames are sampled by us at the evenly spaced indices
round(linspace(0, count - 1, N)) and handed to the processor with their
metadata (native fps, frame count, indices), so each family gets its
temporal positions right (see adapter.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from PIL import Image, UnidentifiedImageError

from .errors import MediaError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mov", ".mkv")
MAX_FILE_BYTES = 200 * 1024 * 1024
MAX_IMAGE_PIXELS = 50_000_000
MAX_VIDEO_SECONDS = 600.0
DEFAULT_FRAMES = 8


@dataclass(frozen=True, eq=False)
class Media:
    """An image, or video frames with the metadata the processors need."""

    kind: Literal["image", "video"]
    name: str
    image: Image.Image | None = None
    frames: np.ndarray | None = None  # (T, H, W, 3) uint8, RGB
    fps: float = 0.0
    total_frames: int = 0
    frame_indices: tuple[int, ...] = ()

    @property
    def duration_seconds(self) -> float:
        return self.total_frames / self.fps if self.fps > 0 else 0.0

    def describe(self) -> str:
        if self.kind == "image":
            assert self.image is not None
            return f"image {self.name} ({self.image.width}x{self.image.height})"
        return (
            f"video {self.name} ({len(self.frame_indices)} of {self.total_frames} frames, "
            f"{self.fps:.1f} fps, {self.duration_seconds:.1f} s)"
        )


def sample_indices(count: int, frames: int) -> tuple[int, ...]:
    """round(linspace(0, count - 1, frames)): evenly spaced, first and last included."""
    return tuple(int(i) for i in np.round(np.linspace(0, count - 1, frames)).astype(int))


def load_media(
    path: str | Path,
    frames: int = DEFAULT_FRAMES,
    max_bytes: int = MAX_FILE_BYTES,
    max_video_seconds: float = MAX_VIDEO_SECONDS,
) -> Media:
    """Open an image or a video by its file name; MediaError says what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise MediaError(f"no such file: {path}")
    size = path.stat().st_size
    if size > max_bytes:
        raise MediaError(f"{path.name} is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    suffix = path.suffix.lower()
    if suffix in VIDEO_SUFFIXES:
        return load_video(path, frames, max_video_seconds)
    if suffix in IMAGE_SUFFIXES:
        return load_image(path)
    raise MediaError(
        f"{path.name}: unsupported file type {suffix or '(none)'}; "
        f"use an image ({', '.join(IMAGE_SUFFIXES)}) or a video ({', '.join(VIDEO_SUFFIXES)})"
    )


def load_image(path: Path) -> Media:
    try:
        with Image.open(path) as opened:
            if opened.width * opened.height > MAX_IMAGE_PIXELS:
                raise MediaError(f"{path.name} is {opened.width}x{opened.height}: too many pixels")
            image = opened.convert("RGB")
    except MediaError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
        raise MediaError(f"{path.name} is not a readable image ({type(error).__name__})") from error
    return Media(kind="image", name=path.name, image=image)


def load_video(path: Path, frames: int, max_seconds: float) -> Media:
    import cv2

    if not 1 <= frames <= 64:
        raise MediaError(f"frames must lie in [1, 64], not {frames}")
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            raise MediaError(f"{path.name} is not a readable video")
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = float(capture.get(cv2.CAP_PROP_FPS)) or 0.0
        if count <= 0 or fps <= 0:
            raise MediaError(f"{path.name} is not a readable video (no frames or no frame rate)")
        if count / fps > max_seconds:
            raise MediaError(f"{path.name} lasts {count / fps:.0f} s; the limit is {max_seconds:.0f} s")
        indices = sample_indices(count, min(frames, count))
        images = []
        for index in indices:
            capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, frame = capture.read()
            if not ok:
                raise MediaError(f"{path.name}: frame {index} of {count} cannot be decoded")
            images.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    finally:
        capture.release()
    return Media(
        kind="video",
        name=path.name,
        frames=np.stack(images),
        fps=fps,
        total_frames=count,
        frame_indices=indices,
    )


def image_media(image: Image.Image, name: str = "image") -> Media:
    """Wrap an in-memory image (as the app receives it)."""
    return Media(kind="image", name=name, image=image.convert("RGB"))
