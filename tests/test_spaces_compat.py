"""ZeroGPU: a race asks for the GPU time its size needs, with headroom, never a fixed two minutes."""

from __future__ import annotations

from typing import Any

from app import spaces_compat
from app.spaces_compat import MAX_SECONDS, MIN_SECONDS, race_duration, race_seconds


def test_a_race_asks_for_more_time_the_longer_and_wider_it_is():
    short = race_seconds(16, ["sage"], "builtin")
    long = race_seconds(512, ["sage", "static", "chain", "ar"], "builtin")
    assert MIN_SECONDS <= short < long <= MAX_SECONDS
    assert race_seconds(128, ["sage", "static"], "builtin") < race_seconds(256, ["sage", "static"], "builtin")
    assert race_seconds(256, ["sage"], "qwen2.5-vl-7b") < race_seconds(256, ["sage", "static"], "qwen2.5-vl-7b")
    # a 7B pair needs more than the tiny built-in one for the same race
    assert race_seconds(128, ["sage", "static"], "builtin") < race_seconds(128, ["sage", "static"], "qwen2.5-vl-7b")
    # the old fixed 120 s was far more than a short built-in race needs, and less than a long 7B one
    assert race_seconds(128, ["sage", "static"], "builtin") <= 60
    assert race_seconds(512, ["sage", "static", "chain", "ar"], "llava-ov-7b") > 120


def test_the_estimate_has_headroom_over_the_work_it_counts():
    tokens, sides = 300, 3
    work = (
        spaces_compat.STARTUP_SECONDS
        + spaces_compat.LOAD_SECONDS
        + tokens * sides * spaces_compat.HUB_SECONDS_PER_TOKEN
    )
    assert race_seconds(tokens, ["sage", "static", "ar"], "custom") >= 1.4 * work


def test_odd_arguments_ask_for_the_most_a_valid_race_could_need():
    worst = race_seconds(spaces_compat.FALLBACK_TOKENS, ["sage", "static"], "builtin")
    for tokens in ("abc", None, float("nan"), -3):
        assert race_seconds(tokens, ["sage", "static"], "builtin") == worst
    assert race_seconds(128, None, "builtin") == race_seconds(128, ["sage", "static"], "builtin")
    assert race_seconds(10**9, ["sage"], None) == MAX_SECONDS


def race_live(
    image: Any,
    video: Any,
    prompt: Any,
    pair: Any,
    custom_target: Any,
    custom_draft: Any,
    methods: Any,
    max_new_tokens: Any,
    *rest: Any,
) -> None:
    """The live race handler's leading parameters (app/handlers.py)."""


def race_api(
    image: str | None = None,
    prompt: str = "",
    pair: str = "",
    methods: list[str] | None = None,
    max_new_tokens: float = 128,
) -> None:
    """The API handler's, called by keyword."""


def test_the_duration_reads_the_call_arguments_by_name():
    live = race_duration(race_live)
    assert live(None, None, "q", "builtin", "", "", ["sage"], 32, 1, 2) == race_seconds(32, ["sage"], "builtin")
    api = race_duration(race_api)
    assert api(prompt="q", pair="llava-ov-7b", max_new_tokens=400) == race_seconds(400, None, "llava-ov-7b")
    assert api() == race_seconds(None, None, None)


def test_on_zero_gpu_the_decorator_hands_spaces_the_function_of_the_arguments(monkeypatch):
    asked: list[Any] = []

    class FakeSpaces:
        @staticmethod
        def GPU(duration: Any):
            asked.append(duration)
            return lambda fn: fn

    monkeypatch.setattr(spaces_compat, "_spaces", FakeSpaces)
    decorated = spaces_compat.gpu_for_race(race_live)
    assert decorated is race_live
    assert callable(asked[0]) and asked[0](None, None, "q", "builtin", "", "", ["sage"], 64) == race_seconds(
        64, ["sage"], "builtin"
    )


def test_the_start_event_asks_for_its_forms_race():
    """The page's Start call passes the progress tracker, the race inputs (in `RACE_FIELDS` order)
    and the tree lane: its duration is the race of that form; a malformed call asks for the most."""
    import gradio as gr

    from app.inputs import RACE_FIELDS
    from app.ui import race_gpu_seconds

    def call(**fields: Any) -> tuple[Any, ...]:
        form = {"pair": "builtin", "methods": ["sage", "static"], "max_new_tokens": 64} | fields
        return (gr.Progress(), *[form.get(name) for name in RACE_FIELDS], "sage")

    assert race_gpu_seconds(*call()) == race_seconds(64, ["sage", "static"], "builtin")
    assert race_gpu_seconds(*call(max_new_tokens=512, pair="qwen2.5-vl-7b")) == race_seconds(
        512, ["sage", "static"], "qwen2.5-vl-7b"
    )
    assert race_gpu_seconds(*call(max_new_tokens=512)) > race_gpu_seconds(*call(max_new_tokens=8))
    # each method on the one-pass draft too, and again with the target's features off: twice, thrice the sides
    lanes = ["sage", "static", "sage/one-pass", "static/one-pass", "sage/one-pass-off", "static/one-pass-off"]
    assert race_gpu_seconds(*call(second_draft="one-pass")) == race_seconds(64, lanes[:4], "builtin")
    assert race_gpu_seconds(*call(second_draft="one-pass-off")) == race_seconds(64, lanes, "builtin")
    assert race_gpu_seconds(gr.Progress(), "too", "few") == race_seconds(None, None, None)


def test_on_zero_gpu_the_gpu_presets_are_offered_even_where_torch_sees_no_gpu_between_races(monkeypatch):
    from app import models

    monkeypatch.setattr(models.torch.cuda, "is_available", lambda: False)
    assert not any(p.needs_gpu for p in models.presets())
    monkeypatch.setattr(models, "ZERO_GPU", True)
    offered = {p.key for p in models.presets()}
    assert {p.key for p in models.HUB_PRESETS} <= offered and "qwen2.5-vl-7b" in offered
