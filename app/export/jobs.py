"""The page's export buttons: slots of their own (`ExportSlots`), each export on a thread drawing one frame each
time the page asks (`ExportThread`), the progress lines (`export_job`), and a visitor's files, removed with them."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from ..models import between_races
from ..race import RaceData
from ..render import error_html, status_html
from .budget import GIF_BUDGET, HTML_BUDGET, Budget, ExportError, Stopped
from .frame_format import FRAME_MS, frame_steps, rounds_of
from .player import write_html
from .slides import write_gif, write_webm

#: The page's export files live in Gradio's own cache folder, so Gradio serves them without a second copy.
EXPORT_DIR = Path(get_upload_folder()) / "sage-exports"
#: A race of at most this many rounds is a small export (its own slots: never behind a large one).
SMALL_ROUNDS = 60
#: While the page's export waits for a frame, it yields its progress line again this often (s): Gradio
#: closes a visitor's generator only between yields, so a visitor who leaves stops it within seconds.
HEARTBEAT_S = 2.0
#: An export thread waits this long (s) for its page to ask for the next frame; a page that never asks has gone.
PATIENCE_S = 30.0
#: How long closing the page's export waits for its thread to stop (s); the thread gives its slot back itself.
JOIN_S = 5.0

#: Each kind of export: its budget, its writer, and how its status line names it.
EXPORTS: dict[str, tuple[Budget, Callable[..., Iterator[int]], str]] = {
    "html": (HTML_BUDGET, write_html, "HTML replay"),
    "gif": (GIF_BUDGET, write_gif, "GIF (drawn on the server, no browser)"),
    "webm": (GIF_BUDGET, write_webm, "WebM video (drawn on the server, no browser)"),
}


# -- the page's buttons -------------------------------------------------------------------------


class ExportSlots:
    """Exports running at once, small and large apart, so a small one never waits behind a large one.
    A slot is taken at once or refused in a sentence (nobody queues). A slot handed to a thread
    (`hand_over`) is given back by that thread when it has stopped, never before; a slot its export never
    gave back and no thread holds (a generator dropped before drawing) is free again after `lease` s."""

    def __init__(self, small: int = 2, large: int = 1, lease: float = Budget.seconds + 30.0) -> None:
        self.capacity = {"small": small, "large": large}
        self.lease = lease
        self.held: dict[str, dict[str, float]] = {"small": {}, "large": {}}
        self.threads: dict[str, threading.Thread] = {}
        self.lock = threading.Lock()

    def take(self, kind: str, clock: Callable[[], float] = time.monotonic) -> str:
        with self.lock:
            held = self.held[kind]
            for key, since in list(held.items()):
                thread = self.threads.get(key)
                if clock() - since > self.lease and (thread is None or not thread.is_alive()):
                    del held[key]
                    self.threads.pop(key, None)
            if len(held) >= self.capacity[kind]:
                raise ExportError(
                    f"{len(held)} {kind} exports are running (at most {self.capacity[kind]} at once); "
                    "try again in a few seconds"
                )
            key = uuid.uuid4().hex
            held[key] = clock()
            return key

    def give_back(self, kind: str, key: str) -> None:
        with self.lock:
            self.held[kind].pop(key, None)
            self.threads.pop(key, None)

    def hand_over(self, key: str, thread: threading.Thread) -> None:
        """From now on `thread` gives the slot back (when it has stopped); it cannot lapse before."""
        with self.lock:
            self.threads[key] = thread

    def handed_over(self, key: str) -> bool:
        with self.lock:
            return key in self.threads


@dataclass(frozen=True)
class Slot:
    """One taken export slot."""

    slots: ExportSlots
    kind: str
    key: str

    def give_back(self) -> None:
        self.slots.give_back(self.kind, self.key)


class ExportThread:
    """An export's writer on a thread of its own, drawing one frame each time the page asks (`frames`).
    The page's generator never draws, so it yields at least every `HEARTBEAT_S` s and Gradio can close it
    when its visitor leaves; closing it stops the thread within its frame (the writer's `stop`). The
    thread gives the slot back when it has stopped, and stops by itself when nobody asks for `PATIENCE_S` s."""

    def __init__(self, writer: Callable[[Callable[[], bool]], Iterator[int]], slot: Slot | None = None) -> None:
        self.stop = threading.Event()
        self.asked = threading.Semaphore(0)
        self.results: queue.SimpleQueue[int | BaseException | None] = queue.SimpleQueue()
        self.slot = slot
        self.thread = threading.Thread(target=self.run, args=(writer,), name="sage-export", daemon=True)

    def start(self) -> None:
        """Start the thread, the slot handed to it first (so it cannot lapse while the thread runs)."""
        if self.slot is not None:
            self.slot.slots.hand_over(self.slot.key, self.thread)
        try:
            self.thread.start()
        except BaseException:
            if self.slot is not None:
                self.slot.give_back()
            raise

    def run(self, writer: Callable[[Callable[[], bool]], Iterator[int]]) -> None:
        try:
            self.drive(writer(self.stop.is_set))
            self.results.put(None)
        except BaseException as error:  # handed to the page (a Stopped one to nobody)
            self.results.put(error)
        finally:
            if self.slot is not None:
                self.slot.give_back()

    def drive(self, drawn: Iterator[int]) -> None:
        """Draw a frame each time one is asked for, until the writer ends or nobody asks; the writer is
        closed either way (a writer closed early removes its partial file). Each frame is drawn in the race slot
        (`models.between_races`: when no race streams, or after a short wait), so an export takes turns with the
        races instead of running beside their steps: a race's measured time stays its own while a visitor
        exports."""
        try:
            while self.asked.acquire(timeout=PATIENCE_S) and not self.stop.is_set():
                try:
                    with between_races():  # never beside a race's step: its measured time stays its own
                        frame = next(drawn)
                    self.results.put(frame)
                except StopIteration:
                    return
            self.stop.set()
            raise Stopped("the export stopped: its visitor left")
        finally:
            close = getattr(drawn, "close", None)
            if close is not None:
                close()

    def frames(self) -> Generator[int | None, None, None]:
        """The writer's counts as its frames are drawn, and None every `HEARTBEAT_S` s while one is.
        Closed early (the visitor left) it stops the thread and waits up to `JOIN_S` s for it."""
        self.start()
        try:
            while True:
                self.asked.release()
                done = yield from self.result()
                if done is None:
                    return
                yield done
        finally:
            self.stop.set()
            self.asked.release()
            self.thread.join(JOIN_S)

    def result(self) -> Generator[None, None, int | None]:
        while True:
            try:
                done = self.results.get(timeout=HEARTBEAT_S)
            except queue.Empty:
                yield None
                continue
            if isinstance(done, BaseException):
                raise done
            return done


SLOTS = ExportSlots()


#: Guards every session's list of export files (two exports of one visitor may finish at once).
KEPT_LOCK = threading.Lock()


def kept_files(kept: Any) -> list[Any]:
    """A visitor's export files: their state's list itself (every export of the session adds to that one
    list, so two running at once both stay known); a fresh list for a state that holds none or one path."""
    if isinstance(kept, list):
        return kept
    return [kept] if isinstance(kept, str) else []


def forget_export(kept: Any, folder: Path = EXPORT_DIR) -> None:
    """Remove a visitor's export files (their state's `delete_callback`, when they leave): every path of their
    list (`kept_files`); only files of the exports' folder are ever removed."""
    with KEPT_LOCK:
        paths = list(kept_files(kept))
    for path in paths:
        if isinstance(path, str) and Path(path).parent == folder:
            Path(path).unlink(missing_ok=True)


