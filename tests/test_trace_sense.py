"""Traces checked for sense, and read within bounds. A race trace's recorded cost curve must be one a
measurement gives (positive times, sizes among COST_SIZES, increasing, each once, one time and one spread per
size, text for its device, a bounded number of passes); its headers' settings go through the one number
check. A forged trace gets one sentence on every route: the library (`parse_race`), `python -m app.export`,
the /replay API and the page's replay. A trace file is read with a byte limit that holds for a device, a
FIFO and a /proc file, whose sizes read 0."""

from __future__ import annotations

import html
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from app_records import synthetic_race
from app_server import running_app
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app.export import main as export_main
from app.inputs import Limits
from app.race_trace import load_race, parse_race, race_trace_lines
from sage_core import trace_check
from sage_core.cost_curve import CostCurve
from sage_core.errors import TraceError
from sage_core.trace_check import read_trace_text, recorded_cost_curve

HUGE = 10**400
LIMITS = Limits(max_upload_mb=1, max_video_seconds=5, max_trace_mb=5)  # room for the 100,000-size curve
SPREADS: dict[str, Any] = {"one_token_spread_ms": 0.01, "verify_spread_ms": (0.02,) * 4, "draft_spread_ms": (0.01,) * 4}
CURVE = CostCurve("cpu", "float32", "fast", (1, 2, 4, 8), 1.0, (1.2, 1.4, 1.6, 1.9), (0.5, 0.6, 0.7, 0.9), **SPREADS)


def race_lines() -> list[str]:
    data = synthetic_race()
    data.costs = CURVE
    return list(race_trace_lines(data))


def with_costs(change: Callable[[dict], object]) -> list[str]:
    """The race's lines with its recorded curve changed (`change` edits the dict, or returns a new value)."""
    lines = race_lines()
    race = json.loads(lines[0])
    changed = change(race["race"]["costs"])
    if changed is not None:
        race["race"]["costs"] = changed
    return [json.dumps(race), *lines[1:]]


def with_header(method: str, part: str, **changes: object) -> list[str]:
    """The race's lines with one run's header part changed: `sampling`, or the settings it records for a
    method (`sage`, `dynamic`, ...)."""
    lines = race_lines()
    index = next(i for i, line in enumerate(lines) if line.startswith('{"header"') and f'"method": "{method}"' in line)
    row = json.loads(lines[index])
    where = row["header"] if part == "sampling" else row["header"].setdefault("settings", {})
    where[part] = (where.get(part) or {}) | changes
    return [*lines[:index], json.dumps(row), *lines[index + 1 :]]


def sized(count: int) -> Callable[[dict], None]:
    return lambda c: c.update(sizes=list(range(1, count + 1)), verify_ms=[1.0] * count, draft_level_ms=[0.5] * count)


