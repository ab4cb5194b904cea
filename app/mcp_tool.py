"""The MCP tools `race_api` and `replay_api`: the /race and /replay answers as JSON text, without the panels
(and the trace) unless asked for.

Gradio's MCP server sends a tool's answer as the text of its value: a dict would reach the client as
Python's repr (single quotes, ~109 kB with the panels and the trace). The tool is its own endpoint
(`/race_json`, `/replay_json`), named `race_api` and `replay_api` for MCP clients, returning
`api.json_answer`'s text; `/race` and `/replay` stay the Python clients' dicts and are not listed as tools.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from .api import MCP_MAX_BYTES, json_answer

ASKED_ARGS = {
    "panels": "    panels: true to add the Plotly panels (figure JSON, about 60 kB); false by default.\n",
    "trace": "    trace: true to add the trace (JSON lines, the records every figure comes from); false by default.\n",
}
RETURNS = f"""Returns:
    JSON text (at most {MCP_MAX_BYTES // 1024} kB unless panels or trace are asked for): replay, stopped, source,
    target, draft, device, dtype, prompt, media, methods; per method its text (texts), token ids (token_ids),
    figures (tokens per second, mean accepted length tau, target forwards, seconds) and draft prompt tokens; the
    speed-ups against the baselines (speedups), the headline estimate against the main rival and every rival
    (headline, headlines), the losslessness verdict (lossless; or, when sampling, the exact-in-distribution
    note), the notes said before the race (notes), the per-race account where the app records one, and
    left_out (what was not sent: "panels", "trace"). Non-finite numbers are null.
"""
REPLAY_RETURNS = """Returns:
    JSON text: the same answer as the race tool's, marked as a replay (replay: true), without the trace (the
    caller sent it) and without the panels unless asked for (left_out: ["panels"]). Non-finite numbers are null.
"""


def json_tool(api: Callable[..., dict], name: str, offered: Sequence[str], returns: str) -> Callable[..., str]:
    """An MCP tool made from an API function (`/race`'s, `/replay`'s): its inputs, then one flag for each of
    `offered` ("panels", "trace"); its answer `json_answer`'s text; its description the function's docstring
    with those flags and `returns`; its name `name` (what MCP clients call)."""
    base = inspect.signature(api)
    extra = [inspect.Parameter(flag, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False) for flag in offered]
    signature = base.replace(parameters=[*base.parameters.values(), *extra])

    def answer_as_json(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        asked = {flag: bool(values.pop(flag)) for flag in offered}
        return json_answer(api(**values), offered=offered, **asked)

    head, _, _ = (api.__doc__ or "").partition("Returns:")
    setattr(answer_as_json, "__signature__", signature)  # noqa: B010  # what Gradio reads the fields from
    answer_as_json.__doc__ = head.rstrip() + "\n" + "".join(ASKED_ARGS[flag] for flag in offered) + "\n" + returns
    answer_as_json.__name__ = name  # the MCP tool's name (clients knew it)
    return answer_as_json


def race_json_function(race_api: Callable[..., dict]) -> Callable[..., str]:
    """The `race_api` MCP tool from the /race function (`handlers.race_api_function`): panels and trace only
    when asked for."""
    return json_tool(race_api, "race_api", ("panels", "trace"), RETURNS)


def replay_json_function(replay_api: Callable[..., dict]) -> Callable[..., str]:
    """The `replay_api` MCP tool from the /replay function (`Handlers.replay_api`): JSON text like the race
    tool's (it was Python's repr of a dict, 67 kB of single quotes), the panels only when asked for."""
    return json_tool(replay_api, "replay_api", ("panels",), REPLAY_RETURNS)


def hidden_from_mcp(fn: Any) -> Any:
    """Keep an endpoint off the MCP server's tool list (Gradio lists only functions marked as tools)."""
    fn._mcp_type = "api"
    return fn


__all__ = ["hidden_from_mcp", "json_tool", "race_json_function", "replay_json_function"]
