"""Settings checked to the last bit: one number check (`sage_core.method_settings.read_number`, `in_range`)
behind every settings class and every route. Whole numbers and reals of any Python or numpy type are taken
(and kept as plain Python numbers), booleans refused, a huge integer, NaN or an infinity refused in one
sentence, every SAGE setting in its range with its relations; the library, the CLI, the /race API, the
page's streamed race and an MCP client give the same sentence for the same bad value."""

from __future__ import annotations

import asyncio
import html
import json
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import torch
from app_server import form_values, running_app
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from test_bounds import raw_race, uploaded

from app.inputs import Limits, load_examples
from sage_core.cli import main
from sage_core.config import DecodeConfig, SamplingConfig, check_max_new_tokens, check_prune_ratio
from sage_core.errors import ConfigError, SageError
from sage_core.method_settings import (
    DYNAMIC_RANGES,
    SAGE_RANGES,
    SAGE_REAL_RANGES,
    DynamicConfig,
    FrozenSageConfig,
    SageConfig,
    as_float,
    as_whole,
    read_number,
)

HUGE = 10**400
LIMITS = Limits(max_upload_mb=1, max_video_seconds=5, max_trace_mb=0.5)


def sentence(build: Any) -> str:
    with pytest.raises(SageError) as refused:
        build()
    text = str(refused.value)
    assert isinstance(refused.value, ConfigError) and "\n" not in text and len(text) < 400, text
    return text


# -- the one reading -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "read"),
    [
        (np.float32(0.5), 0.5),
        (np.float16(0.25), 0.25),
        (np.int64(5), 5),
        (np.uint8(7), 7),
        (np.array(3), 3),
        (torch.tensor(0.5), 0.5),
        (Fraction(1, 4), 0.25),
        (Decimal("0.5"), 0.5),
        (HUGE, HUGE),
        (True, None),
        (np.bool_(False), None),
        (torch.tensor(True), None),
        (1j, None),
        ("0.5", None),  # text only where a route reads text
        ([1], None),
        (None, None),
    ],
)
def test_read_number_takes_real_numbers_of_any_type_and_no_boolean(value: object, read: object) -> None:
    number = read_number(value)
    assert number == read and (number is None or type(number) in (int, float))


def test_text_is_read_where_a_route_reads_text() -> None:
    assert read_number(" 0.5 ", text=True) == 0.5 and read_number("8", text=True) == 8
    assert read_number("9" * 5000, text=True) == math.inf  # beyond Python's 4300 digits: too large, not an error
    assert read_number("true", text=True) is None and read_number("nan", text=True) != read_number("nan", text=True)
    assert as_whole("8") == 8 and as_whole(8.0) == 8 and as_whole(np.int32(8)) == 8 and as_whole(True) is True
    assert as_float(True) is None and as_float(HUGE) == math.inf and as_float(np.float32(0.5)) == 0.5


def test_a_forms_text_is_read_as_each_settings_kind() -> None:
    form = {"threshold_base": " 0.2 ", "depth_max": "7", "lower_below": 1, "shape": "template"}
    made = SageConfig.from_form(form)
    assert (made.threshold_base, made.depth_max, made.lower_below, made.shape) == (0.2, 7, 1.0, "template")
    assert DynamicConfig.from_form({"depth": "3", "total_tokens": np.int64(40)}) == DynamicConfig(3, 10, 40)
    assert "threshold_base must be a number in [0, 1], not True" in sentence(
        lambda: SageConfig.from_form({"threshold_base": True})
    )
    assert "depth must be a whole number in [1, 10], not '3.5'" in sentence(
        lambda: DynamicConfig.from_form({"depth": "3.5"})
    )


# -- every field of every settings class, in the library ---------------------------------------

