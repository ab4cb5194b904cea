"""The panels' colours stay apart for readers with a colour-vision deficiency and on a washed-out
projector: CIEDE2000 distances under Machado et al. (2009) simulations (app/palette.py)."""

from __future__ import annotations

import itertools

import pytest

from app import palette
from app.palette import VERMILLION
from sage_core.methods import Look, look
from sage_core.methods.builtin import BUILTIN


def _closest(colours: list[str]) -> tuple[float, str, str, str]:
    return min(
        (palette.delta_e(a, b, condition), a, b, condition)
        for a, b in itertools.combinations(colours, 2)
        for condition in palette.CONDITIONS
    )


def test_ciede2000_matches_sharmas_reference_pairs():
    """Sharma, Wu & Dalal (2005), table 1, pairs 1, 7, 17 and 25."""
    pairs = [
        ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
        ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
        ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
        ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ]
    for first, second, expected in pairs:
        assert palette.ciede2000(first, second) == pytest.approx(expected, abs=1e-4)


def test_the_simulations_merge_what_each_deficiency_cannot_tell_apart():
    """Negative controls: pairs far apart for normal vision that each simulation brings under the bar
    (so the palette checks below can fail)."""
    controls = {
        "deuteranopia": ("#D0312D", "#3F8E2F"),  # red and green
        "protanopia": ("#7c3aed", "#2563eb"),  # the old panel ①'s purple α and blue D(α)
        "tritanopia": ("#1E90FF", "#20B2AA"),  # blue and teal
    }
    for condition, (a, b) in controls.items():
        assert palette.delta_e(a, b) > palette.MIN_DELTA_E, (a, b)
        assert palette.delta_e(a, b, condition) < palette.MIN_DELTA_E, (condition, a, b)
    assert palette.delta_e("#1E90FF", "#20B2AA", "deuteranopia") > palette.MIN_DELTA_E  # only tritanopia merges


def test_method_colours_stay_apart():
    """The built-in methods' colours (their registry entries, the one place a method's look is set) stay
    apart under every condition; a method added later keeps its own look, or the default one."""
    distance, a, b, condition = _closest([spec.colour for spec in BUILTIN])
    assert distance >= palette.MIN_DELTA_E, (a, b, condition, distance)
    assert look("no such method") == Look() and look("sage") == Look(VERMILLION, "solid", "circle")


def test_panel_one_series_stay_apart():
    distance, a, b, condition = _closest([series.colour for series in palette.SERIES.values()])
    assert distance >= palette.MIN_DELTA_E, (a, b, condition, distance)


def test_the_tree_colours_stay_apart():
    colours = [palette.ACCEPTED, palette.BONUS, palette.REJECTED, palette.CUT]
    distance, a, b, condition = _closest(colours)
    assert distance >= palette.MIN_DELTA_E, (a, b, condition, distance)


def test_every_series_has_a_second_cue_besides_colour():
    series = list(palette.SERIES.values())
    assert len({(s.dash, s.marker) for s in series}) == len(series)
    assert len({spec.dash for spec in BUILTIN}) == len({spec.marker for spec in BUILTIN}) == len(BUILTIN)
