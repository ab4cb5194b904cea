"""Reading the user's image or video into what the processors take.

Video frames are sampled by us at the evenly spaced indices
round(linspace(0, count - 1, N)) and handed to the processor with their
metadata (native fps, frame count, indices), so each family gets its
temporal positions right (see models/prompts.py).

Pictures are read as a viewer shows them (`as_shown`): the EXIF orientation
applied (phone photos), transparency composited on white, 16-bit and float
grey scaled to 8 bits, palette, LA, CMYK and 1-bit pictures converted to RGB.
Images above MAX_IMAGE_PIXELS are refused; video frames above
MAX_FRAME_PIXELS (1920 x 1080) are shrunk to it as they are read, and frames
above MAX_VIDEO_FRAME_PIXELS (40 million) are refused before any is decoded.
Reading a video decodes at most `decode_limit` frames (MAX_STREAMED_FPS a
second of its time limit, fewer for frames above 1920 x 1080), however few
keyframes it has: one with too few is refused before any frame is decoded.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from .errors import InputError, MediaError, kind_of

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff")
VIDEO_SUFFIXES = (".mp4", ".webm", ".avi", ".mov", ".mkv")
MAX_FILE_BYTES = 200 * 1024 * 1024
MAX_IMAGE_PIXELS = 50_000_000
#: Video frames are shrunk to at most this many pixels as they are read (1920 x 1080).
MAX_FRAME_PIXELS = 1920 * 1080
#: A video whose frames are larger than this is refused before any frame is decoded (from the size its header
#: states). 8K video (7680 x 4320, 33 million; DCI 8K 8192 x 4320, 35 million) fits; the models read a few hundred
#: thousand pixels, and frames are shrunk to MAX_FRAME_PIXELS as they are read, so a larger frame only costs
#: memory: decoding one takes about 7.2 bytes a pixel (a 16000 x 8000 Motion JPEG frame took 927 MB), so about
#: 290 MB a frame here, against 1.4 GB at the former bound of 200 million.
MAX_VIDEO_FRAME_PIXELS = 40_000_000
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
    # A video's frame size as stored, when its frames were shrunk to MAX_FRAME_PIXELS on reading.
    stored_size: tuple[int, int] | None = None
    # How long `load_media` took to read it (s): the app counts it in the race's time budget.
    load_seconds: float = field(default=0.0, compare=False)

    @property
    def duration_seconds(self) -> float:
        return self.total_frames / self.fps if self.fps > 0 else 0.0

    def describe(self) -> str:
        if self.kind == "image":
            assert self.image is not None
            return f"image {self.name} ({self.image.width}x{self.image.height})"
        shrunk = ""
        if self.stored_size is not None and self.frames is not None:
            width, height = self.stored_size
            shrunk = (
                f", frames shrunk from {width}x{height} to {self.frames.shape[2]}x{self.frames.shape[1]} "
                f"(the cap is {MAX_FRAME_PIXELS:,} pixels a frame)"
            )
        return (
            f"video {self.name} ({len(self.frame_indices)} of {self.total_frames} frames, "
            f"{self.fps:.1f} fps, {self.duration_seconds:.1f} s{shrunk})"
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
    """Open an image or a video by its file name; MediaError says what is wrong. The medium records how long
    reading it took (`load_seconds`)."""
    started = time.monotonic()
    media = read_media(Path(path), frames, max_bytes, max_video_seconds)
    return replace(media, load_seconds=time.monotonic() - started)


def read_media(path: Path, frames: int, max_bytes: int, max_video_seconds: float) -> Media:
    """The image or video at `path`, within the byte, time and pixel limits."""
    if not path.is_file():
        raise MediaError(f"no such file: {path}")
    size = path.stat().st_size
    if size > max_bytes:
        raise MediaError(f"{path.name} is {size / 2**20:.0f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    suffix = path.suffix.lower()
    if suffix in VIDEO_SUFFIXES and is_still_picture(path):  # a picture whose name says video: read as what it is
        return load_image(path)
    if suffix in VIDEO_SUFFIXES:
        return load_video(path, frames, max_video_seconds)
    if suffix in IMAGE_SUFFIXES:
        return load_image(path)
    raise MediaError(
        f"{path.name}: unsupported file type {suffix or '(none)'}; "
        f"use an image ({', '.join(IMAGE_SUFFIXES)}) or a video ({', '.join(VIDEO_SUFFIXES)})"
    )


#: The picture formats of the image suffixes (PNG, JPEG, WebP, BMP, GIF, TIFF), by their contents.
STILL_FORMATS = frozenset(Image.registered_extensions()[suffix] for suffix in IMAGE_SUFFIXES)


def is_still_picture(path: Path) -> bool:
    """Whether the file holds one still picture of a format the image suffixes name, whatever its name says (a
    PNG named `.mp4`): read from its header only; an animated GIF or WebP is left to the video reader."""
    try:
        with Image.open(path) as opened:
            return opened.format in STILL_FORMATS and not getattr(opened, "is_animated", False)
    except Exception:  # (not a picture PIL knows, or one it cannot read: the video reader says what is wrong)
        return False


def load_image(path: Path) -> Media:
    try:
        with Image.open(path) as opened:
            if opened.width * opened.height > MAX_IMAGE_PIXELS:
                raise MediaError(f"{path.name} is {opened.width}x{opened.height}: too many pixels")
            image = as_shown(opened)
    except MediaError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as error:
        raise MediaError(f"{path.name} is not a readable image ({type(error).__name__})") from error
    return Media(kind="image", name=path.name, image=image)


def load_video(path: Path, frames: int, max_seconds: float) -> Media:
    """`frames` evenly spaced frames of a video, read as a player shows them (transparency on white). A video
    whose container states its frame count is read in one pass that seeks only past a keyframe (`read_plan`);
    one written as a stream (a browser's MediaRecorder WebM: no duration, no cues, a frame count OpenCV reads
    as negative) or whose stated count is wrong is read frame by frame (`read_streamed`). Both decode at most
    `decode_limit` frames; the frame size is checked from the header before any frame is decoded."""
    import cv2

    if not 1 <= frames <= 64:
        raise MediaError(f"frames must lie in [1, 64], not {frames}")
    capture = open_capture(path)
    try:
        count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
        fps = float(capture.get(cv2.CAP_PROP_FPS)) or 0.0
        if fps <= 0 or not math.isfinite(fps):
            raise MediaError(f"{path.name} is not a readable video (no frames or no frame rate)")
        width, height = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        check_frame_size(path, width, height)
        if count > 0 and count / fps > max_seconds:
            raise MediaError(f"{path.name} lasts {count / fps:.0f} s; the limit is {max_seconds:.0f} s")
        limit = decode_limit(max_seconds, width, height)
        indices = sample_indices(count, min(frames, count)) if count > 0 else ()
        images = None
        if indices:
            seeks, decoded = read_plan(indices, keyframes(path, count))
            if decoded > limit:
                raise MediaError(too_costly(path, len(indices), count, decoded, limit))
            images = read_planned(capture, indices, seeks)
    finally:
        capture.release()
    if images is None:  # no stated frame count, or a frame not where the count said: read it as a stream
        count, fps, indices, images = read_streamed(path, frames, fps, max_seconds, limit)
    return Media(
        kind="video",
        name=path.name,
        frames=np.stack(images),
        fps=fps,
        total_frames=count,
        frame_indices=indices,
        stored_size=(width, height) if width * height > MAX_FRAME_PIXELS else None,
    )


def check_frame_size(path: Path, width: int, height: int) -> None:
    """MediaError when the header's frame size is above MAX_VIDEO_FRAME_PIXELS (nothing decoded yet)."""
    if width * height > MAX_VIDEO_FRAME_PIXELS:
        raise MediaError(
            f"{path.name} has {width}x{height} frames: too many pixels (the limit is "
            f"{MAX_VIDEO_FRAME_PIXELS / 1e6:.0f} million a frame)"
        )


