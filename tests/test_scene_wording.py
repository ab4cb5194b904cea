"""Run 4's data: hand-drawn scenes (a visitor's sketch) and questions in other words; run 10's free wordings
and visitor words, and the graded sets they never produce."""

from __future__ import annotations

import random
import re

from sage_world import scenes, vocabulary
from sage_world.scenes import COLOURS, HAND_DRAWN, make_example
from sage_world.vocabulary import VISITOR_WORDS
from sage_world.wording import (
    BLIND,
    FREE_KINDS,
    HELD_OUT,
    LONE,
    LONE_HELD_OUT,
    TRAINING,
    UNSEEN,
    fill_slots,
    free_example,
    free_wordings,
    lone_example,
    reword,
    unseen_examples,
)


def test_hand_drawn_scenes_draw_each_object_in_its_colour_in_its_cell():
    found = total = 0
    for seed in range(10):
        example = make_example(random.Random(seed), "describe", HAND_DRAWN)
        width, height = example.image.size
        pixels = example.image.load()
        for thing in example.objects:
            row, col = divmod(thing.cell, 3)
            box = range(col * width // 3, (col + 1) * width // 3), range(row * height // 3, (row + 1) * height // 3)
            colour = COLOURS[thing.colour]
            found += any(pixels[x, y] == colour for x in box[0] for y in box[1])
            total += 1
    assert found == total


def test_hand_drawn_outlines_leave_some_shapes_hollow():
    """Half the outlines are not filled: the middle of such a circle shows the background."""
    hollow = 0
    for seed in range(30):
        image, things, background, label_map = scenes.shape_scene(random.Random(seed), 1, HAND_DRAWN)
        box = label_map.getbbox()
        assert box is not None
        centre = ((box[0] + box[2]) // 2, (box[1] + box[3]) // 2)
        if things[0].shape in ("circle", "square") and image.getpixel(centre) == scenes.BACKGROUNDS[background]:
            hollow += 1
    assert hollow >= 3


def test_reworded_questions_keep_the_answer_and_the_facts():
    rng = random.Random(11)
    changed = 0
    for i in range(120):
        kind = ("shape", "colour", "count", "position", "size", "describe", "bar", "chart")[i % 8]
        example = make_example(rng, kind)
        for held_out in (False, True):
            other = reword(rng, example, held_out)
            assert (other.answer, other.facts, other.forbidden, other.kind) == (
                example.answer,
                example.facts,
                example.forbidden,
                example.kind,
            )
            changed += other.question != example.question
            assert "{" not in other.question
    assert changed >= 200
    text = make_example(rng, "text")
    assert reword(rng, text) == text  # texts and clips keep their questions


def test_held_out_wordings_are_in_no_training_template():
    training = {w for pool in (*TRAINING.values(), *LONE.values()) for w in pool}
    training |= {t for name in dir(scenes) if name.endswith("_Q") for t in getattr(scenes, name)}
    held_out = {w for pool in (*HELD_OUT.values(), *LONE_HELD_OUT.values()) for w in pool}
    assert held_out and not held_out & training


def test_a_lone_shape_is_asked_about_as_this_or_it_and_visitors_type_in_capitals_without_marks():
    rng = random.Random(3)
    questions = [reword(rng, lone_example(rng, "shape")).question for _ in range(60)]
    assert all(len(lone_example(random.Random(s), "colour").objects) == 1 for s in range(5))
    assert any(" this" in q.lower() or " it" in q.lower() for q in questions)
    assert any(q[:1].isupper() for q in questions)
    assert any(not q.endswith(("?", ".")) for q in questions)


def test_the_held_out_check_asks_every_reworded_kind_and_lone_shapes_in_held_out_words():
    from sage_world.wording import REWORDED_KINDS, held_out_examples

    examples = held_out_examples(seed=9, n=48)
    assert {e.kind for e in examples} == set(REWORDED_KINDS)
    held_out = {w for pool in (*HELD_OUT.values(), *LONE_HELD_OUT.values()) for w in pool}
    assert all(
        any(e.question == w.format(colour=c, shape=s, place=p) for w in held_out for c, s, p in _fill_ins(e))
        for e in examples
    )
    assert sum(len(e.objects) == 1 and e.kind in LONE_HELD_OUT for e in examples) >= 4


def _fill_ins(example):
    """Every (colour, shape, place) of the example's objects (bars: their colours)."""
    if example.kind in ("bar", "chart"):
        return [(c, "", "") for c, _ in example.objects]
    return [(t.colour, t.shape, t.place) for t in example.objects] + [
        (t.colour, "shape", t.place) for t in example.objects
    ]


def _template_pattern(template: str) -> re.Pattern[str]:
    """A template as a pattern: each slot any word the world fills slots with (a colour, a shape, "shape", a
    place, a number), case and the closing mark ignored."""
    fillers = [*scenes.COLOURS, *scenes.SHAPES, "shape", *scenes.PLACES, *scenes.NUMBER_WORDS.values()]
    slot = "(?:" + "|".join(re.escape(f) for f in sorted(fillers, key=len, reverse=True)) + ")"
    parts = re.split(r"\{[a-z]+\}", template.lower().rstrip("?. "))
    return re.compile(slot.join(re.escape(p) for p in parts) + r"[?.]?", re.IGNORECASE)


def test_unseen_wordings_are_produced_by_no_template_of_the_project():
    """The hand-written questions match no training, held-out or scene template, even with any slot
    filled by any words (so no run has seen them as they are asked)."""
    templates = [
        w for pool in (*TRAINING.values(), *LONE.values(), *HELD_OUT.values(), *LONE_HELD_OUT.values()) for w in pool
    ]
    templates += [t for name in dir(scenes) if name.endswith("_Q") for t in getattr(scenes, name)]
    patterns = [_template_pattern(t) for t in templates]
    unseen = [w for pool in UNSEEN.values() for w in pool]
    assert len(unseen) >= 24 and len(set(unseen)) == len(unseen)
    assert _template_pattern("what shape is the {colour} object?").fullmatch("What shape is the red object")
    for wording in unseen:
        assert not any(p.fullmatch(wording) for p in patterns), wording


def test_the_unseen_check_asks_each_hand_written_wording_about_one_shape():
    examples = unseen_examples(seed=5, n=60)
    unseen = [w for pool in UNSEEN.values() for w in pool]
    assert [e.question for e in examples] == unseen + unseen
    assert all(len(e.objects) == 1 for e in examples)
    assert {e.kind for e in examples} == set(UNSEEN)
    kinds = {w: k for k, pool in UNSEEN.items() for w in pool}
    assert all(e.kind == kinds[e.question] for e in examples)
    assert unseen_examples(seed=5, n=60) == examples  # seeded


def _graded_tokens() -> set[tuple[str, ...]]:
    """The graded questions (hand-written, blind, held-out templates filled) as the asking rule reads them."""
    from sage_world import asking

    graded = [w for pool in (*UNSEEN.values(), *BLIND.values()) for w in pool]
    graded += [fill_slots(w) for pool in (*HELD_OUT.values(), *LONE_HELD_OUT.values()) for w in pool]
    return {asking.tokens_of(q) for q in graded}


def test_free_wordings_ask_every_shape_kind_about_one_or_several_objects_and_never_a_graded_question():
    from sage_world import asking

    rng = random.Random(12)
    examples = [free_example(rng) for _ in range(1500)]
    assert {e.kind for e in examples} == set(FREE_KINDS)
    lone = [e for e in examples if len(e.objects) == 1]
    assert 0.5 < len(lone) / len(examples) < 0.7
    assert {e.kind for e in lone} == set(FREE_KINDS)  # one-shape counts and descriptions too
    assert len({e.question for e in examples}) > 1200
    graded = _graded_tokens()
    for e in examples:
        assert asking.tokens_of(e.question) not in graded, e.question
    cores = {asking.tokens_of(fill_slots(q)) for qs in free_wordings().values() for q in qs}
    assert not cores & graded
    assert all(asking.question_fit(e.question, "shapes").taught for e in examples)


def test_the_blind_questions_are_48_distinct_questions_about_one_shape_the_check_asks_in_turn():
    blind = [w for pool in BLIND.values() for w in pool]
    assert set(BLIND) == set(FREE_KINDS) and all(len(pool) == 8 for pool in BLIND.values())
    assert len(set(blind)) == 48
    examples = unseen_examples(seed=3, n=96, questions=BLIND)
    assert [e.question for e in examples] == blind + blind
    assert all(len(e.objects) == 1 for e in examples)
    kinds = {w: k for k, pool in BLIND.items() for w in pool}
    assert all(e.kind == kinds[e.question] for e in examples)


def test_visitor_words_are_new_words_in_a_fixed_order():
    assert len(set(VISITOR_WORDS)) == len(VISITOR_WORDS) >= 150
    assert all(re.fullmatch(r"[a-z]+", w) for w in VISITOR_WORDS)
    new = [w for w in VISITOR_WORDS if w not in set(vocabulary.world_words())]
    assert len(new) >= 150 and {"little", "located", "position", "name", "explain", "number"} <= set(new)
