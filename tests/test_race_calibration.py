"""The race's calibration picture, what adaptation bought and the acceptance histogram, rendered from a race's
own records (app/render.py over sage_core/studies/premise.py; no model)."""

from __future__ import annotations

from dataclasses import replace

from app_records import header, sage_records, static_records, synthetic_race

from app import render
from app.race import Lane
from app.view import race_view

SURE, UNSURE = (0.97, 0.01, 0.01, 0.01), (0.4, 0.3, 0.2, 0.1)


def test_adaptation_bought_is_said_beside_the_premise_when_sage_and_sage_frozen_both_ran():
    data = synthetic_race()
    assert "What adaptation bought" not in render.table_html(race_view(data))  # no sage-frozen lane: no sentence
    frozen = [replace(r, method="sage-frozen") for r in sage_records()]
    frozen_header = replace(header("sage-frozen"), settings={"sage-frozen": {"alpha": 0.85}})
    data.lanes.append(Lane("sage-frozen", frozen_header, frozen))
    html = render.table_html(race_view(data))
    # the same trees round for round: the same work, adaptation bought nothing (whatever the clock said)
    assert "What adaptation bought on this input: nothing. " in html and "α held at 0.85" in html
    assert "same trees and accepted the same tokens" in html
    slower = [
        replace(
            r,
            accepted_nodes=(),
            accepted_tokens=(),
            total_seconds=r.total_seconds * 2,
            new_tokens=r.new_tokens[-1:],
            tree_tokens=(),
            tree_parents=(),
            tree_draft_probs=(),
        )
        for r in frozen
    ]
    data.lanes[-1] = Lane("sage-frozen", frozen_header, slower)
    assert (
        "accepted more draft tokens per round and finished sooner than SAGE with α held at 0.85"
        in render.table_html(race_view(data))
    )


def test_alpha_is_pictured_against_acceptance_on_the_static_trees_rounds_with_counts():
    data = synthetic_race()
    static = data.lanes[1].records
    data.lanes[1] = Lane(
        "static",
        data.lanes[1].header,
        [
            replace(r, root_top_probs=SURE if r.accepted_length > 1 else UNSURE, root_top_tokens=(1, 2, 3, 4))
            if r.phase == "decode"
            else r
            for r in static
        ],
    )
    html = render.table_html(race_view(data))
    assert "on SD-Tree's 3 rounds, where α does not choose the tree" in html
    assert "sage-calibration" in html and "α in [0, 0.5)" in html and "α in [0.8, 0.9)" in html
    assert "Acceptance histogram" in html
    assert len(static_records()) == 4