#: The pixel formats (OpenCV's CAP_PROP_CODEC_PIXEL_FORMAT, a FOURCC) whose frames carry an alpha channel
#: OpenCV hands over as BGRA when asked for the decoded frame as it is (CAP_PROP_CONVERT_RGB off).
ALPHA_PIXEL_FORMATS = ("BGRA",)
#: Reading a video decodes at most this many frames a second of its time limit (`decode_limit`), whatever
#: frame rate the file claims and however few keyframes it has.
MAX_STREAMED_FPS = 120
#: OpenCV's FFmpeg reader seeks to frame i from the last keyframe at or before frame i - 16.
SEEK_LEAD = 16


def decode_limit(max_seconds: float, width: int = 0, height: int = 0) -> int:
    """How many frames reading a video may decode: MAX_STREAMED_FPS a second of its time limit, a frame above
    MAX_FRAME_PIXELS counting for its size (one of 3840 x 2160 counts 4). Measured on 2 cores, a frame of a
    one-keyframe MPEG-4 clip decodes in 0.2 ms at 1280 x 720, 0.6 ms at 1920 x 1080, 5.4 ms at 3840 x 2160
    and 17 ms at 7680 x 4320, so the limit of a 60 s clip (7,201 frames of 1920 x 1080, 1,801 of 3840 x 2160,
    451 of 7680 x 4320) is at most about 10 s of decoding."""
    weight = max(1.0, width * height / MAX_FRAME_PIXELS)
    return math.ceil(max_seconds * MAX_STREAMED_FPS / weight) + 1


