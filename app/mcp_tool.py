"""The `race_api` MCP tool: the /race answer as JSON text, without the panels and the trace unless asked for.

Gradio's MCP server sends a tool's answer as the text of its value: a dict would reach the client as
Python's repr (single quotes, ~109 kB with the panels and the trace). The tool is its own endpoint
(`/race_json`), named `race_api` for MCP clients, returning `api.json_answer`'s text; `/race` stays the
Python clients' dict (with the panels and the trace) and is not listed as a tool.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .api import MCP_MAX_BYTES, json_answer

ASKED_ARGS = (
    "    panels: true to add the Plotly panels (figure JSON, about 60 kB); false by default.\n"
    "    trace: true to add the trace (JSON lines, the records every figure comes from); false by default.\n"
)
RETURNS = f"""Returns:
    JSON text (at most {MCP_MAX_BYTES // 1024} kB unless panels or trace are asked for): replay, stopped, source,
    target, draft, device, dtype, prompt, media, methods; per method its text (texts), token ids (token_ids),
    figures (tokens per second, mean accepted length tau, target forwards, seconds) and draft prompt tokens; the
    speed-ups against the baselines (speedups), the headline estimate against the main rival and every rival
    (headline, headlines), the losslessness verdict (lossless; or, when sampling, the exact-in-distribution
    note), the notes said before the race (notes), the per-race account where the app records one, and
    left_out (what was not sent: "panels", "trace"). Non-finite numbers are null.
"""


def race_json_function(race_api: Callable[..., dict]) -> Callable[..., str]:
    """The MCP tool from the /race function (`handlers.race_api_function`): its inputs, then `panels` and
    `trace`; its answer `json_answer`'s text; its description the /race docstring with those two inputs and
    what comes back."""
    base = inspect.signature(race_api)
    extra = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False) for name in ("panels", "trace")
    ]
    signature = base.replace(parameters=[*base.parameters.values(), *extra])

    def race_api_json(*args: Any, **kwargs: Any) -> str:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        panels, trace = bool(values.pop("panels")), bool(values.pop("trace"))
        return json_answer(race_api(**values), panels=panels, trace=trace)

    doc = race_api.__doc__ or ""
    head, _, _ = doc.partition("Returns:")
    race_api_json.__signature__ = signature  # type: ignore[attr-defined]  # what Gradio reads the fields from
    race_api_json.__doc__ = head.rstrip() + "\n" + ASKED_ARGS + "\n" + RETURNS
    race_api_json.__name__ = "race_api"  # the MCP tool's name (clients knew it)
    return race_api_json


def hidden_from_mcp(fn: Any) -> Any:
    """Keep an endpoint off the MCP server's tool list (Gradio lists only functions marked as tools)."""
    fn._mcp_type = "api"
    return fn


__all__ = ["hidden_from_mcp", "race_json_function"]
