"""Traces are checked for consistency, not only for types: a forged trace cannot show a speedup its own
steps do not add up to, an accepted path that is no path of its tree, or settings no run could have had."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from app_records import header, sage_records, static_records, synthetic_race

from app.race_trace import parse_race, race_trace_lines
from sage_core.errors import TraceError
from sage_core.records import trace_lines
from sage_core.trace_check import parse_trace


def lines_of(method: str = "sage") -> list[str]:
    records = sage_records() if method == "sage" else static_records()
    return list(trace_lines(header(method), records))


def edited(lines: list[str], line: int, **changes: object) -> list[str]:
    row = json.loads(lines[line])
    key = "header" if "header" in row else next(iter(row))
    if key == "header":
        row["header"].update(changes)
    else:
        row.update(changes) if "round" in row else row[key].update(changes)
    return [*lines[:line], json.dumps(row), *lines[line + 1 :]]


def step_line(lines: list[str], step: int) -> int:
    return next(i for i, line in enumerate(lines) if json.loads(line).get("round") == step)


def test_the_unedited_trace_reads_back():
    _, records = parse_trace(lines_of())
    assert [r.round for r in records] == [0, 1, 2]
    assert parse_race(list(race_trace_lines(synthetic_race()))).finished


def forge_extra_token(lines: list[str]) -> list[str]:
    """A faster-looking run: one more new token in step 1 (and the totals made to agree)."""
    row = json.loads(lines[step_line(lines, 1)])
    row["new_tokens"] = [*row["new_tokens"], 99]
    row["new_token_texts"] = [*row["new_token_texts"], " extra"]
    out = [*lines]
    out[step_line(lines, 1)] = json.dumps(row)
    for step in (1, 2):
        later = json.loads(out[step_line(out, step)])
        later["total_tokens"] += 1
        out[step_line(out, step)] = json.dumps(later)
    return out


FORGERIES: list[tuple[str, Callable[[list[str]], list[str]], str]] = [
    ("new tokens beyond accepted + bonus", forge_extra_token, "not the accepted tokens and then the bonus"),
    ("an accepted path of siblings", lambda ls: edited(ls, step_line(ls, 1), accepted_nodes=[0, 3],
     accepted_tokens=[11, 40]), "not a path of the tree"),
    ("an accepted token that is not its node's", lambda ls: edited(ls, step_line(ls, 1), accepted_tokens=[11, 12, 77],
     new_tokens=[11, 12, 77, 14]), "not the token of its node"),
    ("a prefill with a tree", lambda ls: edited(ls, step_line(ls, 0), tree_tokens=[5], tree_parents=[-1],
     tree_draft_probs=[0.5]), "the prefill drafts no tree"),
    ("a step that adds nothing", lambda ls: edited(ls, step_line(ls, 2), new_tokens=[], new_token_texts=[],
     total_tokens=5), "at least one token"),
    ("totals that do not add up", lambda ls: edited(ls, step_line(ls, 2), total_seconds=0.75),
     "not the rounds' times added up"),
    ("parts longer than the round", lambda ls: edited(ls, step_line(ls, 1), draft_seconds=5.0),
     "take longer than the whole round"),
    ("more tokens than the limit", lambda ls: edited(ls, 0, max_new_tokens=4), "more than its limit of 4"),
    ("a node budget no run could have", lambda ls: edited(ls, 0, settings={"sage": {"node_budget": 10**6}}),
     r"node_budget must be a whole number in \[1, 256\]"),
    ("a temperature generate fails at", lambda ls: edited(ls, 0, sampling={"temperature": 1e-40, "top_p": 1.0,
     "top_k": 50, "seed": 1}), "temperature must be 0 \\(greedy\\) or a number in"),
    ("a token limit past the library's", lambda ls: edited(ls, 0, max_new_tokens=10**6),
     r"max new tokens must be a whole number in \[1, 4096\]"),
    ("a 5000-digit integer", lambda ls: [ls[0], ls[1].replace('"round": 0', '"round": ' + "9" * 5000), *ls[2:]],
     "line 2 holds a number too long to be a trace value"),
    ("a 4000-digit integer", lambda ls: [ls[0], ls[1].replace('"round": 0', '"round": ' + "9" * 4000), *ls[2:]],
     "must be non-negative integers"),
    ("a lone surrogate in the prompt", lambda ls: [ls[0].replace('"where is it?"', '"where \\ud800 is it?"'),
     *ls[1:]], "must be text \\(valid Unicode\\)"),
    ("a lone surrogate in a token's text", lambda ls: [ls[0], ls[1].replace('"the"', '"\\udc00"'), *ls[2:]],
     "each new token needs its text"),
    ("cut candidates past the tree's bound", lambda ls: edited(ls, step_line(ls, 1), cut_parents=[-1] * 5000,
     cut_tokens=[7] * 5000, cut_probs=[0.1] * 5000, cut_rules=["width"] * 5000),
     "its cut_parents holds 5000 entries; the limit is 4097 \\(a round's columns are bounded as its tree is"),
    ("offers past the tree's bound", lambda ls: edited(ls, step_line(ls, 1), offer_parents=[-1] * 4098,
     offer_widths=[1] * 4098), "its offer_parents holds 4098 entries; the limit is 4097"),
    ("levels past the deepest tree", lambda ls: edited(ls, step_line(ls, 1), level_thresholds=[0.1] * 257),
     "its level_thresholds holds 257 entries; the limit is 256"),
    ("tried nodes past the tree's bound", lambda ls: edited(ls, step_line(ls, 1), tried_nodes=[0] * 4098,
     accept_probs=[1.0] * 4098), "its tried_nodes holds 4098 entries"),
    ("a 4000-digit time", lambda ls: [ls[0], ls[1].replace('"round_seconds": 0.5', '"round_seconds": ' + "9" * 4000),
     *ls[2:]], "finite, non-negative"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "forge", "message"), FORGERIES, ids=[c[0] for c in FORGERIES])
def test_a_forged_trace_is_refused_with_its_sentence(case, forge, message):
    with pytest.raises(TraceError, match=message):
        parse_trace(forge(lines_of()))


def test_a_forged_race_trace_is_refused_too():
    lines = list(race_trace_lines(synthetic_race()))
    sage_step = next(i for i, line in enumerate(lines) if json.loads(line).get("round") == 1)
    forged = edited(lines, sage_step, accepted_nodes=[0, 3], accepted_tokens=[11, 40])
    with pytest.raises(TraceError, match="not a path of the tree"):
        parse_race(forged)


def test_a_line_separator_inside_a_string_is_text_not_a_line_end(tmp_path):
    """A trace written with `ensure_ascii=False` whose token text holds U+2028 (valid JSON Lines: only "\\n" ends a
    line) was refused as "line 1 is not JSON": `str.splitlines` splits at U+2028 and U+2029 too."""
    from app.race_trace import load_race
    from sage_core.trace_check import load_trace

    lines = [line.replace('"the"', '"the\\u2028"').replace('" red"', '" red\\u2029"') for line in lines_of()]
    written = "\r\n".join(json.dumps(json.loads(line), ensure_ascii=False) for line in lines) + "\n"
    assert "\u2028" in written and "\u2029" in written
    path = tmp_path / "run.jsonl"
    path.write_bytes(written.encode("utf-8"))
    _, records = load_trace(path)
    assert any("\u2028" in text for r in records for text in r.new_token_texts)
    race = load_race(path)
    assert any("\u2028" in text for text in race.token_texts.values())
