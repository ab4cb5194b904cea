"""What the page says a visitor can check with their own eyes: a one-pass twin told apart from its method by more
than a marker (its own paler colour and its own dash, its name saying so), the Draw tab asking about the
drawing rather than keeping the landing's question, and counts read with their plural."""

from __future__ import annotations

from app_records import synthetic_race

from app import figure_style, panels
from app.sketch import SKETCH_PROMPT
from app.ui import draw_tab_opened


def test_a_one_pass_twin_differs_from_its_method_in_colour_and_dash_and_says_so():
    for method in ("sage", "static", "smart"):
        twin = f"{method}/one-pass"
        mine, theirs = figure_style.method_line(method), figure_style.method_line(twin)
        assert mine["color"] != theirs["color"] and mine["dash"] != theirs["dash"], (mine, theirs)
        assert "one-pass" in panels.short_label(twin)
    assert figure_style.paler("#000000") == "#737373" and figure_style.paler("#ffffff") == "#ffffff"


def test_panel_five_draws_the_twin_dotted_and_paler_under_its_own_name():
    data = synthetic_race()
    lane = data.lanes[0].records
    records = {"sage": lane, "sage/one-pass": lane}
    fig = panels.race_figure(records)
    first, second = fig.data
    assert first.line.dash != second.line.dash and first.line.color != second.line.color
    assert second.name.startswith("SAGE · one-pass draft")


def test_the_draw_tab_replaces_a_prompt_the_page_gave_and_keeps_the_visitors_own():
    opened = draw_tab_opened(["describe the chart."])
    pad = {"composite": None, "layers": []}
    assert opened(pad, "describe the chart.")[1] == SKETCH_PROMPT
    assert opened(pad, "")[1] == SKETCH_PROMPT
    assert opened(pad, "is the red shape large?")[1] != SKETCH_PROMPT  # (gr.skip(): left as it is)


def test_the_tree_panel_shades_and_names_the_level_where_the_draft_was_least_sure():
    from dataclasses import replace

    from app_records import sage_records

    from app.tree_panel import least_sure_level

    records = sage_records()
    round_one = next(r for r in records if r.phase == "decode")
    assert round_one.tree.depths == (1, 2, 3, 1, 1)
    unsure = replace(round_one, tree_draft_probs=(0.9, 0.4, 0.7, 0.05, 0.05))  # depth 2's best guess: 0.4
    assert least_sure_level(unsure) == (2, 0.4)
    fig = panels.tree_figure([records[0], unsure], round_one.round, synthetic_race().token_texts)
    assert "least sure at depth 2 (shaded): its best guess p 0.40" in fig.layout.title.text
    assert [(s.x0, s.x1) for s in fig.layout.shapes] == [(1.55, 2.45)]


def test_the_teaching_recording_hesitates_and_steps_as_a_labelled_replay():
    """The shipped recording (assets/teaching) is one where the hesitant draft hesitates: SAGE's α falls below 0.5
    and its root goes at least 5 wide; the button steps through it round by round, each step saying it is a
    recording and what α did, read off the recording."""
    from app.handlers import Handlers
    from app.race_trace import load_race
    from app.stepping import SteppedRaces
    from app.teaching import TEACHING_TRACE, step_teaching

    assert TEACHING_TRACE.stat().st_size < 200_000
    recorded = load_race(TEACHING_TRACE)
    sage = next(lane for lane in recorded.lanes if lane.key == "sage")
    rounds = [r for r in sage.records if r.phase == "decode"]
    assert min(r.alpha for r in rounds if r.alpha is not None) < 0.5
    assert max(r.root_width for r in rounds) >= 5
    assert len({lane.text for lane in recorded.lanes}) == 1  # lossless: every side the target's answer

    class FakePage:  # every component named by its attribute
        def __getattr__(self, name: str) -> str:
            return name

    handlers = Handlers.__new__(Handlers)
    handlers.page = FakePage()
    handlers.stepped_races = SteppedRaces()
    handlers.settings = type("S", (), {"limits": type("L", (), {"max_trace_bytes": 10_000_000})()})()
    step = step_teaching(handlers)
    first = step(None, None)
    assert "recording" in first["status"] and "α moved between 0.2" in first["status"], first["status"]
    second = step(None, first["stepper"])
    assert second["stepper"] is first["stepper"] and second["stepper"].round == 1


def test_reading_a_pictures_text_gets_the_asking_note_from_its_measured_figure():
    """The pair was taught to read a picture's text but measured right 1 time in 54, and how many shapes a picture
    holds 0.855 (under the note's 9 times in 10): each note carries its figure and its command; how many of one
    shape (0.89 or more) gets none."""
    from pathlib import Path

    from sage_core import load_media
    from sage_world.asking import question_note

    picture = load_media(Path(__file__).resolve().parents[1] / "assets" / "landing" / "picture.png")
    note = question_note("what does it say?", picture)
    assert "read the text in a picture" in note[0] and "1 time in 54" in note[0] and "check_builtin_pair" in note[0]
    assert "lossless" in note[1] and "target's own answer" in note[1]
    counted = question_note("how many red shapes are there?", picture)
    assert "count the shapes" in counted[0] and "0.855" in counted[0] and "check_builtin_pair" in counted[0]
    assert question_note("how many circles are there?", picture) == ()
    assert question_note("describe the image in detail.", picture) == ()


def test_a_count_of_one_is_said_in_the_singular():
    """'1 rounds' was printed for a one-round race: the export's budget sentence says its one round."""
    from app.export.budget import Budget

    assert "its one round" in Budget().sentence(1)
    assert "all 2 rounds" in Budget().sentence(2)
    assert "1 rounds" not in Budget(frames=1).sentence(1)
