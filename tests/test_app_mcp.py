"""`python app.py --mcp` (or SAGE_MCP=1): the app's API served as MCP tools by Gradio's MCP server.

An MCP client lists the running server's tools over streamable HTTP: `race_api` is there, its
description and its parameters' come from `Handlers.race_api`'s docstring. Through the same client a
race on a data: URL runs to its end, and a refusal reaches the client as the page's sentence."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import runpy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from app_server import free_port

from app.api import MCP_MAX_BYTES
from app.boundary import NOT_PUBLIC
from app.ui import build_demo, launch_options, queued
from sage_core.errors import SageError

ROOT = Path(__file__).resolve().parent.parent


async def list_tools(url: str) -> list[Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return list((await session.list_tools()).tools)


async def call_tool(url: str, name: str, arguments: dict) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


@contextmanager
def mcp_server() -> Iterator[str]:
    """The app queued and launched as `python app.py --mcp` launches it, on a free port; yields its MCP URL."""
    demo = build_demo()
    queued(demo).launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        prevent_thread_lock=True,
        quiet=True,
        mcp_server=True,
        **launch_options(),
    )
    try:
        yield f"{demo.local_url}gradio_api/mcp/"
    finally:
        demo.close()


@pytest.mark.slow
def test_an_mcp_client_races_a_data_url_and_reads_a_refusal_as_one_sentence() -> None:
    picture = ROOT / "assets" / "examples" / "describe_five.png"
    data_url = "data:image/png;base64," + base64.b64encode(picture.read_bytes()).decode()
    prompt = "describe the image in detail."
    with mcp_server() as url:
        raced = asyncio.run(call_tool(url, "race_api", {"image": data_url, "prompt": prompt, "max_new_tokens": 8}))
        asked = {"image": data_url, "prompt": prompt, "max_new_tokens": 8, "panels": True, "trace": True}
        full = asyncio.run(call_tool(url, "race_api", asked))
        refused = asyncio.run(call_tool(url, "race_api", {"image": "http://127.0.0.1:9/x.png", "prompt": prompt}))
        unknown = asyncio.run(call_tool(url, "race_api", {"image": data_url, "prompt": "zzqx the image"}))
    assert not raced.isError, raced.content
    text = raced.content[0].text
    answer = json.loads(text)  # JSON text (Gradio's MCP server would send a dict's repr: app/mcp_tool.py)
    print(f"\nthe MCP answer: {len(text.encode())} bytes; with the panels and the trace: {len(full.content[0].text)}")
    assert len(text.encode()) <= MCP_MAX_BYTES and len(raced.content) == 1
    assert answer["texts"]["sage"] == answer["texts"]["static"] != "" and answer["lossless"]["identical"]
    assert {"figures", "speedups", "notes", "headline"} <= set(answer) and answer["left_out"] == ["panels", "trace"]
    assert "panels" not in answer and "trace" not in answer
    asked_for = json.loads(full.content[0].text)
    assert asked_for["left_out"] == [] and asked_for["trace"].startswith('{"race"') and asked_for["panels"]
    assert asked_for["texts"] == answer["texts"]
    assert refused.isError and [c.text for c in refused.content] == [NOT_PUBLIC.format(host="127.0.0.1")], (
        refused.content
    )
    assert unknown.isError and "not taught “zzqx”" in unknown.content[0].text, unknown.content


def over_the_body_limit(url: str) -> Any:
    """A tools/call whose data: URL (a 3.4 MB picture) makes the body 4.5 MB, over the MCP SDK's 4 MB."""
    import httpx

    picture = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"\0" * (3_530_000)).decode()
    arguments = {"image": picture, "prompt": "describe the image."}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "race_api", "arguments": arguments}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    return httpx.post(url, content=json.dumps(call), headers=headers, timeout=30)


