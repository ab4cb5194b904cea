"""The MCP tools `race_api` and `replay_api`: the /race and /replay answers as JSON text, without the panels
(and the trace) unless asked for.

Gradio's MCP server sends a tool's answer as the text of its value: a dict would reach the client as
Python's repr (single quotes, ~109 kB with the panels and the trace). The tool is its own endpoint
(`/race_json`, `/replay_json`), named `race_api` and `replay_api` for MCP clients, returning
`api.json_answer`'s text; `/race` and `/replay` stay the Python clients' dicts and are not listed as tools.

An MCP request's body is limited by the MCP SDK (`MCP_BODY_BYTES`, 4 MiB): its transport answers a larger one
with a bare HTTP 413 before any tool runs, so the tool cannot refuse it. The tools' descriptions state the limit
(`BODY_NOTE`: a data: URL of at most about 3 MB), and `McpBodyLimit`, a middleware in front of the transport,
answers a request that declares a larger body with the same 413 and one sentence saying why and what to do.
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

from .api import MCP_MAX_BYTES, json_answer


def sdk_body_limit() -> int:
    """The MCP SDK's limit on a request's body, where it says it (4 MiB in mcp 1.30)."""
    try:
        from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
    except ImportError:  # pragma: no cover  (an SDK before the limit was named)
        return 4 * 2**20
    return int(DEFAULT_MAX_REQUEST_BODY_SIZE)


MCP_BODY_BYTES = sdk_body_limit()
#: The room a call's other fields take beside a data: URL (the JSON-RPC envelope, the prompt, the settings).
CALL_ROOM_BYTES = 64 * 1024
#: The largest file a data: URL can carry within the body limit: base64 writes 3 bytes as 4.
DATA_URL_MOST_BYTES = (MCP_BODY_BYTES - CALL_ROOM_BYTES) * 3 // 4
#: That in MB as the sentences say it (rounded down: 2.9).
DATA_URL_MB = math.floor(DATA_URL_MOST_BYTES / 2**20 * 10) / 10
#: Where Gradio serves its MCP transports.
MCP_PATH = "/gradio_api/mcp"
#: What to do with a larger file.
LARGER_FILE = (
    "send a larger picture or video by its URL, uploaded first with the upload_file_to_gradio tool or Gradio's "
    "/gradio_api/upload (the app's own upload limit applies)"
)
BODY_NOTE = f"""Limits:
    an MCP request's body is at most {MCP_BODY_BYTES / 2**20:g} MB (the MCP SDK's limit; a larger one is answered
    with HTTP 413 before this tool runs), so a file sent as a data: URL may be at most about
    {DATA_URL_MB:g} MB (base64 adds a third); {LARGER_FILE}.
"""

ASKED_ARGS = {
    "panels": "    panels: true to add the Plotly panels (figure JSON, about 60 kB); false by default.\n",
    "trace": "    trace: true to add the trace (JSON lines, the records every figure comes from); false by default.\n",
}
RETURNS = f"""Returns:
    JSON text (at most {MCP_MAX_BYTES // 1024} kB unless panels or trace are asked for): replay, stopped, source,
    target, draft, device, dtype, prompt, media, methods; per method its text (texts), token ids (token_ids),
    figures (tokens per second, mean accepted length tau, target forwards, seconds) and draft prompt tokens; the
    speed-ups against the baselines (speedups), the headline estimate against the main rival and every rival
    (headline, headlines), the losslessness verdict (lossless; a sampled race's says sampled: true and why its
    lanes differ: exact in distribution, not token-identical), the notes said before the race (notes), the
    per-race account where the app records one, and left_out (what was not sent: "panels", "trace"). An answer
    that would be larger (many methods, many tokens) leaves out the token ids and the acceptance figures, then
    cuts each text's end (texts_cut_at: the characters kept), then the account and the headlines, names each
    in left_out and says so in a sentence (bounded); the trace has them whole. Non-finite numbers are null.
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
    asked = "".join(ASKED_ARGS[flag] for flag in offered)
    answer_as_json.__doc__ = head.rstrip() + "\n" + asked + "\n" + returns + BODY_NOTE
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


def too_large(declared: int) -> str:
    """The sentence for an MCP request whose body is over the SDK's limit."""
    return (
        f"The MCP request is {declared / 2**20:.1f} MB; an MCP request may be at most {MCP_BODY_BYTES / 2**20:g} MB "
        f"(the MCP SDK's limit), so a file sent as a data: URL may be at most about {DATA_URL_MB:g} MB: "
        f"{LARGER_FILE}."
    )


class McpBodyLimit:
    """An ASGI middleware in front of Gradio's MCP transports: a request that declares a body over the MCP SDK's
    limit (`MCP_BODY_BYTES`) is answered with the HTTP 413 the transport would give, as a JSON-RPC error whose
    message is one sentence (`too_large`), where the transport says only "Request body too large". A body
    sent without its length is left to the transport's own check."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        declared = declared_length(scope) if MCP_PATH in scope.get("path", "") else None
        if declared is None or declared <= MCP_BODY_BYTES:
            await self.app(scope, receive, send)
            return
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": too_large(declared)}}
        body = json.dumps(error).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def declared_length(scope: dict) -> int | None:
    """An HTTP request's declared body length (its content-length), or None (none, or not a number)."""
    if scope.get("type") != "http":
        return None
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def hidden_from_mcp(fn: Any) -> Any:
    """Keep an endpoint off the MCP server's tool list (Gradio lists only functions marked as tools)."""
    fn._mcp_type = "api"
    return fn


__all__ = [
    "BODY_NOTE",
    "MCP_BODY_BYTES",
    "McpBodyLimit",
    "hidden_from_mcp",
    "json_tool",
    "race_json_function",
    "replay_json_function",
]
