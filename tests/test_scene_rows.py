"""Run 8's world: two rows of shapes to read (answers with stretches of hard words) and pictures saved
as JPEGs. The generator's contract: what is drawn is what the answer says, in reading order; the
words are the pair's (no unknown token); grading is per shape; nothing drawn before changes."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from sage_world import scenes, vocabulary
from sage_world.scenes import (
    COLOURS,
    HAND_DRAWN,
    KINDS,
    ROW_KIND,
    ROW_LENGTH,
    SHAPES,
    fact_score,
    jpeg,
    make_example,
    make_examples,
    rows_of,
)

ROOT = Path(__file__).resolve().parent.parent


def test_a_row_picture_is_read_left_to_right_top_then_bottom():
    for seed in range(20):
        example = make_example(random.Random(seed), ROW_KIND)
        (top, first), (bottom, second) = rows_of(example)
        assert top != bottom and {top, bottom} <= set(COLOURS)
        for shapes in (first, second):
            assert ROW_LENGTH[0] <= len(shapes) <= ROW_LENGTH[1] and set(shapes) <= set(SHAPES)
        read = re.findall(r"read : ([a-z ]+)\.", example.answer)
        assert read == [" ".join(first), " ".join(second)]
        assert f"the {top} shapes in the top read" in example.answer
        assert example.answer.endswith(f"the top shapes are {top} and the bottom shapes are {bottom}.")
        assert example.long and example.question in scenes.ROW_Q
        # the objects are drawn where the answer says: left to right within a row, the top row above
        boxes = [
            example.labels.point(lambda v, i=i: 255 if v == i else 0).getbbox()
            for i in range(1, len(example.objects) + 1)
        ]
        assert all(boxes)
        for row in (range(len(first)), range(len(first), len(example.objects))):
            xs = [boxes[i][0] + boxes[i][2] for i in row]
            assert xs == sorted(xs)
        ys = [boxes[i][1] + boxes[i][3] for i in range(len(boxes))]
        assert max(ys[: len(first)]) < min(ys[len(first) :])


def test_row_answers_use_only_the_pairs_words():
    words = set(vocabulary.world_words())
    for e in make_examples(3, 30, kinds=(ROW_KIND,)):
        assert set(re.findall(r"[a-z]+|[^\sa-z]", f"{e.question} {e.answer}")) <= words
    assert len(words) == 121  # the tokenizer (155 tokens) every draft and target share is unchanged


def test_a_row_answer_is_graded_shape_by_shape():
    example = make_example(random.Random(4), ROW_KIND)
    (_, first), (_, second) = rows_of(example)
    facts = len(first) + len(second) + 4  # each shape, each row's length and colour
    assert fact_score(example, example.answer) == (facts, facts)
    wrong = "cross" if first[0] != "cross" else "circle"
    one_off = example.answer.replace(f"read : {' '.join(first)}", f"read : {' '.join((wrong, *first[1:]))}")
    assert fact_score(example, one_off) == (facts - 1, facts)
    short = example.answer.replace(f"read : {' '.join(first)}", f"read : {' '.join(first[:-1])}")
    assert fact_score(example, short) == (facts - 2, facts)  # the last shape and the row's length
    assert fact_score(example, "this is a wide picture.") == (0, facts)


def test_rows_are_not_drawn_unless_asked_and_other_seeded_examples_stay_as_they_were():
    assert ROW_KIND not in KINDS and ROW_KIND not in scenes.LONG_KINDS
    assert all(e.kind != ROW_KIND for e in make_examples(9, 60))
    hand = make_example(random.Random(2), ROW_KIND, HAND_DRAWN)
    assert hand.kind == ROW_KIND and hand.image.size[0] > hand.image.size[1]


def test_jpeg_keeps_the_picture_and_its_size_but_not_its_exact_pixels():
    image = make_example(random.Random(5), "describe").image
    for quality in (70, 98):
        saved = jpeg(image, quality)
        assert saved.size == image.size and saved.mode == "RGB"
        assert saved.tobytes() != image.tobytes()
    with pytest.raises(ValueError):
        make_example(random.Random(0), "no such kind")


def test_the_training_mix_draws_rows_and_jpegs_only_when_asked():
    from sage_testkit.references import load_script

    script = load_script("train_builtin_pair")
    a, b = random.Random(7), random.Random(7)
    plain = [script.draw_example(a) for _ in range(30)]
    same = [script.draw_example(b, script.DataMix()) for _ in range(30)]
    assert [e.answer for e in plain] == [e.answer for e in same]
    rng = random.Random(8)
    rows = [script.draw_example(rng, script.DataMix(rows=1.0)) for _ in range(10)]
    assert all(e.kind == ROW_KIND for e in rows)
    a, b = random.Random(9), random.Random(9)
    png = script.draw_example(a, script.DataMix(rows=1.0))
    saved = script.draw_example(b, script.DataMix(rows=1.0, jpeg=1.0))
    assert saved.answer == png.answer and saved.image.tobytes() != png.image.tobytes()


def test_rows_and_pictures_saved_as_jpegs_stay_inside_the_pairs_world():
    """The note for pictures outside the world (a photo) must not fire on a saved JPEG or a row picture."""
    from sage_world.world import IN_WORLD_SHARE, world_share

    rng = random.Random(12)
    for kind in ("describe", "chart", ROW_KIND):
        for _ in range(8):
            image = make_example(rng, kind).image
            assert world_share(image) >= IN_WORLD_SHARE
            assert world_share(jpeg(image, 70)) >= IN_WORLD_SHARE
