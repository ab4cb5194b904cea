"""Bounded settings, one validation: the CLI, the API and the page give the library's sentence for the
same bad value; inputs Gradio refuses before any handler reach the caller as a sentence too."""

from __future__ import annotations

import html
import json
from pathlib import Path

import httpx
import pytest
from app_server import form_values, running_app
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from app.inputs import RACE_FIELDS, Limits, load_examples
from sage_core.cli import main
from sage_core.config import DecodeConfig, SamplingConfig, check_max_new_tokens
from sage_core.errors import SageError
from sage_core.method_settings import DynamicConfig, SageConfig
from sage_core.models.prompts import check_prompt

LIMITS = Limits(max_upload_mb=1, max_video_seconds=5, max_trace_mb=0.5)
HUGE = 10**400
FILE = {"meta": {"_type": "gradio.FileData"}}


def sentence(build) -> str:
    with pytest.raises(SageError) as refused:
        build()
    return str(refused.value)


# (setting, bad value as the API and page send it, the CLI's arguments, the library's own sentence)
CASES = [
    ("node_budget", 10**6, ["--node-budget", str(10**6)], lambda: SageConfig(node_budget=10**6)),
    ("node_budget", HUGE, ["--node-budget", str(HUGE)], lambda: SageConfig(node_budget=HUGE)),
    ("depth_max", 11, ["--depth-max", "11"], lambda: SageConfig(depth_max=11)),
    ("width_min", 0, ["--width-min", "0"], lambda: SageConfig(width_min=0)),
    ("candidates", 100000, ["--candidates", "100000"], lambda: SageConfig(candidates=100000)),
    ("dynamic_depth", 11, ["--dynamic-depth", "11"], lambda: DynamicConfig(depth=11)),
    ("dynamic_candidates", 0, ["--dynamic-candidates", "0"], lambda: DynamicConfig(candidates=0)),
    ("dynamic_total_tokens", HUGE, ["--dynamic-total-tokens", str(HUGE)], lambda: DynamicConfig(total_tokens=HUGE)),
    ("temperature", 1e-40, ["--temperature", "1e-40"], lambda: SamplingConfig(temperature=1e-40)),
    ("temperature", 7.0, ["--temperature", "7"], lambda: SamplingConfig(temperature=7.0)),
    ("prune_chosen", 1.0, ["--prune-ratio", "1"], lambda: DecodeConfig("sage", prune_ratio=1.0)),
    ("prompt", "hi \ud800 there", ["--prompt", "hi \ud800 there"], lambda: check_prompt("hi \ud800 there")),
]
IDS = [f"{c[0]}={str(c[1])[:12]}" for c in CASES]


@pytest.fixture(scope="module")
def example() -> tuple[str, str]:
    first = next(e for e in load_examples() if not e.is_video)
    return first.file, first.prompt


@pytest.fixture(scope="module")
def url():
    with running_app("builtin", "builtin", limits=LIMITS) as address:
        yield address.rstrip("/")


@pytest.fixture(scope="module")
def client(url):
    return Client(url, verbose=False)


def api_inputs(example: tuple[str, str], setting: str, value: object) -> dict:
    inputs: dict = {"image": handle_file(example[0]), "prompt": example[1], "max_new_tokens": 3, setting: value}
    if setting == "prune_chosen":
        inputs["prune_choice"] = "chosen"
    return inputs


@pytest.mark.parametrize(("setting", "value", "cli_args", "build"), CASES, ids=IDS)
def test_the_cli_the_api_and_the_page_give_the_librarys_sentence(
    url, client, example, capsys, setting, value, cli_args, build
):
    expected = sentence(build)
    # the CLI (the check comes before any model is loaded)
    args = ["generate", "--image", example[0], "--device", "cpu"]
    args += cli_args if setting == "prompt" else ["--prompt", example[1], *cli_args]
    assert main(args) == 2
    assert f"error: {expected}\n" in capsys.readouterr().err
    if setting == "prompt":  # gradio_client cannot send a lone surrogate: a hand-written call can
        values = base_values(uploaded(url, example[0]), str(value))
        assert raw_race(url, values) == expected
        kind, outputs = raw_call(url, "race_live", [*values, None])
        assert kind == "complete" and expected in html.unescape(outputs[0])
        return
    # the API
    with pytest.raises(AppError) as refused:
        client.predict(**api_inputs(example, setting, value), api_name="/race")
    assert str(refused.value) == expected
    # the page's streamed race: the same sentence in its status line
    inputs = api_inputs(example, setting, value)
    job = client.submit(*form_values(**inputs), None, api_name="/race_live")
    assert expected in html.unescape(job.result()[0])


