"""A visitor's video in a codec the browser cannot show: previewed as a still, saying so.

Browsers play H.264, VP9 or AV1 in MP4, VP8, VP9 or AV1 in WebM, and Theora in Ogg; OpenCV, which
reads the race's frames, reads many more (MPEG-4 Part 2, Motion JPEG, H.265, AVI or MKV files). A clip
of those would show "Video not playable" in the video box, the race running on something the visitor
cannot see. The upload event reads its codec (`cv2.CAP_PROP_FOURCC`); for one the browser cannot show,
the status line shows the clip's middle frame, names the codec, and says that the race reads the
clip itself. The clip is not re-encoded: a VP9 encode on a CPU takes about 0.3 s a 640 × 480 frame, and
what the models read stays the visitor's file.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gradio as gr

from .render import status_html

if TYPE_CHECKING:
    from .page import Page

#: The codecs (OpenCV's FOURCC names) a browser's `<video>` plays, by the file's suffix.
PLAYABLE: dict[str, frozenset[str]] = {
    ".mp4": frozenset({"h264", "avc1", "H264", "VP90", "vp09", "AV01", "av01"}),
    ".m4v": frozenset({"h264", "avc1", "H264"}),
    ".webm": frozenset({"VP80", "VP90", "AV01", "av01"}),
    ".ogg": frozenset({"THEO", "theo"}),
    ".ogv": frozenset({"THEO", "theo"}),
}
#: How the note names the codecs a visitor is likely to upload (else the FOURCC as it is).
CODEC_NAMES = {
    "FMP4": "MPEG-4 Part 2",
    "mp4v": "MPEG-4 Part 2",
    "XVID": "MPEG-4 Part 2 (Xvid)",
    "DIVX": "MPEG-4 Part 2 (DivX)",
    "MJPG": "Motion JPEG",
    "hevc": "H.265",
    "hev1": "H.265",
    "hvc1": "H.265",
    "h264": "H.264",
    "VP90": "VP9",
    "VP80": "VP8",
    "AV01": "AV1",
}
#: The still's longest side in the status line (px).
STILL_SIDE = 240


def codec_of(path: str | Path) -> str:
    """The clip's video codec as OpenCV names it (its FOURCC, "" when unreadable)."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        code = int(capture.get(cv2.CAP_PROP_FOURCC)) if capture.isOpened() else 0
    finally:
        capture.release()
    return code.to_bytes(4, "little").decode("latin-1").strip("\x00 ") if code > 0 else ""


def browser_plays(path: str | Path) -> bool:
    """Whether a browser's `<video>` plays the file: its suffix and codec are a pair browsers decode."""
    return codec_of(path) in PLAYABLE.get(Path(path).suffix.lower(), frozenset())


def middle_still(path: str | Path, side: int = STILL_SIDE) -> bytes:
    """The clip's middle frame as a JPEG at most `side` px on its longest side (b"" when it cannot be read)."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        capture.set(cv2.CAP_PROP_POS_FRAMES, max(0, int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) // 2))
        ok, frame = capture.read()
    finally:
        capture.release()
    if not ok:
        return b""
    scale = min(1.0, side / max(frame.shape[:2]))
    frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else frame
    done, encoded = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 85])
    return encoded.tobytes() if done else b""


def still_note(path: str | Path) -> str:
    """The status line for a clip the browser cannot show: its middle frame and why ("" when it plays)."""
    if not path or browser_plays(path):
        return ""
    codec = codec_of(path)
    named = CODEC_NAMES.get(codec, codec or "an unknown codec")
    suffix = Path(path).suffix.lower() or "(no suffix)"
    still = middle_still(path)
    image = (
        f"<img id='video-still' alt='the middle frame of the clip' src='data:image/jpeg;base64,"
        f"{base64.b64encode(still).decode()}' style='display:block;max-width:{STILL_SIDE}px;margin-top:4px'>"
        if still
        else ""
    )
    text = (
        f"ⓘ Your browser cannot play this clip ({named} in {suffix}), so the video box cannot show it; "
        "here is its middle frame. The race reads the clip itself, every frame it samples as uploaded. "
        "Browsers play H.264 in MP4 and VP9 in WebM."
    )
    return status_html(f"<span id='video-still-note'>{html.escape(text)}</span>{image}", "info")


def show_upload(video: Any) -> Any:
    """The upload event: the still and its sentence for a clip the browser cannot show, else nothing."""
    note = still_note(video) if isinstance(video, str) else ""
    return note or gr.skip()


def wire_preview(page: Page) -> None:
    """A visitor's uploaded clip is checked as it arrives (outside the queue: one header and one frame read)."""
    page.video.upload(show_upload, [page.video], [page.status], queue=False, api_visibility="private")