def keep_export(kept: Any, path: Path, folder: Path = EXPORT_DIR) -> list[Any]:
    """The visitor's files with `path` added and their earlier export of its kind removed (one file of each
    kind a visitor: at most an HTML, a GIF and a video, all removed when they leave)."""
    files = kept_files(kept)
    with KEPT_LOCK:
        same_kind = [old for old in files if isinstance(old, str) and Path(old).suffix == path.suffix]
        files[:] = [old for old in files if old not in same_kind] + [str(path)]
    forget_export(same_kind, folder)
    return files


def hidden(message: str, previous: Any) -> tuple[Any, Any, Any]:
    return gr.update(visible=False, value=None), error_html(message), previous


def export_job(
    data: RaceData | None, previous: Any, kind: str = "html", folder: Path = EXPORT_DIR, slots: ExportSlots = SLOTS
) -> Iterator[tuple[Any, Any, Any]]:
    """The page's export buttons: the budget's sentence first, then a progress line a frame, then the
    file (the visitor's previous export of its kind removed: `keep_export`). Each yield is where a visitor who
    left stops it (Gradio stops pulling, or closes it); the slot is given back and no partial file stays."""
    if data is None or not any(lane.records for lane in data.lanes):
        yield hidden("Nothing to export yet: run or replay a race first.", previous)
        return
    rounds = rounds_of(data)
    size = "small" if rounds <= SMALL_ROUNDS else "large"
    try:
        slot = Slot(slots, size, slots.take(size))
    except ExportError as error:
        yield hidden(str(error), previous)
        return
    try:
        yield from run_export(data, previous, kind, folder, slot)
    finally:
        if not slots.handed_over(slot.key):  # (else its thread gives it back when it has stopped)
            slot.give_back()