def test_huge_token_limits_are_a_sentence_everywhere(client, example, capsys):
    app_sentence = sentence(lambda: check_max_new_tokens(HUGE, LIMITS.max_new_tokens))
    assert "a 401-digit number" in app_sentence
    with pytest.raises(AppError, match="^" + app_sentence.replace("[", r"\[").replace("]", r"\]") + "$"):
        client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=HUGE, api_name="/race")
    assert main(["generate", "--image", example[0], "--prompt", example[1], "--max-new-tokens", str(HUGE)]) == 2
    assert "max new tokens must be a whole number in [1, 4096], not a 401-digit number" in capsys.readouterr().err


def test_the_builtin_pairs_unknown_words_are_named(client, example, capsys):
    prompt = "where is the zebra and the giraffe?"
    declined = "was not taught “zebra”, “giraffe”, so the question is declined"  # the asking note's words
    with pytest.raises(AppError, match=f"{declined}.*“how many circles are there.”"):
        client.predict(image=handle_file(example[0]), prompt=prompt, max_new_tokens=3, api_name="/race")
    assert main(["generate", "--image", example[0], "--prompt", prompt, "--device", "cpu"]) == 2
    assert declined in capsys.readouterr().err
    # a prompt of known words races as before
    good = client.predict(image=handle_file(example[0]), prompt=example[1], max_new_tokens=3, api_name="/race")
    assert good["texts"]["sage"] == good["texts"]["static"] != ""


def test_a_prompt_over_the_models_positions_is_refused(client, example, capsys):
    prompt = "?" * 3990  # about 4,050 tokens; the built-in pair reads 2,048 positions
    with pytest.raises(AppError, match=r"the prompt is \d+ tokens .* reads at most 2048 positions"):
        client.predict(image=handle_file(example[0]), prompt=prompt, max_new_tokens=3, api_name="/race")
    assert main(["generate", "--image", example[0], "--prompt", prompt, "--device", "cpu"]) == 2
    assert "reads at most 2048 positions" in capsys.readouterr().err


def raw_call(url: str, api: str, values: list) -> tuple[str, object]:
    """POST a hand-written payload (past gradio_client's own checks, lone surrogates kept escaped as a
    hostile client may send them); ("error", its sentence) or ("complete", the outputs)."""
    body = json.dumps({"data": values})
    answer = httpx.post(f"{url}/gradio_api/call/{api}", content=body, headers={"content-type": "application/json"})
    answer.raise_for_status()
    stream = httpx.get(f"{url}/gradio_api/call/{api}/{answer.json()['event_id']}", timeout=120).text
    events = [block for block in stream.split("\n\n") if block.strip()]
    kind, _, data = events[-1].partition("\n")
    payload = json.loads(data.removeprefix("data:").strip())
    kind = kind.removeprefix("event:").strip()
    return kind, payload["error"] if kind == "error" else payload


def raw_race(url: str, values: list) -> str:
    """The /race API's answer to the page's race inputs."""
    kind, error = raw_call(url, "race", values)
    assert kind == "error", error
    return str(error)


def uploaded(url: str, file: str) -> dict:
    with open(file, "rb") as handle:
        answer = httpx.post(f"{url}/gradio_api/upload", files={"files": (Path(file).name, handle)})
    return FILE | {"path": answer.json()[0]}


def base_values(image: object, prompt: str = "describe the image.") -> list:
    return form_values(image=image, prompt=prompt, max_new_tokens=3)


REFUSED_BY_GRADIO = [
    ("a server path", "/etc/passwd", "not in the form this app takes"),
    ("a FileData outside the uploads", FILE | {"path": "/etc/passwd"}, "was not uploaded to this app"),
    ("a FileData with a URL", FILE | {"path": "x", "url": "http://169.254.169.254/"}, "was not uploaded"),
    ("a malformed FileData", {"meta": 5}, "not in the form this app takes"),
]


@pytest.mark.parametrize(("case", "image", "message"), REFUSED_BY_GRADIO, ids=[c[0] for c in REFUSED_BY_GRADIO])
def test_what_gradio_refuses_before_the_handler_is_a_sentence(url, case, image, message):
    assert message in raw_race(url, base_values(image))


def test_values_gradios_components_refuse_reach_the_handlers_sentence(url, client, example):
    values = base_values(None)
    values[6] = "sage"  # methods: a string, not a list
    assert raw_race(url, values) == "no image or video: upload one, or pick an example"
    for index, value, expected in (
        (14, "zz", "unknown pruning choice 'zz'; use off, paper or chosen"),
        (15, "x", "the pruning ratio must be a number in [0, 1), not 'x'"),
        (
            6,
            ["sage", "beam"],
            "unknown method 'beam'; choose from ar, chain, static, sage, dynamic, sage-frozen, best-first, sage-cost, "
            "smart",
        ),
    ):
        inputs = {"prune_choice": "chosen"} if index == 15 else {}
        request = api_inputs(example, "max_new_tokens", 3) | inputs
        request[RACE_FIELDS[index]] = value
        with pytest.raises(AppError) as refused:
            client.predict(**request, api_name="/race")
        assert str(refused.value) == expected
