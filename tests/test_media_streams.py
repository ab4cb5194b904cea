"""Media as a browser makes them: a WebM written as a stream (a MediaRecorder's: no duration, no cues, a
segment and clusters of unknown size) is read frame by frame within the time limit; a video with alpha is
composited on white as pictures are; a float picture with a NaN or infinite pixel is scaled by its finite
values."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from sage_core.errors import MediaError
from sage_core.media import load_media

# Matroska's element ids (EBML): the segment, its info and the info's duration, its tracks and clusters.
SEGMENT, INFO, DURATION, TRACKS, CLUSTER = 0x18538067, 0x1549A966, 0x4489, 0x1654AE6B, 0x1F43B675
UNKNOWN_SIZE = b"\x01\xff\xff\xff\xff\xff\xff\xff"  # an 8-byte size whose bits are all ones: "until the end"


def vint(data: bytes, at: int, keep_marker: bool) -> tuple[int, int]:
    """An EBML variable-length integer at `at`: its value (with its length marker for an id) and its end."""
    length = next(n for n in range(1, 9) if data[at] & (0x80 >> (n - 1)))
    value = data[at] if keep_marker else data[at] & (0xFF >> length)
    for byte in data[at + 1 : at + length]:
        value = (value << 8) | byte
    return value, at + length


def elements(data: bytes) -> Iterator[tuple[int, bytes]]:
    at = 0
    while at < len(data):
        ident, at = vint(data, at, keep_marker=True)
        start = at
        size, at = vint(data, at, keep_marker=False)
        if size == (1 << (7 * (at - start))) - 1:  # unknown: the rest
            size = len(data) - at
        yield ident, data[at : at + size]
        at += size


def element(ident: int, body: bytes, unknown: bool = False) -> bytes:
    head = ident.to_bytes((ident.bit_length() + 7) // 8, "big")
    return head + (UNKNOWN_SIZE if unknown else (0x0100000000000000 | len(body)).to_bytes(8, "big")) + body


def as_stream(webm: bytes) -> bytes:
    """The WebM as a MediaRecorder writes it: the segment and each cluster of unknown size, its info without
    a duration, and no seek head, cues or tags."""
    out = b""
    for ident, body in elements(webm):
        if ident != SEGMENT:
            out += element(ident, body)
            continue
        segment = b""
        for part, inner in elements(body):
            if part == INFO:
                segment += element(INFO, b"".join(element(i, b) for i, b in elements(inner) if i != DURATION))
            elif part == TRACKS:
                segment += element(TRACKS, inner)
            elif part == CLUSTER:
                segment += element(CLUSTER, inner, unknown=True)
        out += element(SEGMENT, segment, unknown=True)
    return out


def write_webm(path: Path, frames: int, fps: float = 15.0) -> np.ndarray:
    """A VP8 WebM of `frames` grey frames getting lighter (OpenCV's FFmpeg writer); the frames as written."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"VP80"), fps, (64, 48))
    if not writer.isOpened():
        pytest.skip("this OpenCV cannot write VP8 WebM")
    written = np.stack([np.full((48, 64, 3), min(8 * index, 255), dtype=np.uint8) for index in range(frames)])
    for frame in written:
        writer.write(frame)
    writer.release()
    return written


def test_a_streamed_webm_is_read_frame_by_frame(tmp_path: Path) -> None:
    stated = tmp_path / "stated.webm"
    write_webm(stated, 15)
    streamed = tmp_path / "recorded.webm"
    streamed.write_bytes(as_stream(stated.read_bytes()))
    capture = cv2.VideoCapture(str(streamed))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) < 0  # what OpenCV makes of a stream: no count to seek by
    capture.release()
    video, reference = load_media(streamed, frames=5), load_media(stated, frames=5)
    assert video.total_frames == 15 and video.frame_indices == reference.frame_indices == (0, 4, 7, 10, 14)
    assert video.fps == pytest.approx(15.0) and video.duration_seconds == pytest.approx(1.0)
    assert video.frames is not None and reference.frames is not None
    assert np.array_equal(video.frames, reference.frames)  # the same frames, each where the stated file has it
    assert video.frames[-1].mean() > video.frames[0].mean() + 50  # the last, not the first again


def test_a_streamed_webm_longer_than_the_limit_is_refused(tmp_path: Path) -> None:
    stated = tmp_path / "stated.webm"
    write_webm(stated, 45)  # 3 s at 15 frames a second
    streamed = tmp_path / "long.webm"
    streamed.write_bytes(as_stream(stated.read_bytes()))
    with pytest.raises(MediaError, match=r"long\.webm lasts longer than the limit of 2 s"):
        load_media(streamed, frames=4, max_video_seconds=2)
    assert load_media(streamed, frames=4, max_video_seconds=4).total_frames == 45


def test_a_video_with_alpha_is_composited_on_white(tmp_path: Path) -> None:
    path = tmp_path / "clear.mkv"
    writer = cv2.VideoWriter(
        str(path),
        cv2.CAP_FFMPEG,
        cv2.VideoWriter_fourcc(*"FFV1"),
        10.0,
        (64, 48),
        [cv2.VIDEOWRITER_PROP_ENABLE_ALPHA, 1],
    )
    if not writer.isOpened():
        pytest.skip("this OpenCV cannot write FFV1 with alpha")
    frame = np.zeros((48, 64, 4), dtype=np.uint8)  # BGRA: stored black everywhere ...
    frame[:, :32] = (200, 30, 30, 255)  # ... the left half an opaque blue
    frame[:, 48:, 3] = 128  # a half-transparent black strip on the right
    for _ in range(4):
        writer.write(frame)
    writer.release()
    video = load_media(path, frames=2)
    assert video.frames is not None and video.frames.shape == (2, 48, 64, 3)
    shown = video.frames[0].astype(int)
    assert (shown[:, :32] == (30, 30, 200)).all()  # opaque: its colour, as RGB
    assert (shown[:, 32:48] == 255).all()  # transparent: white, not the stored black
    assert (np.abs(shown[:, 48:] - 127) <= 1).all()  # half: halfway between black and white


@pytest.mark.parametrize("hole", [float("nan"), float("inf"), float("-inf")])
def test_a_float_picture_with_a_hole_is_scaled_by_its_finite_values(tmp_path: Path, hole: float) -> None:
    values = np.linspace(0.0, 1.0, 48 * 32, dtype=np.float32).reshape(32, 48)
    path = tmp_path / "clean.tif"
    Image.fromarray(values, "F").save(path)
    clean = np.asarray(load_media(path).image).astype(int)
    values[3, 5] = hole
    Image.fromarray(values, "F").save(path)
    holed = np.asarray(load_media(path).image).astype(int)
    assert clean.max() == 255 and clean.mean() == pytest.approx(127.5, abs=1)
    others = np.ones(clean.shape[:2], dtype=bool)
    others[3, 5] = False
    assert np.array_equal(holed[others], clean[others])  # not darkened by the one pixel
    assert (holed[3, 5] == (255 if hole > 0 else 0)).all()  # +inf white; NaN and -inf black
