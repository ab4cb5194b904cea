"""The /race API's one function (`race_api_function`): its parameters are the race's inputs at their
defaults and its docstring describes each, so Gradio and an MCP client name the API's fields from it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

from sage_core.methods import form_settings, specs

from .inputs import RaceForm, race_defaults, race_fields
from .page import DEFAULT_MAX_NEW_TOKENS


class Answers(Protocol):
    """What answers the API (`Handlers`): a checked race form, raced to its end, as JSON."""

    def race_api_answer(self, form: RaceForm) -> dict: ...


RACE_API_DOC = """\
Race SAGE against its baselines on one image or video to the end, and answer with the texts and figures.

Every method decodes the same prompt with the same target model; greedy (temperature 0) output equals
the target's own greedy decoding token for token, which the answer's `lossless` verdict checks.
Give `image` or `video` (PNG, JPEG, WebP, GIF, BMP, TIFF; mp4, webm, avi, mov, mkv). An MCP client sends
a public http(s) URL of the file, or the file itself as a data: URL: a client on the same machine as its
files sends those (a private or loopback address, or a path on the server, is refused in a sentence).

Args:
{args}

Returns:
    JSON: per method its text, token ids and figures (tokens per second, mean accepted length tau, target
    forwards), the speed-ups against the baselines, the losslessness verdict (a sampled race's with
    sampled: true and the exact-in-distribution note), the Plotly panels, and the trace (JSON lines) the figures
    come from.
"""
#: The /race API's common inputs, described (each method's settings describe themselves: `Setting.help`).
RACE_API_ARGS = {
    "image": "an image as a public http(s) URL or a data: URL (from the same machine: data:image/png;base64,...).",
    "video": "a video (mp4, webm, avi, mov, mkv) as a public http(s) URL or a data: URL; give it or `image`.",
    "prompt": "the question or instruction about the image or video.",
    "pair": 'the model pair: "builtin", "builtin-hesitant" or "builtin-one-pass", or on a GPU a preset such as '
    '"qwen2.5-vl-7b", "llava-ov-7b", "qwen3-vl-8b" or "smolvlm2-2.2b" (empty: the default).',
    "custom_target": "a custom target model (hub id or folder), when the app allows custom models.",
    "custom_draft": "a custom draft model of the same tokenizer as the target.",
    "max_new_tokens": "the most new tokens each method decodes.",
    "prune_choice": 'draft-side visual token pruning: "off", "paper" (the paper\'s ratios) or "chosen".',
    "prune_chosen": 'the share of visual tokens the draft skips when `prune_choice` is "chosen", in [0, 1).',
    "temperature": "0 decodes greedily; above 0 samples, exactly in the target's distribution.",
    "seed": "the sampling seed (empty: a fresh one, recorded in the trace).",
    "second_draft": '"one-pass" also races each chosen method that drafts with the pair\'s one-pass sibling draft '
    '(the same target; lanes keyed "sage/one-pass"; only a pair with one: "builtin", "builtin-hesitant"); '
    '"one-pass-off" that too and again with the target\'s features off (lanes keyed "sage/one-pass-off"; only '
    'where that draft reads them); "off": not.',
}


def race_api_doc() -> str:
    """The /race API's docstring (an MCP client's tool description): the common inputs, the registered
    methods and each method's settings."""
    methods = ", ".join(f'"{spec.name}" ({spec.short})' for spec in specs())
    described = {**RACE_API_ARGS, "methods": f"two or more of {methods}."}
    settings = {s.name: s.help for _, s in form_settings()}
    lines = [f"    {name}: {described.get(name) or settings.get(name, '')}" for name in race_fields()]
    return RACE_API_DOC.format(args="\n".join(lines))


def race_api_function(handlers: Answers) -> Callable[..., dict]:
    """The /race API as one function whose parameters are the race's inputs (`race_fields()`), at their
    defaults: Gradio names the API's parameters, and an MCP client its tool's,
    from this signature and docstring, so a registered method's settings are fields of the API too."""
    defaults = {**race_defaults(), "max_new_tokens": DEFAULT_MAX_NEW_TOKENS}
    parameters = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=value)
        for name, value in defaults.items()
    ]
    signature = inspect.Signature(parameters)

    def race_api(*args: Any, **kwargs: Any) -> dict:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return handlers.race_api_answer(RaceForm(**bound.arguments))

    race_api.__signature__ = signature  # type: ignore[attr-defined]  # what Gradio reads the API's fields from
    race_api.__doc__ = race_api_doc()
    return race_api
