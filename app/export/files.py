"""Where an export writes: a checked path (`writable`), a file beside it renamed on success (`written_beside`),
and an export's plan (its path, the rounds it draws, its spending and the race cut for showing)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from ..race import RaceData
from .budget import Budget, ExportError, Spend
from .frame_format import for_showing, frame_steps, rounds_of

#: The ending each kind of export's file name must have (the GIF's and the video's choose their format by it).
SUFFIXES = {"html": (".html", ".htm"), "gif": (".gif",), "webm": (".webm",)}


def cannot_write(path: Path, error: OSError) -> str:
    """The sentence for a write that failed: the path and the system's reason ("No space left on device")."""
    return f"cannot write {path}: {error.strerror or error.__class__.__name__}"


def writable(path: str | Path, kind: str = "html") -> Path:
    """The file an export of `kind` may write (through a link, the file it names), or one sentence saying why it
    cannot: a folder, a missing folder, a name without the kind's ending, or something other than a regular file
    there (a device, a FIFO: an export replaces only a file)."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"cannot write {path}: it is a folder; name a file in it")
    if path.is_symlink():
        path = path.resolve()
    if not path.parent.is_dir():
        raise ExportError(f"cannot write {path}: the folder {path.parent} does not exist")
    endings = SUFFIXES[kind]
    if path.suffix.lower() not in endings:
        ending = " or ".join(endings)
        raise ExportError(f"cannot write {path}: a {kind.upper()} export's file name must end in {ending}")
    if path.exists() and not path.is_file():
        raise ExportError(f"cannot write {path}: it is not a regular file (a device, a FIFO or a socket); name a file")
    return path


@contextlib.contextmanager
def written_beside(path: Path) -> Iterator[Path]:
    """A new file beside `path` for the export to write, renamed onto `path` when the block ends well and removed
    when it does not: a failed or stopped export never touches what was at `path`, and only ever removes the
    file it created. A write the system refuses (a full disk) is one sentence (`cannot_write`)."""
    temp = path.with_name(f".{path.stem[:80]}.{uuid.uuid4().hex[:8]}.part{path.suffix}")
    try:
        os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # (the umask applies, as for open())
    except OSError as error:
        raise ExportError(cannot_write(path, error)) from error
    try:
        yield temp
        os.replace(temp, path)
    except OSError as error:
        raise ExportError(cannot_write(path, error)) from error
    finally:
        temp.unlink(missing_ok=True)


def open_for_writing(path: Path) -> TextIO:
    return path.open("w", encoding="utf-8")


def export_plan(data: RaceData, path: str | Path, budget: Budget, kind: str) -> tuple[Path, list[int], Spend, RaceData]:
    """What an export of `kind` writes: its checked path, the rounds it draws (sampled to the budget's frames),
    its spending, and the race with its token texts cut for showing."""
    rounds = rounds_of(data)
    if rounds == 0:
        raise ExportError("the race has no rounds to export; finish a race (or load a trace) first")
    return writable(path, kind), frame_steps(rounds, budget.frames), Spend(budget), for_showing(data)