# (case, the forged lines, what the sentence says)
FORGED = [
    ("one-token step of 0 ms", with_costs(lambda c: c.update(one_token_ms=0)), "times must be positive"),
    ("a negative verification", with_costs(lambda c: c.update(verify_ms=[1.2, -1, 1.6, 1.9])), "must be positive"),
    ("a NaN draft level", with_costs(lambda c: c.update(draft_level_ms=[0.5, float("nan"), 0.7, 0.9])), "finite"),
    ("a time of 10**400 ms", with_costs(lambda c: c.update(one_token_ms=HUGE)), "times must be positive, finite"),
    ("a dict for a device", with_costs(lambda c: c.update(device={"cuda": 0})), "must be text"),
    ("duplicate sizes", with_costs(lambda c: c.update(sizes=[1, 1, 4, 8])), "sizes must increase, each given once"),
    ("unsorted sizes", with_costs(lambda c: c.update(sizes=[2, 1, 4, 8])), "sizes must increase, each given once"),
    ("a size no curve has", with_costs(lambda c: c.update(sizes=[1, 2, 3, 8])), "sizes must be among 1, 2, 4, 8"),
    ("100,000 sizes", with_costs(sized(100_000)), "it has 100000 sizes; a curve is measured at 1 to 7"),
    ("no sizes", with_costs(sized(0)), "it has 0 sizes"),
    ("spreads of another length", with_costs(lambda c: c.update(verify_spread_ms=[0.1])), "one entry per size"),
    ("times of another length", with_costs(lambda c: c.update(verify_ms=[1.0])), "one verification and one draft"),
    ("a negative spread", with_costs(lambda c: c.update(one_token_spread_ms=-0.1)), "spreads must be finite"),
    ("repeats 'x'", with_costs(lambda c: c.update(repeats="x")), "repeats must be a whole number in [0, 10000]"),
    ("repeats 10**400", with_costs(lambda c: c.update(repeats=HUGE)), "not a 401-digit number"),
    ("sizes as text", with_costs(lambda c: c.update(sizes="1248")), "must be lists"),
    ("a field no curve has", with_costs(lambda c: c.update(poison=1)), "'poison' is not a field of a cost curve"),
    ("a curve that is a list", with_costs(lambda c: [1, 2]), "must be an object of CostCurve's fields"),
    ("no verification times", with_costs(lambda c: c.__delitem__("verify_ms")), "it has no verify_ms"),
    ("a round overhead of 'x'", with_costs(lambda c: c.update(round_overhead_ms="x")), "round overhead"),
    # the headers' settings, through the one number check
    (
        "SAGE's threshold 10**400",
        with_header("sage", "sage", threshold_base=HUGE),
        "threshold_base must be a number in [0, 1], not a 401-digit number",
    ),
    ("SAGE's threshold -5", with_header("sage", "sage", threshold_base=-5), "threshold_base must be a number in"),
    ("SAGE's depth True", with_header("sage", "sage", depth_max=True), "depth_max must be a whole number"),
    (
        "SAGE's window backwards",
        with_header("sage", "sage", lower_below=3.5, raise_above=3.0),
        "need lower_below <= raise_above",
    ),
    ("SAGE's alpha 10**400", with_header("sage", "sage", initial_alpha=HUGE), "initial_alpha must be"),
    (
        "sage-frozen's alpha 2",
        with_header("static", "sage-frozen", alpha=2),
        "sage-frozen's α must be a number in [0, 1], not 2",
    ),
    ("settings of no method", with_header("sage", "poison", depth=1), "records settings for 'poison', which is no"),
    ("settings of a method without any", with_header("sage", "static", depth=1), "'static', which is no method"),
    (
        "the dynamic tree's depth 10**400",
        with_header("static", "dynamic", depth=HUGE, candidates=10, total_tokens=59),
        "depth must be a whole number in [1, 10], not a 401-digit number",
    ),
    (
        "a temperature of 10**400",
        with_header("sage", "sampling", temperature=HUGE, top_p=1.0, top_k=50, seed=1),
        "must hold a temperature",
    ),
]
IDS = [case[0] for case in FORGED]


def test_the_unforged_race_reads_back_with_its_curve() -> None:
    assert parse_race(race_lines()).costs == CURVE
    assert recorded_cost_curve(None) is None


@pytest.mark.parametrize(("case", "lines", "said"), FORGED, ids=IDS)
def test_the_library_refuses_each_forged_trace_in_one_sentence(case, lines, said) -> None:
    with pytest.raises(TraceError) as refused:
        parse_race(lines)
    assert said in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


@pytest.mark.parametrize(("case", "lines", "said"), FORGED, ids=IDS)
def test_the_export_cli_refuses_each_forged_trace_in_one_line(tmp_path, capsys, case, lines, said) -> None:
    trace = tmp_path / "forged.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    assert export_main([str(trace), "--html", str(tmp_path / "out.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and said in err, err
    assert not (tmp_path / "out.html").exists()


@pytest.fixture(scope="module")
def client():
    with running_app("builtin", "builtin", limits=LIMITS) as url:
        yield Client(url, verbose=False)