# (class, field, its range, whole)
FIELDS = [
    *[(SageConfig, name, bounds, True) for name, bounds in SAGE_RANGES.items()],
    *[(SageConfig, name, bounds, False) for name, bounds in SAGE_REAL_RANGES.items()],
    *[(DynamicConfig, name, bounds, True) for name, bounds in DYNAMIC_RANGES.items()],
    (FrozenSageConfig, "alpha", (0.0, 1.0), False),
    (SamplingConfig, "temperature", (0.0, 2.0), False),
    (SamplingConfig, "top_p", (0.0, 1.0), False),
    (SamplingConfig, "top_k", (0, 1_000_000), True),
    (SamplingConfig, "seed", (0, 2**63 - 1), True),
    (DecodeConfig, "max_new_tokens", (1, 4096), True),
    (DecodeConfig, "template_candidates", (4, 20), True),
    (DecodeConfig, "prune_ratio", (0.0, 0.95), False),
    (DecodeConfig, "prune_attention_share", (0.0, 1.0), False),
]
FIELD_IDS = [f"{kind.__name__}.{name}" for kind, name, _, _ in FIELDS]
BAD = [HUGE, -HUGE, True, False, np.bool_(True), math.nan, math.inf, -math.inf, "0.5", None, [1], 1j]


def named(kind: type, name: str) -> str:
    """How a field's sentence names it."""
    return {"alpha": "α", "max_new_tokens": "max new tokens", "top_p": "top-p", "top_k": "top-k"}.get(name, name)


@pytest.mark.parametrize(("kind", "name", "bounds", "whole"), FIELDS, ids=FIELD_IDS)
def test_every_field_refuses_huge_boolean_nan_and_other_types_in_one_sentence(kind, name, bounds, whole) -> None:
    for value in BAD:
        if value is None and name == "seed":  # (None: a fresh seed)
            continue
        said = sentence(lambda value=value: kind(**{name: value}))
        assert named(kind, name) in said.replace("pruning ratio", "prune_ratio"), (value, said)
        if value is HUGE:
            assert "a 401-digit number" in said
    low, high = bounds
    for outside in (high + 1, low - 1, high * 1.5 + 0.5):
        sentence(lambda outside=outside: kind(**{name: outside}))


@pytest.mark.parametrize(("kind", "name", "bounds", "whole"), FIELDS, ids=FIELD_IDS)
def test_every_field_takes_numpy_numbers_and_keeps_plain_python_ones(kind, name, bounds, whole) -> None:
    default = getattr(kind(), name)
    value = default if default not in (None, 0, 0.0) else {"temperature": 0.7, "prune_ratio": 0.5}.get(name, 5)
    for given in (np.int64(value), np.int32(value)) if whole else (np.float32(value), np.float64(value)):
        made = kind(**{name: given})
        kept = getattr(made, name)
        assert type(kept) is (int if whole else float) and kept == pytest.approx(float(value), rel=1e-3), (given, kept)
        json.dumps(kept)  # a trace can write it
    if whole:
        assert getattr(kind(**{name: float(value)}), name) == value  # 8.0 is the whole number 8
        sentence(lambda: kind(**{name: value + 0.5}))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"depth_min": 6, "depth_max": 4}, "need depth_min <= depth_max <= depth_max_limit"),
        ({"depth_max": 9, "depth_max_limit": 8}, "need depth_min <= depth_max <= depth_max_limit"),
        ({"width_min": 5, "width_max": 3}, "need width_min <= width_max <= candidates"),
        ({"width_max": 10, "candidates": 6}, "need width_min <= width_max <= candidates"),
        ({"lower_below": 3.5, "raise_above": 3.0}, "need lower_below <= raise_above"),
        ({"threshold_base": -5}, "threshold_base must be a number in [0, 1], not -5"),
        ({"threshold_base": 1e300}, "threshold_base must be a number in [0, 1], not 1e+300"),
        ({"static_first_round": 1}, "static_first_round must be True or False, not 1"),
        ({"shape": 3}, "shape must be 'online' or 'template', not 3"),
    ],
)
def test_sages_relations_and_ranges_are_refused(settings: dict, said: str) -> None:
    assert said in sentence(lambda: SageConfig(**settings))