def too_costly(path: Path, wanted: int, count: int, decoded: int, limit: int) -> str:
    return (
        f"{path.name} has too few keyframes to read: sampling {wanted} of its {count:,} frames would decode "
        f"{decoded:,} of them, and the limit is {limit:,} for this clip (a shorter clip, a lower frame rate or "
        "more keyframes would do)"
    )


def open_capture(path: Path) -> Any:
    """An OpenCV capture of the video, set to hand over BGRA frames when the video has alpha; MediaError when
    OpenCV cannot open it."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    if not capture.isOpened():
        capture.release()
        raise MediaError(f"{path.name} is not a readable video")
    code = int(capture.get(cv2.CAP_PROP_CODEC_PIXEL_FORMAT))
    name = code.to_bytes(4, "little", signed=False).decode("latin-1") if 0 < code < 2**32 else ""
    if name in ALPHA_PIXEL_FORMATS:
        capture.set(cv2.CAP_PROP_CONVERT_RGB, 0)
    return capture


def keyframes(path: Path, count: int) -> list[int]:
    """The indices of the keyframes among the video's first `count` packets, read without decoding anything
    (OpenCV's raw FFmpeg mode: 10,000 packets in 0.02 s); [] when that mode cannot read the file (then every
    frame is reached by decoding from the first)."""
    import cv2

    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG, [cv2.CAP_PROP_FORMAT, -1])
    found: list[int] = []
    try:
        if capture.isOpened():
            for index in range(count):
                if not capture.grab():
                    break
                if capture.get(cv2.CAP_PROP_LRF_HAS_KEY_FRAME) > 0:
                    found.append(index)
    finally:
        capture.release()
    return found


def read_plan(indices: tuple[int, ...], keys: list[int]) -> tuple[list[bool], int]:
    """How to reach the (increasing) frame indices in one pass: for each, whether to seek to it (when a
    keyframe lies past the frames decoded so far, seeking decodes fewer) or to decode on to it; and how many
    frames that decodes in all (at most the last index + 1). Seeking to every index instead decoded a
    10,000-frame one-keyframe clip 8 times over from its start (43 s)."""
    seeks, decoded, position = [], 0, 0  # position: the frame the next grab decodes
    for index in indices:
        before = bisect_right(keys, max(0, index - SEEK_LEAD)) - 1
        key = keys[before] if before >= 0 else 0
        seek = key > position
        decoded += index - (key if seek else position) + 1
        seeks.append(seek)
        position = index + 1
    return seeks, decoded


def read_planned(capture: Any, indices: tuple[int, ...], seeks: list[bool]) -> list[np.ndarray] | None:
    """The frames at `indices`, reached as `read_plan` says (seeking, or grabbing the frames between without
    converting them); None when one is not there (then the stated frame count was wrong, and the video is
    read as a stream)."""
    import cv2

    images, position = [], 0
    for index, seek in zip(indices, seeks, strict=True):
        if seek:
            capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            position = index
        while position < index:
            if not capture.grab():
                return None
            position += 1
        ok, frame = capture.read()
        position += 1
        if not ok or frame is None:
            return None
        images.append(shown_frame(frame))
    return images


def read_streamed(
    path: Path, frames: int, stated_fps: float, max_seconds: float, limit: int
) -> tuple[int, float, tuple[int, ...], list[np.ndarray]]:
    """A video read as a stream, as a browser plays it: once to count its frames (refused past `max_seconds`
    by the frames' timestamps, or past `limit` frames), then again to keep the evenly spaced ones (only those
    are held). Its frame count, frame rate (from the timestamps when they run forward and the stated one is
    more than 5 % off, else as stated), the indices kept and their frames."""
    count, last_ms = count_streamed(path, max_seconds, limit)
    if count == 0:
        raise MediaError(f"{path.name} is not a readable video (no frame could be decoded)")
    measured = (count - 1) * 1000.0 / last_ms if count > 1 and last_ms > 0 else stated_fps
    fps = stated_fps if abs(measured - stated_fps) <= 0.05 * stated_fps else measured  # a claimed rate that is wrong
    if count / fps > max_seconds:  # (timestamps that never ran forward: its frames at the stated rate)
        raise MediaError(too_long(path, max_seconds))
    indices = sample_indices(count, min(frames, count))
    wanted, images = set(indices), []
    capture = open_capture(path)
    try:
        for index in range(count):
            if not capture.grab():
                raise MediaError(f"{path.name}: frame {index} of {count} cannot be decoded")
            if index in wanted:
                ok, frame = capture.retrieve()
                if not ok or frame is None:
                    raise MediaError(f"{path.name}: frame {index} of {count} cannot be decoded")
                images.append(shown_frame(frame))
    finally:
        capture.release()
    return count, fps, indices, images


def count_streamed(path: Path, max_seconds: float, limit: int) -> tuple[int, float]:
    """How many frames a video read as a stream decodes to, and the last one's timestamp (ms); MediaError
    once it runs past `max_seconds` (by its timestamps) or past `limit` frames (`decode_limit`)."""
    import cv2

    count, last_ms = 0, 0.0
    capture = open_capture(path)
    try:
        while capture.grab():
            count += 1
            stamp = float(capture.get(cv2.CAP_PROP_POS_MSEC))
            last_ms = stamp if math.isfinite(stamp) and stamp > last_ms else last_ms
            if last_ms / 1000.0 > max_seconds or count > limit:
                raise MediaError(too_long(path, max_seconds))
    finally:
        capture.release()
    return count, last_ms


def too_long(path: Path, max_seconds: float) -> str:
    return f"{path.name} lasts longer than the limit of {max_seconds:.0f} s"


def shown_frame(frame: np.ndarray) -> np.ndarray:
    """A decoded frame (BGR, BGRA or grey; shrunk to MAX_FRAME_PIXELS) as RGB, transparency on white as
    pictures are (`as_shown`)."""
    import cv2

    frame = capped_frame(frame, MAX_FRAME_PIXELS)
    if frame.ndim == 2:
        return cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
    if frame.shape[2] == 4:
        alpha = frame[..., 3:4].astype(np.float32) / 255.0
        colour = frame[..., :3].astype(np.float32) * alpha + 255.0 * (1.0 - alpha)
        return cv2.cvtColor(np.round(colour).astype(np.uint8), cv2.COLOR_BGR2RGB)
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


def image_media(image: Image.Image, name: str = "image") -> Media:
    """Wrap an in-memory image, read as it is shown (`as_shown`)."""
    return Media(kind="image", name=name, image=as_shown(image))


def capped_frame(frame: np.ndarray, max_pixels: int = MAX_FRAME_PIXELS) -> np.ndarray:
    """A decoded frame (H, W, 3), shrunk (area-averaged, aspect kept) to at most `max_pixels`."""
    import cv2

    height, width = frame.shape[:2]
    if height * width <= max_pixels:
        return frame
    scale = (max_pixels / (height * width)) ** 0.5
    size = (max(1, int(width * scale)), max(1, int(height * scale)))
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


def as_shown(image: Image.Image) -> Image.Image:
    """The picture as a viewer shows it, in RGB: EXIF orientation applied, transparency on white,
    16-bit or float grey scaled to 8 bits, palette, LA, CMYK and 1-bit converted."""
    image = ImageOps.exif_transpose(image) or image
    if image.mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        image = eight_bit_grey(image)
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode == "RGB" and "transparency" in image.info:  # tRNS on an RGB picture: one colour is clear
        image = image.convert("RGBA")
    if image.mode in ("L", "1") and "transparency" in image.info:
        image = image.convert("LA")
    if image.mode in ("RGBA", "LA", "PA", "La", "RGBa"):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


#: The full scales an integer grey picture is read against: the smallest that holds its brightest value (8,
#: 16 or 24 bits, or a signed 32-bit integer's), so a copy of an 8-bit picture scaled to any of them reads as it.
GREY_FULL_SCALES = (2**8 - 1, 2**16 - 1, 2**24 - 1, 2**31 - 1)


def eight_bit_grey(image: Image.Image) -> Image.Image:
    """A 16-bit (or 32-bit integer, or float) grey picture as the 8-bit grey a viewer shows: integers scaled by
    the smallest full scale that holds their brightest value (`GREY_FULL_SCALES`: 255, 65535, 2**24 - 1,
    2**31 - 1; 16-bit pictures always by 65535, their mode's range), so a 16-, 24- or 32-bit copy of an 8-bit
    picture reads as the 8-bit one; 32-bit integers below zero scaled by their real range (lowest black,
    highest white); floats in [0, 1] scaled by 255. The range is the finite values': one NaN or infinite pixel
    does not darken the rest."""
    values = np.asarray(image).astype(np.float64)
    finite = values[np.isfinite(values)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    # NaN and the infinities (a float picture's holes) take the finite range's ends: +inf white, else black
    values = np.where(np.isposinf(values), high, np.where(np.isfinite(values), values, low))
    if image.mode == "I" and low < 0:
        values = (values - low) * (255.0 / max(high - low, 1.0))
    elif image.mode.startswith("I;16"):
        values = values * (255.0 / GREY_FULL_SCALES[1])
    elif image.mode == "I":
        full = next((scale for scale in GREY_FULL_SCALES if high <= scale), high)
        values = values * (255.0 / full)
    elif image.mode == "F" and values.size and high <= 1.0:
        values = values * 255.0
    return Image.fromarray(np.round(values).clip(0, 255).astype(np.uint8), mode="L")


def thumbnail(media: Media, height: int) -> Media:
    """The medium shrunk to `height` pixels high (aspect kept; never enlarged): a small copy to keep."""
    if media.kind == "image":
        assert media.image is not None
        image = media.image
        if image.height > height:
            width = max(1, round(image.width * height / image.height))
            image = image.resize((width, height), Image.Resampling.BILINEAR)
        return Media(kind="image", name=media.name, image=image)
    assert media.frames is not None
    frames = [Image.fromarray(frame) for frame in media.frames]
    if frames and frames[0].height > height:
        width = max(1, round(frames[0].width * height / frames[0].height))
        frames = [frame.resize((width, height), Image.Resampling.BILINEAR) for frame in frames]
    return Media(
        kind="video",
        name=media.name,
        frames=np.stack([np.asarray(frame) for frame in frames]),
        fps=media.fps,
        total_frames=media.total_frames,
        frame_indices=media.frame_indices,
    )


def check_is_media(media: object) -> None:
    if isinstance(media, Media):
        return
    if isinstance(media, str | Path):
        how = f"call sage_core.load_media({str(media)!r}) and pass what it returns"
    elif isinstance(media, Image.Image):
        how = "call sage_core.image_media(picture) for a PIL image, or load_media(path) for a file"
    else:
        how = "call sage_core.load_media(path) for an image or video file"
    raise InputError(f"media must be a sage_core Media, not {kind_of(media)}: {how}")
