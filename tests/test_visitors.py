"""Run 13's data: the questions visitors asked (sage_world.visitors), answered from the scene drawn, read by the
grown tokenizer, taught by the asking rule, never in the graded wordings' form."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from sage_world import asking, visitors
from sage_world.scenes import NUMBER_WORDS, grade
from sage_world.vocabulary import MORE_VISITOR_WORDS, VISITOR_WORDS
from sage_world.wording import grading_form


@pytest.fixture(scope="module")
def tokenizer():
    from scripts.train_builtin_pair import build_processor

    return build_processor(visitor_words=True, more_visitor_words=True).tokenizer


def draws(n: int = 400, held_out: bool = False, seed: int = 13):
    rng = random.Random(seed)
    return [visitors.visitor_example(rng, held_out=held_out) for _ in range(n)]


def test_the_new_words_come_after_every_earlier_token_in_a_fixed_order(tokenizer) -> None:
    from scripts.train_builtin_pair import build_processor

    earlier = build_processor(visitor_words=True).tokenizer
    ids = [tokenizer.convert_tokens_to_ids(w) for w in MORE_VISITOR_WORDS]
    assert ids == list(range(len(earlier), len(earlier) + len(ids)))  # run 10's ids stay as they were
    assert not set(MORE_VISITOR_WORDS) & set(VISITOR_WORDS)
    for word in VISITOR_WORDS[:20]:
        assert tokenizer.convert_tokens_to_ids(word) == earlier.convert_tokens_to_ids(word)


ROOT = Path(__file__).resolve().parent.parent


def test_the_vocabulary_module_builds_the_shipped_tokenizer_byte_for_byte(tmp_path) -> None:
    """sage_world.vocabulary holds every word of the pair's tokenizer in id order: the tokenizer the training script
    builds from it is the one each shipped model folder holds, to the byte."""
    from scripts.train_builtin_pair import build_processor

    build_processor(visitor_words=True, more_visitor_words=True).tokenizer.save_pretrained(tmp_path)
    built = (tmp_path / "tokenizer.json").read_bytes()
    for folder in ("target", "draft", "hesitant-draft", "one-pass-draft"):
        assert built == (ROOT / "assets" / "builtin" / folder / "tokenizer.json").read_bytes(), folder


def test_the_vocabulary_lives_in_one_module() -> None:
    """No other module of sage_world or scripts/ defines a word list of the tokenizer or a table of synonyms: they
    import sage_world.vocabulary's."""
    import ast

    owned = {"VISITOR_WORDS", "MORE_VISITOR_WORDS", "SYNONYMS", "WORD_SYNONYMS", "TYPOS", "vocabulary"}
    defined = []
    for path in sorted([*(ROOT / "sage_world").glob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.FunctionDef):
                names.add(node.name)
            defined += [f"{path.name}:{name}" for name in names & owned]
    assert sorted(defined) == [f"vocabulary.py:{name}" for name in sorted(owned - {"vocabulary"})]


def test_every_question_and_answer_reads_without_an_unknown_word(tokenizer) -> None:
    for example in [*draws(), *draws(held_out=True)]:
        for text in (example.question, example.answer):
            assert tokenizer.unk_token_id not in tokenizer(text)["input_ids"], text


def test_the_answers_say_what_the_scene_has() -> None:
    for example in draws(600):
        things = example.objects
        if example.kind == "count_kind":
            shape = next(s for s, p in visitors.PLURALS.items() if p in example.question.lower() or s in example.answer)
            n = sum(t.shape == shape for t in things)
            said = re.search(r"there (?:is|are) (\w+)", example.answer).group(1)
            assert said == ("no" if n == 0 else NUMBER_WORDS[n]), (example.question, example.answer)
        elif example.kind == "superlative":
            size = next(v for k, v in visitors.SUPERLATIVES.items() if k in example.answer)
            only = [t for t in things if t.size == size]
            assert len(only) == 1  # asked only where one shape is of its size
            t = only[0]
            assert t.colour in example.answer or t.place in example.answer
        elif example.kind == "exists":
            assert example.answer.startswith(("yes", "no"))
        assert grade(example, example.answer), example  # the answer states its own facts


def test_a_wrong_count_or_a_wrong_yes_is_graded_wrong() -> None:
    for example in draws(200):
        if example.kind == "count_kind":
            wrong = re.sub(r"there (is|are) \w+", "there are five", example.answer)
            if "five" not in example.answer:
                assert not grade(example, wrong)
        if example.kind == "exists":
            flipped = example.answer.replace("yes", "no") if "yes" in example.answer else "yes, there is one."
            assert not grade(example, flipped)


def test_an_article_before_a_vowel_is_an() -> None:
    for example in draws(600):
        assert not re.search(r"\ba [aeiou]", example.question.lower() + " " + example.answer), example


def test_held_out_wordings_are_never_trained() -> None:
    trained = {grading_form(q.lower()) for q in (e.question for e in draws(4000))}
    typos = {grading_form(visitors.misspell(random.Random(1), q).lower()) for q in trained}
    for example in draws(300, held_out=True, seed=5):
        assert grading_form(example.question.lower()) not in trained | typos, example.question


def test_a_typo_is_one_word_wrong_and_read_back() -> None:
    rng = random.Random(2)
    question = "describe the image in detail."
    misspelt = visitors.misspell(rng, question)
    changed = [(a, b) for a, b in zip(question.split(), misspelt.split(), strict=True) if a != b]
    assert len(changed) == 1 and visitors.TYPOS[changed[0][1].rstrip(".")] == changed[0][0].rstrip(".")
    assert asking.tokens_of(misspelt) == asking.tokens_of(question)
    assert visitors.misspell(rng, "xyz?") == "xyz?"


def test_the_asking_rule_takes_what_visitors_asked_and_the_held_out_wordings() -> None:
    for kind, question in visitors.ASKED:
        picture = "chart" if kind == "chart" else "shapes"
        filled = question.format(shapes="triangles", sup="largest", ref="red cross")
        assert asking.question_fit(filled, picture).taught, filled
    examples, sources = visitors.check_examples(3, 60)
    assert sources.count("asked") == sources.count("held out") == 30
    for example in examples:
        picture = "chart" if example.kind in ("bar", "chart") else "shapes"
        assert "cannot read" not in asking.question_fit(example.question, picture).reason, example.question
    # a graph's question about a picture of shapes is another picture's question; a count about a chart too
    assert not asking.question_fit("what does this graph show?", "shapes").taught
    assert not asking.question_fit("how many circles are there?", "chart").taught


def test_the_graph_check_asks_charts_as_visitors_did_and_in_held_out_wordings() -> None:
    examples = visitors.graph_check_examples(5, 40)
    assert visitors.graph_check_examples(5, 40) == examples  # the same draws every time
    asked = [e for i, e in enumerate(examples) if visitors.check_source(i) == "asked"]
    held = [e for i, e in enumerate(examples) if visitors.check_source(i) == "held out"]
    assert len(asked) == len(held) == 20
    assert {e.question for e in asked} == {"What does this graph show?"} and {e.kind for e in asked} == {"chart"}
    wordings = {q for form in ("chart", "high", "low") for q in visitors.HELD_OUT[form]}
    assert {e.question for e in held} <= wordings and {e.kind for e in held} == {"chart", "bar"}
    assert all(3 <= len(e.objects) <= 6 and asking.question_fit(e.question, "chart").taught for e in examples)


def test_the_asking_note_offers_forms_that_work_visitors_forms_among_them() -> None:
    note = asking.asking_note()
    for form in ("“how many circles are there?”", "“which shape is the largest?”", "[colour] [shape]", "“describe the"):
        assert form in note, form
    assert "{words}" in note  # the library names the words the pair was not taught


def test_a_kind_answered_less_often_right_says_so_beside_the_race_and_the_others_do_not(monkeypatch) -> None:
    from sage_core import load_media

    picture = load_media(Path(__file__).resolve().parents[1] / "assets" / "examples" / "describe_five.png")
    # the pair answers counts of a shape and whether a thing is there right 9 times in 10 or more: no note
    for question in ("How many triangles are there?", "Is there a red cross?", "which is the largest shape?"):
        assert asking.question_note(question, picture) == (), question
    monkeypatch.setattr(asking, "LESS_OFTEN_RIGHT", {"count_kind": ("count a shape", "half the time")})
    counted = asking.question_note("How many triangles are there?", picture)
    assert "count a shape" in counted[0] and "only half the time" in counted[0] and "lossless" in counted[1]
    assert asking.question_note("Is there a red cross?", picture) == ()
    assert asking.question_note("descrbe the imgae in detial.", picture) == ()


def test_the_training_mix_answers_looking_only_when_asked() -> None:
    from sage_world.mixing import DataMix, draw_example

    def checked_share(mix: DataMix) -> float:
        rng = random.Random(4)
        drawn = [draw_example(rng, mix) for _ in range(60)]
        asked = [e for e in drawn if e.kind in visitors.LOOKING_KINDS]
        assert asked
        return sum(": it shows " in e.answer for e in asked) / len(asked)

    assert checked_share(DataMix(counts=0.5)) == 0.0
    assert checked_share(DataMix(counts=0.5, looking="checked")) == 1.0


def test_checked_answers_say_what_was_asked_then_check_every_shape_and_draw_the_same_scenes() -> None:
    rng_plain, rng_checked = random.Random(22), random.Random(22)
    for _ in range(300):
        plain = visitors.visitor_example(rng_plain, kinds=visitors.LOOKING_KINDS)
        checked = visitors.visitor_example(rng_checked, kinds=visitors.LOOKING_KINDS, looking="checked")
        assert (checked.question, checked.objects, checked.facts) == (plain.question, plain.objects, plain.facts)
        asked, _, rest = checked.answer.partition(": it shows ")
        listed, _, said = rest.rpartition(", so ")
        assert said == plain.answer  # the same answer, after what was asked about and every shape checked
        marks = re.findall(r": (yes|no)(?=,| and |$)", listed)
        assert len(marks) == len(checked.objects)
        for thing, mark in zip(checked.objects, marks, strict=True):
            assert f"{thing.size} {thing.colour} {thing.shape} in the {thing.place}: {mark}" in listed
        if checked.kind == "count_kind":  # the shape asked about, a yes for each one: the count is the yeses
            assert asked in visitors.PLURALS
            assert [m == "yes" for m in marks] == [t.shape == asked for t in checked.objects]
            count = marks.count("yes")
            said_count = {0: "there are no", 1: "there is one"}.get(count, f"there are {NUMBER_WORDS.get(count)}")
            assert said.startswith(f"{said_count} "), (said, count)
        else:  # what was asked about ("red cross", "cross", "red shape"); yes where there is one
            words = visitors.read_typos(re.findall(r"[a-z]+", checked.question.lower()))
            assert all(word in words for word in asked.split())
            assert ("yes" in marks) == said.startswith("yes")
        assert grade(checked, checked.answer) and grade(checked, plain.answer)  # either form is graded right
        assert not grade(checked, checked.answer.replace(f", so {said}", ", so " + wrong_answer(plain)))


def test_an_answer_form_outside_the_known_ones_is_refused() -> None:
    for gone in ("tallied", "marked"):  # run 14's marked form was tried, not shipped, and is gone
        with pytest.raises(ValueError, match="an answer form is one of"):
            visitors.scene_maker("count_kind", gone)
    with pytest.raises(ValueError, match="an answer form is one of"):
        visitors.visitor_example(random.Random(1), kinds=("superlative",), looking="True")


def wrong_answer(example) -> str:
    """A wrong answer of the same kind: yes for no (and back), or one more of the shape."""
    if example.kind == "exists":
        return "no, there is none." if example.answer.startswith("yes") else "yes, there is one."
    said = example.answer.split()[2]
    n = 0 if said == "no" else next(k for k, w in NUMBER_WORDS.items() if w == said)
    return f"there are {NUMBER_WORDS[n + 1 if n < 6 else n - 1]} of them."