def test_the_relations_hold_at_their_edges() -> None:
    SageConfig(lower_below=3.0, raise_above=3.0, depth_min=8, depth_max=8, width_min=10, width_max=10)
    assert SageConfig(static_first_round=np.bool_(False)).static_first_round is False


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"method_settings": {}}, "DecodeConfig's method_settings must be a tuple of (method name, settings) pairs"),
        ({"method_settings": None}, "method_settings must be a tuple of (method name, settings) pairs, not None"),
        ({"method_settings": (("sage-frozen",),)}, "method_settings must be a tuple of (method name, settings) pairs"),
        ({"method_settings": (([], FrozenSageConfig()),)}, "unknown method []"),
        ({"prune_attention_share": "0.4"}, "prune_attention_share must be a number in [0, 1], not '0.4'"),
        ({"prune_attention_share": None}, "prune_attention_share must be a number in [0, 1], not None"),
        ({"method": ["sage"]}, "unknown method ['sage']"),
        ({"backend": ["fast"]}, "unknown backend ['fast']"),
    ],
)
def test_decode_configs_fields_of_the_wrong_type_get_a_sentence_naming_them(settings: dict, said: str) -> None:
    assert said in sentence(lambda: DecodeConfig(**settings))


# -- the command line -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> tuple[str, str]:
    first = next(e for e in load_examples() if not e.is_video)
    return first.file, first.prompt


# (the flag, its bad value, the library's sentence): the CLI reads the text, the class refuses the number
CLI_CASES = [
    ("--frozen-alpha", "1e400", lambda: FrozenSageConfig(alpha=math.inf)),
    ("--frozen-alpha", "nan", lambda: FrozenSageConfig(alpha=math.nan)),
    ("--frozen-alpha", "-0.5", lambda: FrozenSageConfig(alpha=-0.5)),
    ("--depth-max", str(HUGE), lambda: SageConfig(depth_max=HUGE)),
    ("--window", "0", lambda: SageConfig(window=0)),
    ("--dynamic-candidates", str(-HUGE), lambda: DynamicConfig(candidates=-HUGE)),
    ("--temperature", "inf", lambda: SamplingConfig(temperature=math.inf)),
    ("--top-p", "nan", lambda: SamplingConfig(top_p=math.nan)),
    ("--top-k-sampling", str(HUGE), lambda: SamplingConfig(top_k=HUGE)),
    ("--seed", str(HUGE), lambda: SamplingConfig(seed=HUGE)),
    ("--prune-ratio", "nan", lambda: DecodeConfig(prune_ratio=math.nan)),
]


@pytest.mark.parametrize(("flag", "value", "build"), CLI_CASES, ids=[f"{c[0]}={c[1][:8]}" for c in CLI_CASES])
def test_the_cli_gives_the_librarys_sentence(example, capsys, flag, value, build) -> None:
    args = ["generate", "--image", example[0], "--prompt", example[1], "--device", "cpu", flag, value]
    assert main(args) == 2
    assert capsys.readouterr().err == f"error: {sentence(build)}\n"


