"""The app's reaches into Gradio's internals (`app/gradio_patches.py`): what each relies on is still there,
and each does what it says on a served app. A Gradio upgrade that moves any of it fails here, loudly."""

from __future__ import annotations

import datetime
import inspect
import time
from dataclasses import replace
from pathlib import Path

import gradio as gr
import pytest
from gradio import queueing, route_utils
from gradio.state_holder import SessionState, StateHolder

from app import gradio_patches
from app.gradio_patches import SESSION_BOUNDS, drop_session, stale_sessions
from app.inputs import Limits

CHART = Path(__file__).resolve().parent.parent / "assets" / "examples" / "chart.png"


def test_what_the_patches_rely_on_is_still_in_gradio() -> None:
    holder = StateHolder()
    for name in ("session_data", "time_last_used", "lock"):
        assert hasattr(holder, name), f"Gradio's StateHolder lost {name}: app/gradio_patches.py needs it"
    assert callable(getattr(StateHolder, "delete_state", None))
    assert "is_closed" in inspect.getsource(SessionState.__init__), "SessionState lost is_closed"
    # The server calls the cleanup the app extends, every second.
    assert "delete_all_expired_state()" in inspect.getsource(route_utils), "Gradio no longer cleans state"
    assert "queue_full" in inspect.getsource(queueing.Queue.push), "Gradio's full queue says it differently"
    # What `SessionRules` and `HeartbeatWatch` read and replace: the heartbeat's route, the queue's events in
    # flight per session, and the holder's session making and capacity.
    from gradio import routes

    assert '"/heartbeat/{session_hash}"' in inspect.getsource(routes), "Gradio's heartbeat route moved"
    assert "pending_event_ids_session" in inspect.getsource(queueing.Queue.__init__)
    assert "self.update(session_id)" in inspect.getsource(gradio_patches._stock_getitem)
    assert "self.capacity" in inspect.getsource(gradio_patches._stock_update)
    # What `around_preprocess_data` and `around_preprocess` wrap: an event's inputs, a component's payload.
    assert inspect.iscoroutinefunction(gr.Blocks.preprocess_data)
    assert list(inspect.signature(gr.Blocks.preprocess_data).parameters)[:3] == ["self", "block_fn", "inputs"]
    for component in (gr.Image, gr.Sketchpad, gr.Number, gr.Slider):
        assert list(inspect.signature(component.preprocess).parameters)[:2] == ["self", "payload"], component


def test_around_preprocess_sees_the_payload_first() -> None:
    from app.gradio_patches import around_preprocess

    seen: list[object] = []
    number = around_preprocess(gr.Number(), lambda stock, payload: seen.append(payload) or stock(payload))
    assert number.preprocess(3) == 3 and seen == [3]


class FakeSession:
    def __init__(self, closed: bool) -> None:
        self.is_closed = closed
        self.state_components = ()  # no gr.State values to hand to delete callbacks


def test_stale_sessions_are_the_closed_past_their_grace_and_the_idle() -> None:
    holder = StateHolder()
    now = datetime.datetime(2026, 12, 3, 12, 0, 0)
    ages = {"left-just-now": (True, 5), "left-a-while-ago": (True, 31), "open-busy": (False, 31)}
    ages |= {"open-idle": (False, 3601), "never-used": (False, None)}
    for session_id, (closed, age) in ages.items():
        holder.session_data[session_id] = FakeSession(closed)  # type: ignore[assignment]  # a stand-in session
        if age is not None:
            holder.time_last_used[session_id] = now - datetime.timedelta(seconds=age)
    assert stale_sessions(holder, 30, 3600, now) == ["left-a-while-ago", "open-idle"]
    drop_session(holder, "left-a-while-ago")
    assert "left-a-while-ago" not in holder.session_data and "left-a-while-ago" not in holder.time_last_used


@pytest.mark.timeout(240)
def test_a_served_app_drops_a_visitors_session_once_they_leave() -> None:
    """Three visitors race and leave; a fourth stays. After the grace, only the fourth's session is kept
    (Gradio alone keeps all four until 10,000 sessions exist)."""
    from gradio_client import Client, handle_file

    from app.inputs import RACE_FIELDS, RaceForm
    from app.serving import running_demo

    limits = replace(Limits(), session_grace_seconds=1.0, max_sessions=50)
    image = handle_file(str(CHART))
    form = RaceForm(image=image, prompt="describe it.", pair="builtin", methods=["sage", "static"], max_new_tokens=2)
    values = [getattr(form, name) for name in RACE_FIELDS]
    with running_demo("builtin", "builtin", limits) as (demo, url):
        rules = getattr(demo, SESSION_BOUNDS)
        assert (rules.closed_grace_s, rules.idle_s) == (1.0, 3600) and demo.state_session_capacity == 50
        clients = [Client(url, verbose=False) for _ in range(4)]
        for client in clients:
            answer = client.predict(*values, api_name="/race")
            assert "error" not in answer, answer
        holder = demo.state_holder
        sessions = [client.session_hash for client in clients]
        assert all(session in holder.session_data for session in sessions)
        for client in clients[:3]:
            client.close()
        deadline = time.monotonic() + 30
        while any(session in holder.session_data for session in sessions[:3]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert [session in holder.session_data for session in sessions] == [False, False, False, True]
        clients[3].close()
