"""Traces written before the renames still replay, read under today's names; traces written now carry
today's names only, and the dynamic tree's settings in their header. A caller (form, API, flag, keyword)
who uses an old name is told the new one.

Before: a record's `step` and `step_seconds`, the SAGE settings' `top_k` and `expansion_threshold`, and
no dynamic tree settings. Now: `round`, `round_seconds`, `candidates`, `threshold_base`, `dynamic`. The
landing trace the app replays on every visit is kept as it was recorded, in the old names, as the
proof in use; the tests below also turn a trace written now back into the old names.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from app_records import header, sage_records
from PIL import Image

from app.race_trace import load_race, parse_race, race_trace_lines
from sage_core import DecodeConfig, DynamicConfig, SageConfig, decode, load_trace, save_trace
from sage_core.cli import build_parser, main
from sage_core.errors import TraceError
from sage_core.method_settings import FrozenSageConfig
from sage_core.records import TRACE_FORMAT, trace_lines
from sage_core.trace_check import parse_trace, recorded_settings

LANDING = Path(__file__).resolve().parent / "data" / "race-old-names.jsonl"  # the landing trace first shipped
OLD_RECORD = {"round": "step", "round_seconds": "step_seconds"}
OLD_SAGE = {"candidates": "top_k", "threshold_base": "expansion_threshold"}


def in_old_names(lines: list[str]) -> list[str]:
    """The lines of a trace as a trace written before the renames holds them (format 1: SAGE's settings
    in their own field, no dynamic settings, no settings of the run's own)."""
    out = []
    for line in lines:
        row = json.loads(line)
        if "header" in row:
            settings = row["header"].pop("settings")
            row["header"]["sage"] = {OLD_SAGE.get(k, k): v for k, v in settings["sage"].items()}
            row["header"]["format"] = "sage-trace/1"
        else:
            row = {OLD_RECORD.get(k, k): v for k, v in row.items()}
        out.append(json.dumps(row))
    return out


def sage_header():
    return replace(header("sage"), settings={"sage": asdict(SageConfig(candidates=12, threshold_base=0.2))})


def test_the_landing_trace_is_in_the_old_names_and_replays():
    rows = [json.loads(line) for line in LANDING.read_text(encoding="utf-8").splitlines() if line.strip()]
    headers = [row["header"] for row in rows if "header" in row]
    records = [row for row in rows if "header" not in row and "race" not in row]
    assert headers and records
    assert all("step" in row and "step_seconds" in row and "round" not in row for row in records)
    assert all("top_k" in h["sage"] and "candidates" not in h["sage"] and "dynamic" not in h for h in headers)
    data = load_race(LANDING)
    assert [lane.method for lane in data.lanes] == [h["method"] for h in headers]
    for lane, old in zip(data.lanes, headers, strict=True):
        assert lane.header is not None and set(lane.header.settings) == {"sage"}  # format 1: SAGE's only
        sage = lane.header.settings_of("sage")
        assert sage["candidates"] == old["sage"]["top_k"] and "top_k" not in sage
        assert sage["threshold_base"] == old["sage"]["expansion_threshold"]
        assert recorded_settings(lane.header, "sage").candidates == old["sage"]["top_k"]
        mine = [row for row in records if row["method"] == lane.method]
        assert [r.round for r in lane.records] == [row["step"] for row in mine] == list(range(len(mine)))
        assert [r.round_seconds for r in lane.records] == [row["step_seconds"] for row in mine]
    assert data.finished


def test_a_trace_written_now_uses_the_new_names_only():
    lines = list(trace_lines(sage_header(), sage_records()))
    written = "\n".join(lines)
    for old in ('"step"', '"step_seconds"', '"top_k"', '"expansion_threshold"'):
        assert old not in written
    for new in ('"round"', '"round_seconds"', '"candidates"', '"threshold_base"'):
        assert new in written


def test_a_trace_in_the_old_names_reads_as_the_same_run():
    lines = list(trace_lines(sage_header(), sage_records()))
    old = in_old_names(lines)
    assert '"step": 1' in "\n".join(old) and '"expansion_threshold": 0.2' in old[0]
    header_now, records_now = parse_trace(lines)
    header_then, records_then = parse_trace(old)
    assert records_then == records_now == sage_records()
    assert header_then == header_now
    assert recorded_settings(header_then, "sage") == SageConfig(candidates=12, threshold_base=0.2)


def test_the_landing_race_written_now_and_turned_back_reads_the_same():
    data = load_race(LANDING)
    lines = list(race_trace_lines(data))
    assert '"round": 0' in "\n".join(lines) and '"step": 0' not in "\n".join(lines)  # written now: new names
    again = parse_race([lines[0], *in_old_names(lines[1:])])
    assert [lane.records for lane in again.lanes] == [lane.records for lane in data.lanes]
    assert [lane.header for lane in again.lanes] == [lane.header for lane in data.lanes]


def test_an_old_value_under_a_new_name_is_still_checked():
    old = in_old_names(list(trace_lines(sage_header(), sage_records())))
    row = json.loads(old[0])
    row["header"]["sage"]["top_k"] = 99
    with pytest.raises(TraceError, match="candidates must be a whole number in \\[2, 20\\], not 99"):
        parse_trace([json.dumps(row), *old[1:]])


@pytest.mark.parametrize(
    ("dynamic", "message"),
    [
        ({"depth": 0, "candidates": 10, "total_tokens": 59}, "depth must be a whole number in \\[1, 10\\], not 0"),
        ({"depth": 5, "candidates": 10, "total_tokens": 999}, "total_tokens must be a whole number in \\[1, 256\\]"),
        ([5, 10, 59], "the settings of dynamic must be an object"),
    ],
)
def test_a_header_with_impossible_dynamic_settings_is_refused(dynamic, message):
    lines = list(trace_lines(sage_header(), sage_records()))
    row = json.loads(lines[0])
    row["header"]["settings"]["dynamic"] = dynamic
    with pytest.raises(TraceError, match=message):
        parse_trace([json.dumps(row), *lines[1:]])
    old = json.loads(in_old_names(lines)[0])  # format 1: the dynamic tree's settings in their own field
    old["header"]["dynamic"] = dynamic
    with pytest.raises(TraceError, match=message):
        parse_trace([json.dumps(old), *in_old_names(lines)[1:]])


def test_a_format_1_header_reads_as_one_settings_mapping():
    """Before one mapping, a header held SAGE's settings (`sage`), the dynamic tree's (`dynamic`) and the
    run's own method's (`settings`) apart; they read as today's `settings`, by method name."""
    frozen = replace(
        header("sage-frozen"), settings={"sage": asdict(SageConfig(window=4)), "sage-frozen": {"alpha": 0.3}}
    )
    lines = list(trace_lines(frozen, [replace(r, method="sage-frozen") for r in sage_records()]))
    row = json.loads(lines[0])
    settings = row["header"].pop("settings")
    row["header"].update(format="sage-trace/1", sage=settings["sage"], settings=settings["sage-frozen"])
    row["header"]["dynamic"] = asdict(DynamicConfig(depth=3))
    header_then, _ = parse_trace([json.dumps(row), *lines[1:]])
    assert header_then.format == TRACE_FORMAT
    assert header_then.settings == {**settings, "dynamic": asdict(DynamicConfig(depth=3))}
    assert recorded_settings(header_then) == FrozenSageConfig(0.3)
    assert recorded_settings(header_then, "sage") == SageConfig(window=4)


def test_a_run_records_the_dynamic_tree_settings_it_used(tiny_pair, image, tmp_path):
    pair = tiny_pair("qwen2_vl")
    settings = DynamicConfig(depth=3, candidates=4, total_tokens=9)
    run = decode(pair, image, "Describe the picture.", DecodeConfig("dynamic", 12, dynamic=settings))
    run.run_to_end()
    assert run.header.settings_of("dynamic") == {"depth": 3, "candidates": 4, "total_tokens": 9}
    assert all(record.node_count <= settings.total_tokens for record in run.records)
    path = tmp_path / "dynamic.jsonl"
    save_trace(path, run.header, run.records)
    assert '"dynamic": {"depth": 3, "candidates": 4, "total_tokens": 9}' in path.read_text(encoding="utf-8")
    assert '"sage": {' in path.read_text(encoding="utf-8")  # one mapping: SAGE's beside it
    assert load_trace(path) == (run.header, run.records)
    # every run records them, as it records SAGE's settings
    other = decode(pair, image, "Describe the picture.", DecodeConfig("sage", 4, dynamic=settings))
    assert other.header.settings == {"dynamic": asdict(settings), "sage": asdict(SageConfig())}


def test_a_caller_using_an_old_setting_name_is_told_the_new_one():
    """Only traces are still read under the old names; a caller who passes one gets one sentence."""
    from app.inputs import InputProblem, RaceForm
    from sage_core.errors import ConfigError, GenerateError
    from sage_core.hf_generate import _sage_config

    for values, old, new in (
        ({"top_k": "12"}, "top_k", "candidates"),
        ({"expansion_threshold": 0.2}, "expansion_threshold", "threshold_base"),
    ):
        with pytest.raises(ConfigError, match=f"'{old}' is the old name of SAGE's '{new}', no longer read"):
            SageConfig.from_form(values)
    with pytest.raises(ConfigError, match="'top_k' is the old name of the dynamic tree's 'candidates'"):
        DynamicConfig.from_form({"depth": "3", "top_k": 4.0, "total_tokens": 9})
    assert DynamicConfig.from_form({"depth": "3", "candidates": 4.0, "total_tokens": 9}) == DynamicConfig(3, 4, 9)
    with pytest.raises(GenerateError, match="'sage_top_k' is the old name of SAGE's 'sage_candidates'"):
        _sage_config(None, {"sage_top_k": 12, "max_new_tokens": 5})
    kwargs: dict = {"sage_candidates": 12, "max_new_tokens": 5}
    assert _sage_config(None, kwargs).candidates == 12 and kwargs == {"max_new_tokens": 5}
    with pytest.raises(InputProblem, match="'top_k' is the old name of 'candidates', no longer read"):
        RaceForm(top_k=12)


def test_old_flag_names_are_refused_and_not_listed(capsys):
    """--top-k and --dynamic-top-k (the names before the renames) are refused in a sentence naming
    --candidates and --dynamic-candidates (not taken for --top-k-sampling); --help lists only the new names."""
    parser = build_parser()
    for old, new in (("--top-k", "--candidates"), ("--dynamic-top-k", "--dynamic-candidates")):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(["generate", "--image", "x.png", "--prompt", "hi", old, "7"])
        assert exited.value.code == 2
        assert f"error: {old} is the old name of {new}, no longer read: use {new}" in capsys.readouterr().err
    new_args = parser.parse_args(
        ["generate", "--image", "x.png", "--prompt", "hi", "--candidates", "7", "--dynamic-candidates", "3"]
    )
    assert (new_args.candidates, new_args.dynamic_candidates) == (7, 3)
    default = parser.parse_args(["generate", "--image", "x.png", "--prompt", "hi"])
    assert (default.candidates, default.dynamic_candidates) == (10, 10)
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    shown = capsys.readouterr().out
    assert "--candidates" in shown and "--dynamic-candidates" in shown
    assert "--top-k " not in shown and "--dynamic-top-k" not in shown


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--top-k", "100000"], "--top-k is the old name of --candidates, no longer read"),
        (["--method", "dynamic", "--dynamic-top-k", "0"], "--dynamic-top-k is the old name of --dynamic-candidates"),
    ],
)
def test_an_old_flag_name_gets_the_new_names_sentence(tmp_path, flags, message, capsys):
    Image.new("RGB", (56, 56), (200, 30, 30)).save(tmp_path / "red.png")
    with pytest.raises(SystemExit) as exited:  # a usage error, as argparse exits for every other
        main(["generate", "--image", str(tmp_path / "red.png"), "--prompt", "hi", "--device", "cpu", *flags])
    assert exited.value.code == 2 and message in capsys.readouterr().err
