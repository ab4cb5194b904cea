"""A method's own round record (`RoundRecord.own`, declared on its `MethodSpec.record`): sage-cost's budgets
weighed and SMART's growth and weighing. Traces written before it (formats 1 and 2: the columns flat in every
record) read as today's, their columns folded into the method's own record; a trace whose own record is not
its method's, or does not hold together with its round, is refused in one sentence. No model: hand-built
records (tests/app_records.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
from app_records import header, sage_records

from sage_core.errors import ConfigError, TraceError
from sage_core.methods import MethodSpec, method_spec, register, registered
from sage_core.methods.budget import SageCostRecord
from sage_core.methods.smart import SmartRecord
from sage_core.records import TRACE_FORMAT, OwnRecord, record_to_dict, round_fields, trace_lines
from sage_core.studies.explain import describe_round
from sage_core.trace_check import parse_trace

#: Round 1 of `sage_records()` verifies a tree of five nodes (a chain of three, two siblings at depth 1).
BUDGETS = {
    "budget_nodes": [5, 3],
    "budget_depths": [3, 3],
    "budget_expected": [2.25, 2.0],
    "budget_rates": [410.5, 380.0],
    "budget_chosen": 5,
}
#: SMART's growth of that tree, node by node, and its weighing: the five nodes it kept, one refusal.
GROWTH = {
    "budget_nodes": [1, 2, 3, 4, 5],
    "budget_depths": [1, 2, 3, 3, 3],
    "budget_expected": [0.9, 1.71, 2.43, 2.48, 2.52],
    "budget_rates": [300.0, 350.0, 400.0, 405.0, 406.0],
    "budget_chosen": 5,
}
WEIGHING = {
    "node_ratios": [4.5, 3.25, 2.5, 1.75, 1.5],
    "node_speedups": [1.0, 1.2, 1.3, 1.4, 1.45],
    "cut_ratios": [0.75],
    "cut_speedups": [1.5],
}
REFUSAL = {"cut_parents": [2], "cut_tokens": [77], "cut_probs": [0.02], "cut_rules": ["cost"]}


def lines_of(method: str) -> list[str]:
    return list(trace_lines(header(method), [replace(r, method=method) for r in sage_records()]))


def as_format_2(lines: list[str], flat: dict, shared: dict | None = None) -> list[str]:
    """The trace as format 2 wrote it: no `own`; every record with the former columns flat, empty but in
    round 1 (`flat`, and `shared` columns beside them)."""
    empty = {"budget_nodes": [], "budget_depths": [], "budget_expected": [], "budget_rates": []}
    empty |= {"budget_chosen": None, "node_ratios": [], "node_speedups": [], "cut_ratios": [], "cut_speedups": []}
    out = []
    for line in lines:
        row = json.loads(line)
        if "header" in row:
            row["header"]["format"] = "sage-trace/2"
        else:
            row.pop("own")
            row |= {**empty, **flat, **(shared or {})} if row["round"] == 1 else empty
        out.append(json.dumps(row))
    return out


def test_a_format_2_sage_cost_trace_folds_its_budget_columns_into_its_own_record():
    head, records = parse_trace(as_format_2(lines_of("sage-cost"), BUDGETS))
    assert head.format == TRACE_FORMAT and method_spec("sage-cost").record is SageCostRecord
    assert records[0].own is None and records[2].own is None  # nothing weighed there: no own record
    own = records[1].own
    assert own == SageCostRecord((5, 3), (3, 3), (2.25, 2.0), (410.5, 380.0), 5)
    assert "5 nodes (depth 3): 2.25 accepted expected, 410 tokens/s (chosen)" in describe_round(records[1])
    written = list(trace_lines(head, records))  # written back as today's format, and read the same
    assert json.loads(written[2])["own"] == {"type": "SageCostRecord", **BUDGETS}
    assert "budget_nodes" not in json.loads(written[2]) and parse_trace(written)[1] == records


def test_a_format_2_smart_trace_folds_its_growth_and_weighing_into_its_own_record():
    _, records = parse_trace(as_format_2(lines_of("smart"), GROWTH | WEIGHING, REFUSAL))
    own = records[1].own
    assert isinstance(own, SmartRecord) and own.budget_chosen == 5 and own.node_ratios == (4.5, 3.25, 2.5, 1.75, 1.5)
    assert own.cut_ratios == (0.75,) and records[1].cut_rules == ("cost",)  # the refusal: shared column, own ratio
    said = describe_round(records[1])
    assert "It stopped at 5 nodes (depth 3)" in said and "node 0 4.50 > 1.00" in said
    assert "under node 2 (draft p 0.020) 0.75 ≤ 1.50" in said


def test_a_format_2_trace_of_a_method_without_an_own_record_drops_the_empty_columns():
    _, records = parse_trace(as_format_2(lines_of("sage"), {}))
    assert all(r.own is None for r in records)
    assert [r.tree_tokens for r in records] == [r.tree_tokens for r in sage_records()]


def test_a_format_2_trace_whose_budgets_do_not_hold_together_is_refused_in_one_sentence():
    bad = {**BUDGETS, "budget_chosen": 4}
    with pytest.raises(TraceError) as refused:
        parse_trace(as_format_2(lines_of("sage-cost"), bad))
    said = str(refused.value)
    assert (
        said
        == "line 3 of the 'sage-cost' run is not a valid round: the budget chosen must be one of the budgets weighed"
    )


@pytest.mark.parametrize("method", ["sage-cost", "smart", "sage"])
def test_a_current_trace_with_a_former_flat_column_is_refused_not_ignored(method):
    lines = lines_of(method)
    row = json.loads(lines[2])
    row["budget_nodes"] = [5, 3]  # format 2's column, in a format-3 round: read nowhere, so refused
    with pytest.raises(TraceError) as refused:
        parse_trace([*lines[:2], json.dumps(row), *lines[3:]])
    assert str(refused.value) == (
        f"line 3 of the {method!r} run is not a valid round: 'budget_nodes' is a column of trace formats 1 and 2, "
        f"which {TRACE_FORMAT} keeps in the round's own record"
    )
    assert parse_trace(lines)  # the same trace without it reads


def own_line(lines: list[str], own: object) -> list[str]:
    row = json.loads(lines[2])
    row["own"] = own
    return [*lines[:2], json.dumps(row), *lines[3:]]


@pytest.mark.parametrize(
    ("method", "own", "said"),
    [
        (
            "sage-cost",
            {"type": "SmartRecord", **GROWTH},
            "its own record is a 'SmartRecord', not its method's SageCostRecord",
        ),
        ("sage-cost", {"type": "SageCostRecord", **BUDGETS, "speed": 3}, "its own record has no field 'speed'"),
        ("sage-cost", [5, 3], "its own record must be an object of SageCostRecord's fields"),
        ("sage-cost", {"type": "SageCostRecord", **BUDGETS, "budget_chosen": 7}, "the budget chosen must be one of"),
        (
            "sage-cost",
            {"type": "SageCostRecord", **BUDGETS, "budget_rates": [1.0]},
            "one node count, depth, expectation",
        ),
        ("smart", {"type": "SmartRecord", **GROWTH, **WEIGHING}, "one ratio per tree node and per cut candidate"),
        ("smart", {"type": "SmartRecord", **GROWTH, "node_ratios": [1.0] * 5}, "the speedup it was weighed against"),
        ("sage", {"type": "SageCostRecord", **BUDGETS}, "it holds an own record, but its method keeps none"),
        (
            "sage-cost",
            {"type": "SageCostRecord", **BUDGETS, "budget_nodes": [1, 3], "budget_chosen": True},
            "the budget chosen must be a whole number of nodes or null, not True",  # (True == 1: it read as 1)
        ),
        ("sage-cost", {}, "it is an empty own record: its method's is a SageCostRecord with its type and fields"),
        ("smart", {**GROWTH}, "its own record names no type: its method's is a SmartRecord"),
        (
            "sage-cost",
            {"type": "SageCostRecord", **{k: [1] * 5000 for k in BUDGETS if k != "budget_chosen"}},
            "its own record's budget_nodes holds 5000 entries; the limit is 4097",
        ),
    ],
)
def test_a_malformed_own_record_is_refused_in_one_sentence(method, own, said):
    with pytest.raises(TraceError, match=r"^line 3 of the '[\w-]+' run is not a valid round: ") as refused:
        parse_trace(own_line(lines_of(method), own))
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_cost_rule_is_smarts_own_and_said_in_its_words():
    lines = lines_of("sage-cost")
    row = json.loads(lines[2])
    row |= {**REFUSAL, "own": {"type": "SageCostRecord", **BUDGETS}}  # sage-cost refuses nothing for its cost
    with pytest.raises(TraceError, match=r"cut rules must be one of width, threshold, budget$"):
        parse_trace([*lines[:2], json.dumps(row), *lines[3:]])
    from app.panels import cut_reason

    assert cut_reason("cost") == SmartRecord.cut_rules["cost"] and cut_reason("width").startswith("cut by width")


def test_one_list_of_a_records_fields_and_the_own_record_last():
    record = replace(sage_records()[1], method="sage-cost", own=SageCostRecord((5,), (3,), (2.0,), (400.0,), 5))
    names = [f.name for f in round_fields()]
    assert names[-1] == "own" and list(record_to_dict(record))[: len(names)] == names
    assert record_to_dict(record)["own"] == {
        "type": "SageCostRecord",
        "budget_nodes": [5],
        "budget_depths": [3],
        "budget_expected": [2.0],
        "budget_rates": [400.0],
        "budget_chosen": 5,
    }


@dataclass
class Loose(OwnRecord):
    number: int = 0


@dataclass(frozen=True)
class Clashing(OwnRecord):
    alpha: float = 0.0


@pytest.mark.parametrize(
    ("record", "said"),
    [
        (dict, "must be a dataclass subclassing records.OwnRecord"),
        (Loose, "(Loose) must be frozen"),
        (Clashing, "reuses a round record's field: alpha"),
    ],
)
def test_a_method_whose_own_record_a_round_cannot_carry_is_refused(record, said):
    spec = MethodSpec("odd", "Odd", "Odd", "odd", "#111111", 9, drafts=False, record=record)
    with pytest.raises(ConfigError, match=r"the own record of 'odd' ") as refused:
        register(spec)
    assert said in str(refused.value)


@dataclass(frozen=True)
class Checked(OwnRecord):
    number: int = 0

    def __post_init__(self) -> None:
        if self.number < 0:
            raise ConfigError("a checked number must not be negative,\nnot " + str(self.number))


def test_an_own_record_its_class_refuses_is_refused_in_one_sentence():
    spec = MethodSpec("checked", "Checked", "Checked", "checked", "#222222", 9, drafts=False, record=Checked)
    with registered(spec):
        lines = own_line(lines_of("checked"), {"type": "Checked", "number": 4})
        assert parse_trace(lines)[1][1].own == Checked(4)
        with pytest.raises(TraceError) as refused:
            parse_trace(own_line(lines, {"type": "Checked", "number": -1}))
    assert str(refused.value) == (
        "line 3 of the 'checked' run is not a valid round: its own record is not a Checked: a checked number must "
        "not be negative,"
    )