def test_replay_and_the_pages_replay_refuse_each_forged_trace(client, tmp_path) -> None:
    """One app for all the forged traces (a replay needs no model): the API's error and the page's status
    line carry the library's sentence."""
    for index, (case, lines, _) in enumerate(FORGED):
        trace = tmp_path / f"forged-{index}.jsonl"
        trace.write_text("\n".join(lines) + "\n")
        with pytest.raises(TraceError) as refused:
            parse_race(lines)
        expected = str(refused.value)
        with pytest.raises(AppError) as answered:
            client.predict(trace_file=handle_file(str(trace)), speed=0, api_name="/replay")
        assert str(answered.value) == expected, case
        status = client.submit(handle_file(str(trace)), 0, None, api_name="/replay_live").result()[0]
        assert expected in html.unescape(status), case
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(race_lines()) + "\n")
    assert client.predict(trace_file=handle_file(str(good)), speed=0, api_name="/replay")["replay"] is True


# -- files within bounds --------------------------------------------------------------------


def test_a_device_is_read_to_its_limit_not_to_its_end(tmp_path, capsys) -> None:
    started = time.monotonic()
    with pytest.raises(TraceError, match="holds more than the limit of 1 MB"):
        read_trace_text("/dev/zero", 2**20)
    limit_mb = Limits.from_env().max_trace_bytes // 2**20  # the export reads within the app's trace limit
    assert export_main(["/dev/zero", "--html", str(tmp_path / "x.html")]) == 2  # read to the limit, then refused
    assert f"error: the trace file holds more than the limit of {limit_mb} MB" in capsys.readouterr().err
    assert time.monotonic() - started < 30


def feed(fifo: Path, data: bytes) -> threading.Thread:
    """A writer that opens the FIFO and writes `data` (stopping quietly when the reader goes)."""

    def write() -> None:
        try:
            with open(fifo, "wb") as handle:
                handle.write(data)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_is_read_within_the_limit(tmp_path) -> None:
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    writer = feed(fifo, b"x" * (3 * 2**20))  # 3 MB under a 1 MB limit
    with pytest.raises(TraceError, match="holds more than the limit of 1 MB"):
        read_trace_text(fifo, 2**20)
    writer.join(timeout=10)
    # a trace that fits is read whole through a FIFO (as `<(cat trace.jsonl)` gives one)
    text = "\n".join(race_lines()) + "\n"
    writer = feed(fifo, text.encode())
    assert load_race(fifo).costs == CURVE
    writer.join(timeout=10)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_nobody_writes_to_is_refused_not_waited_on(tmp_path, monkeypatch) -> None:
    fifo = tmp_path / "silent.fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(trace_check, "STREAM_IDLE_SECONDS", 0.5)
    started = time.monotonic()
    with pytest.raises(TraceError, match=r"the trace file sent nothing for 0\.5 s"):
        load_race(fifo)
    # ... nor one whose writer opens it and sends nothing
    opened, release = threading.Event(), threading.Event()

    def silent() -> None:
        with open(fifo, "wb"):
            opened.set()
            release.wait(20)

    writer = threading.Thread(target=silent, daemon=True)
    writer.start()
    try:
        with pytest.raises(TraceError, match=r"the trace file sent nothing for 0\.5 s"):
            read_trace_text(fifo, 2**20)
        assert opened.is_set()
    finally:
        release.set()
        writer.join(timeout=10)
    assert time.monotonic() - started < 10


def test_a_proc_file_and_a_regular_one_are_read(tmp_path) -> None:
    if Path("/proc/self/status").exists():  # its size reads 0: read, within the limit
        assert "Name:" in read_trace_text("/proc/self/status", 2**20)
    big = tmp_path / "big.jsonl"
    big.write_bytes(b" " * (2 * 2**20))
    with pytest.raises(TraceError, match=r"the trace file is 2\.0 MB; the limit is 1 MB"):  # by its size, unread
        read_trace_text(big, 2**20)
    assert read_trace_text(big, 3 * 2**20) == " " * (2 * 2**20)