def test_the_cli_refuses_a_word_for_a_number_in_one_line(example, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["generate", "--image", example[0], "--prompt", example[1], "--frozen-alpha", "true"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "invalid float value: 'true'" in err


# -- the /race API, the page's streamed race and MCP -------------------------------------------

# (the race input, its bad value, the library's sentence for it). A slider's JSON number reaches the app as a
# float (10**400: an infinity, named as such); a whole number box's exactly.
ROUTE_CASES = [
    ("frozen_alpha", HUGE, lambda: FrozenSageConfig(alpha=math.inf)),
    ("frozen_alpha", True, lambda: FrozenSageConfig(alpha=True)),
    ("frozen_alpha", -0.5, lambda: FrozenSageConfig(alpha=-0.5)),
    ("temperature", True, lambda: SamplingConfig(temperature=True)),
    ("temperature", HUGE, lambda: SamplingConfig(temperature=math.inf)),
    ("seed", True, lambda: SamplingConfig(seed=True)),
    ("seed", HUGE, lambda: SamplingConfig(seed=HUGE)),
    ("depth_max", True, lambda: SageConfig(depth_max=True)),
    ("depth_max", 2.5, lambda: SageConfig(depth_max=2.5)),
    ("depth_min", 9, lambda: SageConfig(depth_min=9)),
    ("node_budget", -HUGE, lambda: SageConfig(node_budget=-HUGE)),
    ("dynamic_total_tokens", False, lambda: DynamicConfig(total_tokens=False)),
    ("max_new_tokens", True, lambda: check_max_new_tokens(True, LIMITS.max_new_tokens)),
    ("prune_chosen", True, lambda: check_prune_ratio(True)),
    ("prune_chosen", HUGE, lambda: check_prune_ratio(HUGE)),
]
ROUTE_IDS = [f"{c[0]}={str(c[1])[:8]}" for c in ROUTE_CASES]


@pytest.fixture(scope="module")
def client():
    with running_app("builtin", "builtin", limits=LIMITS) as url:
        yield Client(url, verbose=False)


def race_inputs(example: tuple[str, str], setting: str, value: object) -> dict:
    inputs: dict = {"image": handle_file(example[0]), "prompt": example[1], "max_new_tokens": 3, setting: value}
    if setting == "prune_chosen":
        inputs["prune_choice"] = "chosen"
    return inputs


@pytest.mark.parametrize(("setting", "value", "build"), ROUTE_CASES, ids=ROUTE_IDS)
def test_the_api_and_the_page_give_the_librarys_sentence(client, example, setting, value, build) -> None:
    expected = sentence(build)
    with pytest.raises(AppError) as refused:
        client.predict(**race_inputs(example, setting, value), api_name="/race")
    assert str(refused.value) == expected
    job = client.submit(*form_values(**race_inputs(example, setting, value)), None, api_name="/race_live")
    assert expected in html.unescape(job.result()[0])


@pytest.mark.parametrize("setting", ["frozen_alpha", "temperature", "depth_max", "seed"])
def test_a_nan_sent_by_hand_gets_the_librarys_sentence(client, example, setting) -> None:
    """gradio_client cannot send NaN (it is not JSON); a hand-written call can, and gets the sentence."""
    build = {
        "frozen_alpha": lambda: FrozenSageConfig(alpha=math.nan),
        "temperature": lambda: SamplingConfig(temperature=math.nan),
        "depth_max": lambda: SageConfig(depth_max=math.nan),
        "seed": lambda: SamplingConfig(seed=math.nan),
    }[setting]
    url = client.src.rstrip("/")
    values = form_values(image=uploaded(url, example[0]), prompt=example[1], max_new_tokens=3, **{setting: math.nan})
    assert raw_race(url, values) == sentence(build)


def test_numbers_as_the_api_sends_them_still_race(client, example) -> None:
    inputs = race_inputs(example, "frozen_alpha", 1) | {"methods": ["sage", "sage-frozen"], "depth_max": 8.0}
    raced = client.predict(**inputs, api_name="/race")
    assert raced["texts"]["sage"] == raced["texts"]["sage-frozen"] != ""


async def call_tool(url: str, name: str, arguments: dict) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


# What an MCP client's call reaches: a number field's 10**400 as a float (an infinity, refused as one), a whole
# field's exactly; a boolean is refused by the MCP server's own check of the tool's schema, before the app.
MCP_CASES = [
    ("frozen_alpha", HUGE, lambda: sentence(lambda: FrozenSageConfig(alpha=math.inf))),
    ("node_budget", -HUGE, lambda: sentence(lambda: SageConfig(node_budget=-HUGE))),
    ("depth_max", 11, lambda: sentence(lambda: SageConfig(depth_max=11))),
    ("temperature", 7.5, lambda: sentence(lambda: SamplingConfig(temperature=7.5))),
    ("frozen_alpha", True, lambda: "Input validation error: True is not of type 'number'"),
    ("seed", True, lambda: "Input validation error: True is not of type 'integer'"),
]


def test_an_mcp_client_reads_the_librarys_sentence(example) -> None:
    import base64
    from pathlib import Path

    from app.serving import free_port
    from app.ui import build_demo, launch_options, queued

    data_url = "data:image/png;base64," + base64.b64encode(Path(example[0]).read_bytes()).decode()
    demo = build_demo(default_target="builtin", default_draft="builtin", limits=LIMITS)
    options: dict[str, Any] = {"server_name": "127.0.0.1", "server_port": free_port(), "mcp_server": True}
    queued(demo, LIMITS).launch(prevent_thread_lock=True, quiet=True, **options, **launch_options(LIMITS))
    url = f"{demo.local_url}gradio_api/mcp/"
    try:
        for setting, value, expected in MCP_CASES:
            arguments = {"image": data_url, "prompt": example[1], "max_new_tokens": 3, setting: value}
            answer = asyncio.run(call_tool(url, "race_api", arguments))
            assert answer.isError and [c.text for c in answer.content] == [expected()], (setting, answer.content)
    finally:
        demo.close()