def test_a_body_over_the_mcp_limit_is_told_why_in_one_sentence() -> None:
    """A 3.6 MB PNG sent as a data: URL failed with the transport's bare HTTP 413 (the MCP SDK's 4 MB body limit)
    while the app takes 50 MB uploads: the middleware answers the same 413 with one sentence; a smaller body
    passes, and the tools' descriptions state the limit."""
    from app.mcp_tool import BODY_NOTE, MCP_BODY_BYTES, McpBodyLimit

    assert MCP_BODY_BYTES == 4 * 2**20 and "at most about 2.9 MB" in " ".join(BODY_NOTE.split())
    passed: list[str] = []

    async def inner(scope: dict, receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    def scope(path: str, length: int) -> dict:
        return {"type": "http", "path": path, "headers": [(b"content-length", str(length).encode())]}

    limit = McpBodyLimit(inner)
    asyncio.run(limit(scope("/gradio_api/mcp/", MCP_BODY_BYTES), None, send))  # at the limit: passed on
    asyncio.run(limit(scope("/gradio_api/upload", 40 * 2**20), None, send))  # not MCP: Gradio's own limit
    assert passed == ["/gradio_api/mcp/", "/gradio_api/upload"] and sent == []
    asyncio.run(limit(scope("/gradio_api/mcp/", 5 * 2**20), None, send))
    assert len(passed) == 2 and sent[0]["status"] == 413
    message = json.loads(sent[1]["body"])["error"]["message"]
    assert message.startswith("The MCP request is 5.0 MB;") and message.count(". ") == 0 and message.endswith(".")


def test_the_mcp_server_lists_the_race_tool_with_its_docstring() -> None:
    demo = build_demo()
    demo.queue(default_concurrency_limit=1).launch(
        server_name="127.0.0.1",
        server_port=free_port(),
        prevent_thread_lock=True,
        quiet=True,
        mcp_server=True,
        **launch_options(),
    )
    try:
        tools = {tool.name: tool for tool in asyncio.run(list_tools(f"{demo.local_url}gradio_api/mcp/"))}
        too_large = over_the_body_limit(f"{demo.local_url}gradio_api/mcp/")
    finally:
        demo.close()
    # a body over the MCP SDK's 4 MB: the transport's 413, with one sentence saying why and what to do
    assert too_large.status_code == 413, too_large.text
    message = too_large.json()["error"]["message"]
    assert message.startswith("The MCP request is 4.5 MB; an MCP request may be at most 4 MB (the MCP SDK's limit)")
    assert "data: URL may be at most about 2.9 MB" in message and "upload_file_to_gradio" in message
    for tool in ("race_api", "replay_api"):  # the limit stated where a client reads the tool
        assert "an MCP request's body is at most 4 MB" in " ".join(tools[tool].description.split())
    assert "race_api" in tools and "replay_api" in tools, sorted(tools)
    assert not [n for n in tools if n.startswith(("race_api_", "replay_api_"))], sorted(tools)  # no second tools
    race = tools["race_api"]
    assert race.description.startswith("Race SAGE against its baselines"), race.description
    assert "Returns:" in race.description and "losslessness verdict" in race.description
    properties = race.inputSchema["properties"]
    for name in ("image", "video", "prompt", "methods", "max_new_tokens", "depth_max", "temperature", "seed"):
        assert name in properties, sorted(properties)
    assert "question or instruction" in properties["prompt"]["description"]
    assert "Plotly panels" in properties["panels"]["description"] and "trace" in properties  # only when asked for
    assert "JSON text (at most 64 kB unless panels or trace are asked for)" in race.description
    assert "paper: 8" in properties["depth_max"]["description"]
    for accepted in ("public http(s) URL", "data: URL", "same machine"):  # what a local client should send
        assert accepted in properties["image"]["description"], properties["image"]["description"]
        assert accepted in race.description
    assert "data: URL" in tools["replay_api"].inputSchema["properties"]["trace_file"]["description"]


@pytest.mark.timeout(240)
def test_an_mcp_client_replays_a_data_url_trace_as_json_named_as_sent() -> None:
    """`replay_api` answered Python's repr of a dict (67,409 characters of single quotes) and named a trace sent
    as a data: URL `file.txt`: it answers JSON like `race_api`, the panels only when asked for."""
    trace = ROOT / "assets" / "landing" / "race.jsonl"
    data_url = "data:text/plain;base64," + base64.b64encode(trace.read_bytes()).decode()
    with mcp_server() as url:
        replayed = asyncio.run(call_tool(url, "replay_api", {"trace_file": data_url, "speed": 0}))
        asked = asyncio.run(call_tool(url, "replay_api", {"trace_file": data_url, "speed": 0, "panels": True}))
    assert not replayed.isError, replayed.content
    answer = json.loads(replayed.content[0].text)
    print(f"\nthe replay's MCP answer: {len(replayed.content[0].text.encode())} bytes")
    assert answer["replay"] is True and answer["left_out"] == ["panels"] and "trace" not in answer
    assert answer["source"] == "the trace you sent" and answer["texts"] and "headline" in answer
    assert len(replayed.content[0].text.encode()) <= MCP_MAX_BYTES
    with_panels = json.loads(asked.content[0].text)
    assert with_panels["left_out"] == [] and with_panels["panels"] and with_panels["texts"] == answer["texts"]


def test_app_py_turns_the_mcp_server_on_by_flag_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["app.py"])
    mcp_wanted = runpy.run_path(str(ROOT / "app.py"), run_name="app_not_launched")["mcp_wanted"]
    for argv, environment, wanted in [
        ([], "", False),
        (["--mcp"], "", True),
        ([], "1", True),
        ([], "true", True),
        ([], "0", False),
        (["--mcp"], "0", True),
    ]:
        monkeypatch.setenv("SAGE_MCP", environment)
        assert mcp_wanted(argv) is wanted, (argv, environment)


def test_app_py_takes_a_thread_count_or_refuses_it_in_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python app.py --threads N` hands N to every pair's load as SAGE_THREADS; a bad N is one sentence."""
    monkeypatch.setattr(sys, "argv", ["app.py"])
    threads_wanted = runpy.run_path(str(ROOT / "app.py"), run_name="app_not_launched")["threads_wanted"]
    monkeypatch.setenv("SAGE_THREADS", "1")
    threads_wanted(["--threads", "3"])
    assert os.environ["SAGE_THREADS"] == "3"
    for bad in ("0", "300"):
        with pytest.raises(SageError, match=r"^--threads must be 1-256 threads, not \d+$"):
            threads_wanted(["--threads", bad])
    threads_wanted([])  # none asked: the variable as it was
    assert os.environ["SAGE_THREADS"] == "3"
