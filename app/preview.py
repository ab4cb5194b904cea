"""A visitor's video in a codec the browser cannot show: previewed as a still, saying so.

Browsers play H.264, VP9 or AV1 in MP4, VP8, VP9 or AV1 in WebM, and Theora in Ogg; OpenCV, which
reads the race's frames, reads many more (MPEG-4 Part 2, Motion JPEG, H.265, AVI or MKV files). A clip
of those would show "Video not playable" in the video box, the race running on something the visitor
cannot see. The upload event reads its codec (`cv2.CAP_PROP_FOURCC`); for one the browser cannot show,
the status line shows a frame from the clip, names the codec, and says that the race reads the
clip itself. The clip is not re-encoded: a VP9 encode on a CPU takes about 0.3 s a 640 × 480 frame, and
what the models read stays the visitor's file.

The event runs outside the queue, so its work is bounded: the clip is opened once (codec, frame size and
frame from one capture); a frame larger than the race's limit (`MAX_VIDEO_FRAME_PIXELS`, from the header,
nothing decoded) is not previewed, the note saying so; at most `PREVIEW_SLOTS` stills are decoded at once
in the whole server (a visitor who waits `PREVIEW_WAIT_SECONDS` for one gets the note without a still);
and the still is at most `STILL_MOST_FRAMES` frames in, so finding it decodes at most that many frames
however few keyframes the clip has. Measured: four previews at once of a one-frame 16000 × 8000 Motion
JPEG clip took the process from 905 to 4,477 MB before (every still decoded at full size at once), and to
912 MB now (nothing decoded); 4 to 12 at once of a 6600 × 6000 clip, just within the limit (one still
takes 293 MB), add 760-840 MB at their peak, two decoding at a time.
"""

from __future__ import annotations

import base64
import html
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import gradio as gr

from sage_core import media

from .notes import INFO_MARK
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
#: The still is the middle frame, or this frame of a longer clip (2 s in at 30 frames a second; fewer for
#: frames above 1920 x 1080, counted for their size as the race's reading counts them): finding it decodes at
#: most this many frames plus one, however few keyframes the clip has.
STILL_MOST_FRAMES = 60
#: Stills decoded at once in the whole server. One frame at the race's limit of 40 million pixels takes
#: about 290 MB to decode (7.2 bytes a pixel measured): two at once took 580 MB.
PREVIEW_SLOTS = 2
PREVIEWS = threading.BoundedSemaphore(PREVIEW_SLOTS)
#: How long an upload waits for a free slot before its note comes without a still (s).
PREVIEW_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class Header:
    """What a clip's header says, before any frame is decoded: its codec (OpenCV's FOURCC name, "" when
    unreadable), frame size and frame count."""

    codec: str = ""
    width: int = 0
    height: int = 0
    frames: int = 0

    @property
    def pixels(self) -> int:
        return self.width * self.height


def header_of(capture: Any) -> Header:
    """The header of an opened capture (an empty one when OpenCV could not open the clip)."""
    import cv2

    if not capture.isOpened():
        return Header()
    code = int(capture.get(cv2.CAP_PROP_FOURCC))
    codec = code.to_bytes(4, "little").decode("latin-1").strip("\x00 ") if 0 < code < 2**32 else ""
    return Header(
        codec,
        int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)),
        int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT)),
        max(0, int(capture.get(cv2.CAP_PROP_FRAME_COUNT))),
    )


def read_header(path: str | Path) -> Header:
    """The clip's header, the file opened once and nothing decoded."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        return header_of(capture)
    finally:
        capture.release()


def codec_of(path: str | Path) -> str:
    """The clip's video codec as OpenCV names it (its FOURCC, "" when unreadable)."""
    return read_header(path).codec


def plays(codec: str, path: str | Path) -> bool:
    """Whether a browser's `<video>` plays this codec in a file of this suffix."""
    return codec in PLAYABLE.get(Path(path).suffix.lower(), frozenset())


def browser_plays(path: str | Path) -> bool:
    """Whether a browser's `<video>` plays the file: its suffix and codec are a pair browsers decode."""
    return plays(codec_of(path), path)