def run_export(
    data: RaceData, previous: Any, kind: str, folder: Path, slot: Slot | None = None
) -> Iterator[tuple[Any, Any, Any]]:
    """The budget's sentence, a progress line a frame (again every `HEARTBEAT_S` s while one is drawn,
    on an `ExportThread`), then the file; the slot, when given, goes with the thread."""
    rounds = rounds_of(data)
    budget, writer, label = EXPORTS[kind]
    yield gr.update(), status_html(budget.sentence(rounds, label)), previous
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sage-slides-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}.{kind}"
    total = len(frame_steps(rounds, budget.frames))
    worker = ExportThread(lambda stop: writer(data, path, budget=budget, stop=stop), slot)
    shown = 0
    try:
        with contextlib.closing(worker.frames()) as drawn:
            for done in drawn:
                shown = done or shown
                line = f"Exporting the {label}: frame {shown} of {total}{'' if done else ', drawing'}…"
                yield gr.update(), status_html(line), previous
    except ExportError as error:
        yield hidden(str(error), previous)
        return
    kept = keep_export(previous, path, folder)
    of_rounds = f"{total} frames of {rounds} round{'s' * (rounds != 1)}"
    notes = {
        "gif": f"Saved the race as an animated GIF, {of_rounds} ({FRAME_MS} ms each, the end held).",
        "webm": f"Saved the race as a WebM video (VP9, 1280 × 720), {of_rounds} ({FRAME_MS} ms "
        "each, the end held): it plays in browsers and PowerPoint 365.",
        "html": "Saved the race as one HTML file that replays offline (open it in any browser; space plays, → steps).",
    }
    note = notes[kind]
    yield gr.update(visible=True, value=str(path)), status_html(note), kept


def slides_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "Export for slides": the race on screen as an HTML replay to download."""
    yield from export_job(data, previous, "html")


def gif_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "… as a GIF": the race on screen drawn round by round (sampled), no browser."""
    yield from export_job(data, previous, "gif")


def video_file(data: RaceData | None, previous: Any = None) -> Iterator[tuple[Any, Any, Any]]:
    """The page's "… or a video": the GIF's frames as a WebM (VP9), no browser."""
    yield from export_job(data, previous, "webm")
