"""Sessions that follow the visitor, not the socket (`app.gradio_patches.SessionRules`).

Gradio marks a session closed when its page's heartbeat drops and never reopens it, and its capacity
evicts the least recently used session whatever it is doing. Before: a visitor whose heartbeat dropped
for 3 s (a network blip, a laptop's sleep) and who then read for 40 s got the landing race from "Export
for slides", and 1040 calls with fresh session ids evicted a visitor reading their race. Here: the rules
on a real `StateHolder`, then the same two stories on a served app, and a page whose session is truly gone
told so in one sentence instead of reading a fresh session's defaults.
"""

from __future__ import annotations

import datetime
import json
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import gradio as gr
import httpx
import pytest
from app_server import form_values
from gradio.state_holder import StateHolder

from app.boundary import LOST
from app.gradio_patches import SESSION_BOUNDS, bound_sessions, drop_session, session_lost
from app.inputs import Limits, load_examples
from app.page import STATE_TTL

NOW = datetime.datetime(2026, 12, 4, 12, 0, 0)


def holder_of(capacity: int, grace: float = 30.0) -> tuple[StateHolder, gr.State, list[str]]:
    """A real `StateHolder` for a small Blocks kept by the app's rules, its one `gr.State` (whose delete
    callback notes what it deleted), and that note."""
    deleted: list[str] = []
    with gr.Blocks() as demo:
        kept = gr.State(None, delete_callback=deleted.append)
    demo.state_session_capacity = capacity
    bound_sessions(demo, grace, 3600)
    holder = StateHolder()
    holder.set_blocks(demo)
    return holder, kept, deleted


def test_a_blip_reopens_the_session_and_the_grace_counts_from_the_last_disconnect() -> None:
    holder, _, _ = holder_of(10)
    rules = getattr(holder.blocks, SESSION_BOUNDS)
    holder["reader"]  # the visitor's race (its last event)
    holder.time_last_used["reader"] = NOW - datetime.timedelta(seconds=100)
    rules.arrived(holder, "reader")
    assert rules.stale(holder, NOW) == []  # reading for 100 s with the page open
    rules.left("reader", NOW - datetime.timedelta(seconds=3))  # the heartbeat dropped 3 s ago
    holder.session_data["reader"].is_closed = True  # as Gradio marks it
    assert rules.stale(holder, NOW) == []  # within the grace, counted from the disconnect, not the last event
    rules.arrived(holder, "reader")  # the page's EventSource reconnected by itself
    assert holder.session_data["reader"].is_closed is False
    assert rules.stale(holder, NOW + datetime.timedelta(seconds=600)) == []  # open again: kept while it reads
    rules.left("reader", NOW)
    assert rules.stale(holder, NOW + datetime.timedelta(seconds=29)) == []
    assert rules.stale(holder, NOW + datetime.timedelta(seconds=31)) == ["reader"]  # gone 31 s: dropped
    assert rules.stale(holder, NOW + datetime.timedelta(seconds=7200)) == ["reader"]


def test_the_capacity_never_evicts_a_live_page_and_an_evicted_sessions_files_go_with_it() -> None:
    holder, kept, deleted = holder_of(3)
    rules = getattr(holder.blocks, SESSION_BOUNDS)
    holder["visitor"][kept._id] = "visitor's export"
    rules.arrived(holder, "visitor")  # the visitor's page is open, and least recently used
    for n in range(40):  # a crowd of fresh session ids, each holding a file
        holder[f"script-{n}"][kept._id] = f"script-{n}'s export"
    assert "visitor" in holder.session_data and len(holder.session_data) == 3
    assert list(holder.session_data) == ["visitor", "script-38", "script-39"]
    assert "script-0's export" in deleted and "visitor's export" not in deleted  # evicted: its file removed
    # the stateless go before those holding state
    holder, kept, deleted = holder_of(3)
    holder["holds"][kept._id] = "kept"
    holder["empty"]
    holder["new"]
    holder["newer"]
    assert "holds" in holder.session_data and "empty" not in holder.session_data
    # a page whose own session was dropped gets a session marked lost, not a silent fresh one
    assert session_lost(holder["empty"]) and not session_lost(holder["newest"])


def test_every_page_control_reads_a_lost_session_as_a_sentence() -> None:
    """`boundary.refuse_if_lost`: an event reading a state refuses; one that starts anew finds the session."""
    from types import SimpleNamespace

    from app.boundary import refuse_if_lost
    from app.gradio_patches import LOST_MARK as FLAG

    state, other, text = gr.State(None), gr.State(None), gr.Textbox()
    session = SimpleNamespace(**{FLAG: True})
    stop = SimpleNamespace(inputs=[state], outputs=[text])
    with pytest.raises(gr.Error, match="no longer on the server"):
        refuse_if_lost(stop, session)
    assert session_lost(session)  # still lost: Stop starts nothing
    step = SimpleNamespace(inputs=[text, other], outputs=[text, other, state])
    with pytest.raises(gr.Error, match="press Start or Replay"):
        refuse_if_lost(step, session)
    assert not session_lost(session)  # told once: the next Step starts a stepped race anew
    setattr(session, FLAG, True)
    refuse_if_lost(SimpleNamespace(inputs=[text], outputs=[state]), session)  # Start: a new race
    assert not session_lost(session)


# -- on a served app --------------------------------------------------------------------------------