def still_index(header: Header) -> int:
    """The frame shown: the middle one, or frame STILL_MOST_FRAMES of a longer clip (fewer for frames above
    1920 x 1080: frame 3 of 40-million-pixel frames)."""
    weight = max(1.0, header.pixels / media.MAX_FRAME_PIXELS)
    return min(header.frames // 2, int(STILL_MOST_FRAMES / weight))


def still_name(header: Header) -> str:
    """The still, as the note names it."""
    index = still_index(header)
    if index == header.frames // 2 and header.frames > 1:
        return "its middle frame"
    return "its first frame" if index == 0 else "a frame from its first seconds"


#: Why a clip the browser cannot play has no still: nothing to say (unreadable), too large, or busy.
NoStill = Literal["", "too large", "busy"]


def still_of(capture: Any, header: Header, side: int = STILL_SIDE) -> tuple[bytes, NoStill]:
    """The still (a JPEG at most `side` px on its longest side; b"" when there is none) and why there is none.
    A frame is decoded only when the header's size is within MAX_VIDEO_FRAME_PIXELS and a preview slot is
    free within PREVIEW_WAIT_SECONDS; it is reached by decoding on from the first frame (no seeking), so at
    most STILL_MOST_FRAMES + 1 frames are decoded."""
    if header.pixels <= 0:
        return b"", ""
    if header.pixels > media.MAX_VIDEO_FRAME_PIXELS:
        return b"", "too large"
    if not PREVIEWS.acquire(timeout=PREVIEW_WAIT_SECONDS):
        return b"", "busy"
    try:
        frame = frame_at(capture, still_index(header))
    finally:
        PREVIEWS.release()
    return (jpeg_still(frame, side) if frame is not None else b""), ""


def frame_at(capture: Any, index: int) -> Any:
    """Frame `index` of an opened capture, reached by grabbing (decoding, not converting) the frames before it;
    None when the clip ends first."""
    for _ in range(index):
        if not capture.grab():
            return None
    ok, frame = capture.read()
    return frame if ok else None


def jpeg_still(frame: Any, side: int = STILL_SIDE) -> bytes:
    """A decoded frame as a JPEG at most `side` px on its longest side (b"" when it cannot be encoded)."""
    import cv2

    scale = min(1.0, side / max(frame.shape[:2]))
    frame = cv2.resize(frame, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA) if scale < 1 else frame
    done, encoded = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 85])
    return encoded.tobytes() if done else b""


def still_note(path: str | Path) -> str:
    """The status line for a clip the browser cannot show: a frame of it and why ("" when it plays). The file
    is opened once, for its codec, frame size and still."""
    import cv2

    if not path:
        return ""
    capture = cv2.VideoCapture(str(path))
    try:
        header = header_of(capture)
        if plays(header.codec, path):
            return ""
        still, why = still_of(capture, header)
    finally:
        capture.release()
    return note_html(header, Path(path).suffix.lower() or "(no suffix)", still, why)


def note_text(header: Header, suffix: str, still: bool, why: NoStill) -> str:
    """The note's words: why the video box is blank, the still or why there is none, what the race reads."""
    named = CODEC_NAMES.get(header.codec, header.codec or "an unknown codec")
    lead = f"Your browser cannot play this clip ({named} in {suffix}), so the video box cannot show it"
    race = " The race reads the clip itself, every frame it samples as uploaded."
    if still:
        lead += f"; here is {still_name(header)}."
    elif why == "too large":
        limit = media.MAX_VIDEO_FRAME_PIXELS / 1e6
        lead += (
            f", and its {header.width} × {header.height} frames are too large to preview or to race "
            f"(the limit is {limit:.0f} million pixels a frame)."
        )
        race = ""
    elif why == "busy":
        lead += ", and the server is busy previewing other clips, so there is no still this time."
    else:
        lead += "."
    return lead + race + " Browsers play H.264 in MP4 and VP9 in WebM."


def note_html(header: Header, suffix: str, still: bytes, why: NoStill) -> str:
    """The note as the status line shows it: its words, then the still."""
    image = (
        f"<img id='video-still' alt='a frame of the clip' src='data:image/jpeg;base64,"
        f"{base64.b64encode(still).decode()}' style='display:block;max-width:{STILL_SIDE}px;margin-top:4px'>"
        if still
        else ""
    )
    text = note_text(header, suffix, bool(still), why)
    return status_html(f"{INFO_MARK}<span id='video-still-note'>{html.escape(text)}</span>{image}", "info")


def show_upload(video: Any) -> Any:
    """The upload event: the still and its sentence for a clip the browser cannot show, else nothing."""
    note = still_note(video) if isinstance(video, str) else ""
    return note or gr.skip()


def wire_preview(page: Page) -> None:
    """A visitor's uploaded clip is checked as it arrives (outside the queue: one open, one header, and at most
    STILL_MOST_FRAMES + 1 frames decoded, PREVIEW_SLOTS at a time)."""
    page.video.upload(show_upload, [page.video], [page.status], queue=False, api_visibility="private")
