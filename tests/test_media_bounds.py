"""Hostile clips cost bounded work: an upload's preview decodes nothing for a frame above the race's limit
and at most two stills at once in the whole server, and loading a clip with one keyframe decodes it once
(not once for every sampled frame), within a limit of decoded frames."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from app import preview
from sage_core import media as media_module
from sage_core.errors import MediaError
from sage_core.media import decode_limit, keyframes, load_media, read_plan, sample_indices


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def notes_at_once(clip: Path, visitors: int) -> list[str]:
    """`preview.still_note` of `clip` for `visitors` uploads at once (one thread each), in the order they ended."""
    notes: list[str] = []
    threads = [threading.Thread(target=lambda: notes.append(preview.still_note(clip))) for _ in range(visitors)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return notes


def reset_peak() -> None:
    """Start the process's peak resident memory (VmHWM) afresh (Linux); the test is skipped elsewhere."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pytest.skip("this system cannot reset the peak resident memory (/proc/self/clear_refs)")


@pytest.fixture(scope="module")
def huge_frame_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-frame 16000 x 8000 Motion JPEG AVI (a few MB; 128 million pixels, 384 MB decoded as BGR)."""
    path = tmp_path_factory.mktemp("huge") / "huge.avi"
    frame = np.zeros((8000, 16000, 3), dtype=np.uint8)
    frame[1000:7000, 2000:14000] = (40, 160, 220)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 1.0, (16000, 8000))
    writer.write(frame)
    writer.release()
    return path


def one_keyframe_clip(path: Path, frames: int, size: tuple[int, int], fps: float = 1000.0) -> Path:
    """An MPEG-4 (MP42) AVI of `frames` frames whose only keyframe is its first: four frames encoded, then the
    last one's packet (a P frame that changes nothing) repeated, written with OpenCV's raw writer, which
    flags only the first packet a keyframe. Seeking to any frame of it decodes from its start."""
    width, height = size
    plain = path.with_suffix(".plain.avi")
    writer = cv2.VideoWriter(str(plain), cv2.CAP_FFMPEG, cv2.VideoWriter_fourcc(*"MP42"), fps, size)
    if not writer.isOpened():
        pytest.skip("this OpenCV cannot write MPEG-4 (MP42)")
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    frame[:, : width // 2] = 200
    for _ in range(4):
        writer.write(frame)
    writer.release()
    source = cv2.VideoCapture(str(plain), cv2.CAP_FFMPEG, [cv2.CAP_PROP_FORMAT, -1])
    packets = []
    while source.grab():
        packets.append(source.retrieve()[1].reshape(1, -1).copy())
    source.release()
    raw = [cv2.VIDEOWRITER_PROP_RAW_VIDEO, 1, cv2.VIDEOWRITER_PROP_KEY_INTERVAL, 10**9]
    writer = cv2.VideoWriter(str(path), cv2.CAP_FFMPEG, cv2.VideoWriter_fourcc(*"MP42"), fps, size, raw)
    if len(packets) != 4 or not writer.isOpened():
        pytest.skip("this OpenCV cannot copy MPEG-4 packets into a new file")
    writer.write(packets[0])
    for _ in range(frames - 1):
        writer.write(packets[-1])
    writer.release()
    if keyframes(path, frames) != [0]:
        pytest.skip("this OpenCV does not read the raw writer's keyframe flags back")
    return path


def one_pass_seconds(path: Path) -> float:
    """How long decoding every frame of the clip once takes (grabbed, not converted)."""
    capture = cv2.VideoCapture(str(path))
    started = time.monotonic()
    while capture.grab():
        pass
    capture.release()
    return time.monotonic() - started


def test_four_previews_of_a_huge_frame_decode_nothing(huge_frame_clip: Path) -> None:
    """Before: four previews at once of this clip took the process from 905 to 4,477 MB (each still decoded
    at full size). Now its header's size is over the limit: the note says so in one sentence, nothing is
    decoded (905 to 912 MB)."""
    reset_peak()
    before = status_kib("VmRSS")
    notes = notes_at_once(huge_frame_clip, 4)
    extra_mb = (status_kib("VmHWM") - before) / 1024
    assert extra_mb < 1024, f"four previews took {extra_mb:.0f} MB more"
    assert len(notes) == 4 and all(note == notes[0] for note in notes)
    assert "its 16000 × 8000 frames are too large to preview or to race" in notes[0]
    assert "(the limit is 40 million pixels a frame)" in notes[0] and "<img" not in notes[0]
    assert "The race reads the clip itself" not in notes[0]  # (it would refuse it)


def test_the_race_refuses_the_huge_frame_from_its_header(huge_frame_clip: Path) -> None:
    reset_peak()
    before = status_kib("VmRSS")
    with pytest.raises(MediaError, match=r"16000x8000 frames: too many pixels \(the limit is 40 million a frame\)"):
        load_media(huge_frame_clip)
    assert (status_kib("VmHWM") - before) / 1024 < 100  # nothing decoded (a decoded frame is 384 MB as BGR)


def test_at_most_two_stills_are_decoded_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clip = Path(__file__).parent / "data" / "mp4v" / "moving_shape.mp4"
    running, most, lock = 0, 0, threading.Lock()
    decode = preview.frame_at

    def slow_frame_at(capture: object, index: int) -> object:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.3)
        with lock:
            running -= 1
        return decode(capture, index)

    monkeypatch.setattr(preview, "frame_at", slow_frame_at)
    notes = notes_at_once(clip, 6)
    assert most == preview.PREVIEW_SLOTS == 2
    assert len(notes) == 6 and all("data:image/jpeg;base64," in note for note in notes)  # each waited its turn


def test_a_preview_that_cannot_get_a_slot_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    clip = Path(__file__).parent / "data" / "mp4v" / "moving_shape.mp4"
    monkeypatch.setattr(preview, "PREVIEW_WAIT_SECONDS", 0.05)
    held = [preview.PREVIEWS.acquire(timeout=1) for _ in range(preview.PREVIEW_SLOTS)]
    try:
        note = preview.still_note(clip)
    finally:
        for _ in held:
            preview.PREVIEWS.release()
    assert "the server is busy previewing other clips, so there is no still this time." in note
    assert "<img" not in note and "The race reads the clip itself" in note
    assert "data:image/jpeg;base64," in preview.still_note(clip)  # free again


def test_a_long_clips_still_is_found_within_its_first_frames(tmp_path: Path) -> None:
    """The still of a 10,000-frame one-keyframe clip is frame 60 (decoding 61 frames), not its middle
    (decoding 5,001)."""
    clip = one_keyframe_clip(tmp_path / "long.avi", 10_000, (64, 48))
    header = preview.read_header(clip)
    assert (header.codec, header.width, header.height, header.frames) == ("MP42", 64, 48, 10_000)
    assert preview.still_index(header) == preview.STILL_MOST_FRAMES == 60
    assert preview.still_index(preview.Header("MJPG", 6600, 6000, 1000)) == 3  # a large frame counts for its size
    assert preview.still_index(preview.Header("MJPG", 64, 48, 15)) == 7  # a short clip: its middle
    note = preview.still_note(clip)
    assert "here is a frame from its first seconds." in note and "data:image/jpeg;base64," in note


def test_a_one_keyframe_clip_is_decoded_once(tmp_path: Path) -> None:
    """10,000 frames of 1280 x 720 at 1000 fps with one keyframe. Before: each of the 8 sampled frames was
    sought, each seek decoding from the first frame (6.9-11.0 s on 2 cores, where one pass takes 1.7-2.9 s).
    Now one pass grabs its frames and converts only the 8 (1.8 s)."""
    clip = one_keyframe_clip(tmp_path / "one_key.avi", 10_000, (1280, 720))
    one_pass = one_pass_seconds(clip)
    started = time.monotonic()
    video = load_media(clip)
    seconds = time.monotonic() - started
    assert video.total_frames == 10_000 and video.frame_indices == sample_indices(10_000, 8)
    assert video.frames is not None and video.frames.shape == (8, 720, 1280, 3)
    assert seconds < 10.0
    assert seconds < 1.5 * one_pass + 1.0, f"loading took {seconds:.1f} s, one pass {one_pass:.1f} s"
    assert video.load_seconds == pytest.approx(seconds, abs=0.5)


def test_a_clip_that_would_decode_too_many_frames_is_refused_before_decoding(tmp_path: Path) -> None:
    """1,000 frames at 1000 fps with one keyframe, under a 5 s limit: reading it decodes 1,000 frames, the
    limit for a 5 s clip is 601 (120 a second), so it is refused from its packets alone."""
    clip = one_keyframe_clip(tmp_path / "dense.avi", 1000, (64, 48))
    with pytest.raises(
        MediaError,
        match=r"dense\.avi has too few keyframes to read: sampling 8 of its 1,000 frames "
        r"would decode 1,000 of them, and the limit is 601 for this clip",
    ):
        load_media(clip, max_video_seconds=5)
    assert load_media(clip, max_video_seconds=10).total_frames == 1000  # 1,201 allowed


def test_the_read_plan_seeks_only_past_a_keyframe() -> None:
    indices = sample_indices(10_000, 8)
    assert read_plan(indices, [0]) == ([False] * 8, 10_000)  # one keyframe: one pass
    every_twelfth = list(range(0, 10_000, 12))
    seeks, decoded = read_plan(indices, every_twelfth)
    assert seeks == [False] + [True] * 7 and decoded < 8 * (12 + media_module.SEEK_LEAD)
    assert read_plan(indices, []) == ([False] * 8, 10_000)  # no keyframes read: one pass too


def test_the_decoding_limit_counts_large_frames_for_their_size() -> None:
    assert decode_limit(60) == decode_limit(60, 1920, 1080) == 7201
    assert decode_limit(60, 3840, 2160) == 1801 and decode_limit(60, 7680, 4320) == 451


def test_a_gop_clip_reads_the_frames_seeking_reads(tmp_path: Path) -> None:
    """MPEG-4 Part 2 with OpenCV's keyframe every 12 frames: the planned read (seeking past keyframes,
    grabbing between) gives the frames seeking to each index gives."""
    path = tmp_path / "gop.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"FMP4"), 30.0, (64, 48))
    for index in range(300):
        frame = np.zeros((48, 64, 3), dtype=np.uint8)
        frame[:, : 1 + index * 63 // 299] = 220  # a bar growing frame by frame
        writer.write(frame)
    writer.release()
    video = load_media(path)
    capture = cv2.VideoCapture(str(path))
    sought = []
    for index in video.frame_indices:
        capture.set(cv2.CAP_PROP_POS_FRAMES, index)
        sought.append(media_module.shown_frame(capture.read()[1]))
    capture.release()
    assert video.frames is not None and np.array_equal(video.frames, np.stack(sought))
    assert len(keyframes(path, 300)) > 8  # (so the plan did seek)