def open_heartbeat(url: str, session: str) -> socket.socket:
    """A page's heartbeat, held open on a raw socket (closing it is the blip)."""
    parts = urlsplit(url)
    connection = socket.create_connection((parts.hostname, parts.port))
    connection.sendall(
        f"GET /gradio_api/heartbeat/{session} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    return connection


def fn_index(demo: gr.Blocks, name: str) -> int:
    return next(index for index, fn in demo.fns.items() if fn.name == name or fn.api_name == name)


def queued_call(url: str, session: str, index: int, data: list) -> dict:
    """An event through the queue, as the page sends it: the last message of its stream."""
    body = {"fn_index": index, "data": data, "session_hash": session, "event_data": None}
    assert httpx.post(f"{url}gradio_api/queue/join", json=body, timeout=30).status_code == 200
    last: dict = {}
    with httpx.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}, timeout=300) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                last = json.loads(line.removeprefix("data: "))
                if last.get("msg") == "process_completed":
                    break
    return last


def direct_call(url: str, session: str, index: int, data: list) -> httpx.Response:
    """A queue-free event (Stop, the tree's controls), as the page sends it."""
    body = {"fn_index": index, "data": data, "session_hash": session}
    return httpx.post(f"{url}gradio_api/run/predict", json=body, timeout=60)


@pytest.mark.timeout(300)
def test_a_visitor_survives_a_blip_and_a_crowd_and_a_lost_session_is_told() -> None:
    from app.serving import running_demo

    limits = replace(Limits(), session_grace_seconds=1.0, max_sessions=12)
    with running_demo("builtin", "builtin", limits) as (demo, url):
        page_state = next(b for b in demo.blocks.values() if isinstance(b, gr.State) and b.time_to_live == STATE_TTL)
        example = next(
            e for e in load_examples() if not e.is_video and e.prompt != getattr(page_state.value, "prompt", None)
        )
        with open(example.file, "rb") as handle:
            path = httpx.post(f"{url}gradio_api/upload", files={"files": ("picture.png", handle)}).json()[0]
        image = {"path": path, "meta": {"_type": "gradio.FileData"}}
        visitor = "visitor-reading"
        heartbeat = open_heartbeat(url, visitor)
        raced = queued_call(
            url,
            visitor,
            fn_index(demo, "race_live"),
            [*form_values(image=image, prompt=example.prompt, max_new_tokens=6), None],
        )
        assert raced.get("success"), raced
        holder = demo.state_holder
        mine = holder.session_data[visitor].state_data[page_state._id]
        assert mine.header.prompt == example.prompt

        heartbeat.close()  # the blip: the heartbeat drops for a moment ...
        time.sleep(0.5)
        heartbeat = open_heartbeat(url, visitor)  # ... and the page reconnects by itself
        time.sleep(4)  # reading, four times the grace
        assert visitor in holder.session_data, "the blip lost the visitor's session"

        stop = fn_index(demo, "stop")
        for n in range(40):  # a crowd of fresh sessions (12 at most are kept): queue-free calls
            assert direct_call(url, f"crowd-{n}", stop, [None]).status_code == 200
        assert visitor in holder.session_data, "the crowd evicted a visitor whose page is open"
        assert len(holder.session_data) <= limits.max_sessions

        exported = queued_call(url, visitor, fn_index(demo, "slides_file"), [None, None])
        assert exported.get("success"), exported
        file_path = exported["output"]["data"][0]["value"]["path"]
        exported_text = Path(file_path).read_text()
        words = mine.lanes[0].text.split()[:3]
        print(f"\nthe visitor's answer begins {words}; the landing's {page_state.value.lanes[0].text.split()[:3]}")
        assert words and all(word in exported_text for word in words), "the export is not the visitor's race"

        assert direct_call(url, visitor, stop, [None]).status_code == 200  # Stop on a finished race: no error
        drop_session(holder, visitor)  # the visitor's session truly gone (away past the grace, say)
        refused = direct_call(url, visitor, stop, [None])
        assert LOST.split(" (")[0] in refused.text.replace("\\u2019", "'"), refused.text
        heartbeat.close()


def test_every_page_control_answers_in_every_state() -> None:
    """Stop after a race had finished answered `{}` for four outputs, which Gradio reads as one value and
    answers with a bare "Error" (HTTP 500; a crowd's calls logged 1,043 tracebacks); so did `after_stop` and
    the tree's controls with a lane not in the race. Each now answers an update that changes nothing."""
    from app_records import synthetic_race

    from app.handlers import Handlers, Settings

    class FakePage:  # every component named by its attribute
        def __getattr__(self, name: str) -> str:
            return name

    handlers = Handlers.__new__(Handlers)
    handlers.page = cast(Any, FakePage())  # a stand-in page
    handlers.settings = Settings(Limits(), [], "builtin", None, [])
    finished = synthetic_race()
    assert finished.finished
    answers = [
        handlers.stop(finished),
        handlers.after_stop(finished),
        handlers.after_stop(None),
        handlers.show_tree(finished, "no-such-lane", 3),
        handlers.show_tree(None, None, None),
        handlers.show_lane(None, "sage"),
    ]
    for answer in answers:
        assert answer and set(answer) == {"status"}, answer  # one update, the status left as it is
    assert "Nothing is running" in handlers.stop(None)["status"]
