"""Where the app reaches into Gradio's internals, gathered in one place (each checked by
`tests/test_gradio_patches.py`, which fails loudly when an upgrade moves what it relies on).

- `answer_full_queue`: a full queue answers the app's own "busy" sentence (Gradio has no hook for it).
- `around_preprocess_data`: the app's look at an event's raw inputs before Gradio's own checks refuse them
  with a bare "Error" (`boundary.refusals_as_sentences`).
- `around_preprocess`: a component's look at a payload before Gradio decodes it (a picture's size read
  from its header, `sketch.checked`; an odd value handed on for the handler to name, `page.lenient`).
- `bound_sessions`: Gradio keeps every session it has seen (a copy of the page's configuration and the
  last value of every component the session updated, about 0.2–0.6 MB here) until 10,000 sessions
  exist, drops a closed session's `gr.State` only after an hour, marks a session closed when its
  heartbeat drops and never reopens it, and evicts the least recently used session at its capacity
  whatever it is doing. The app's `SessionRules` follow the visitor instead of the socket: a page's
  heartbeat is watched (`HeartbeatWatch`, a middleware), a session goes `closed_grace_s` after its
  page's last heartbeat closed (a reconnect reopens it) or after `idle_s` unused, the capacity
  (`launch(state_session_capacity=...)`) never evicts a live page's session, and a page whose session
  was dropped is told so (`session_lost`) instead of reading a fresh session's defaults.
"""

from __future__ import annotations

import datetime
import functools
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr
from gradio.state_holder import StateHolder

# The attribute on a Blocks that opts it into whole-session cleanup: (closed grace, idle limit) in seconds.
SESSION_BOUNDS = "_sage_session_bounds"
_stock_delete_all_expired_state = StateHolder.delete_all_expired_state
_stock_getitem = StateHolder.__getitem__
_stock_update = StateHolder.update


def answer_full_queue(demo: gr.Blocks, answer: Callable[[int, int | None], str]) -> None:
    """A request refused by the full queue gets `answer(waiting, limit)` instead of Gradio's line."""
    queue = demo._queue
    stock: Callable[..., Awaitable[tuple[bool, Any, str]]] = queue.push

    async def push(*args: Any, **kwargs: Any) -> Any:
        accepted, message, state = await stock(*args, **kwargs)
        if state == "queue_full":
            message = answer(len(queue), queue.max_size)
        return accepted, message, state

    setattr(queue, "push", push)  # noqa: B010  # Gradio's queue has no hook for a full queue's answer


def around_preprocess(component: Any, around: Callable[[Callable[[Any], Any], Any], Any]) -> Any:
    """`component.preprocess(payload)` becomes `around(stock_preprocess, payload)`; the component."""
    stock = component.preprocess

    def preprocess(payload: Any) -> Any:
        return around(stock, payload)

    component.preprocess = preprocess
    return component


def around_preprocess_data(demo: gr.Blocks, around: Callable[..., Awaitable[Any]]) -> None:
    """`demo.preprocess_data(block_fn, inputs, ...)` becomes `await around(stock, block_fn, inputs, ...)`."""
    stock = demo.preprocess_data

    @functools.wraps(stock)
    async def preprocess_data(block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any) -> Any:
        return await around(stock, block_fn, inputs, *args, **kwargs)

    setattr(demo, "preprocess_data", preprocess_data)  # noqa: B010  # Gradio has no hook for bad input


# -- sessions that follow the visitor ------------------------------------------------------------

#: The heartbeat route: a page holds it open while it is shown (its `EventSource` reconnects by itself).
HEARTBEAT_PATH = re.compile(r"/heartbeat/(?P<session>[^/]+)/?$")
#: How many dropped sessions' ids are remembered, to tell a returning page that its race is gone.
DROPPED_KEPT = 20_000
#: The flag on a session Gradio made anew for an id the app had dropped: its page's race is gone.
LOST_MARK = "_sage_lost"


@dataclass
class SessionRules:
    """How the app keeps sessions (`bound_sessions`), and what it knows of each visitor's page.

    A session is kept while its page holds the heartbeat open or one of its events is in flight. Once the
    last heartbeat closes it stays `closed_grace_s` from that moment (a blip, a laptop's sleep, a phone
    backgrounding the tab: the page reconnects by itself and the session is open again); a session unused
    for `idle_s` goes whatever its page does (its race has expired by then). When more sessions exist than
    the capacity, those with neither heartbeat nor event in flight go first, the ones holding no state
    before the others, the least recently used first; a live page's session is never evicted by others.
    The ids of dropped sessions are remembered, so a page that comes back is told its race is gone."""

    closed_grace_s: float
    idle_s: float
    heartbeats: dict[str, int] = field(default_factory=dict)
    left_at: dict[str, datetime.datetime] = field(default_factory=dict)
    dropped: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def arrived(self, holder: StateHolder | None, session_id: str) -> None:
        """A heartbeat opened: the page is shown (again)."""
        self.heartbeats[session_id] = self.heartbeats.get(session_id, 0) + 1
        self.left_at.pop(session_id, None)
        session = holder.session_data.get(session_id) if holder is not None else None
        if session is not None:
            session.is_closed = False

    def left(self, session_id: str, now: datetime.datetime | None = None) -> None:
        """A heartbeat closed: the grace counts from now once no other is open."""
        count = self.heartbeats.get(session_id, 0) - 1
        if count > 0:
            self.heartbeats[session_id] = count
            return
        self.heartbeats.pop(session_id, None)
        self.left_at[session_id] = now or datetime.datetime.now()

    def page_open(self, session_id: str) -> bool:
        """Whether the session's page holds its heartbeat open (shown in a browser now)."""
        return self.heartbeats.get(session_id, 0) > 0

    def live(self, holder: StateHolder, session_id: str) -> bool:
        """Whether the session's page holds its heartbeat open or one of its events is in flight."""
        return self.heartbeats.get(session_id, 0) > 0 or in_flight(holder, session_id)

    def stale(self, holder: StateHolder, now: datetime.datetime) -> list[str]:
        """The sessions to drop now: unused for `idle_s`, or left (heartbeat closed; without the watch,
        Gradio's closed mark) `closed_grace_s` ago with no page back; never one with an event in flight."""
        stale = []
        for session_id, session in list(holder.session_data.items()):
            last_used = holder.time_last_used.get(session_id)
            if last_used is None or in_flight(holder, session_id):
                continue
            if (now - last_used).total_seconds() >= self.idle_s:
                stale.append(session_id)
                continue
            if self.heartbeats.get(session_id, 0) > 0:
                continue
            left_at = self.left_at.get(session_id)
            if left_at is None and not session.is_closed:
                continue
            quiet_since = max(last_used, left_at) if left_at is not None else last_used
            if (now - quiet_since).total_seconds() >= self.closed_grace_s:
                stale.append(session_id)
        return stale

    def evictable(self, holder: StateHolder, excess: int, keep: str) -> list[str]:
        """The `excess` sessions the capacity drops: none with a live page; stateless ones, then least recently
        used, first (fewer when the rest are live: the capacity yields to pages that are open)."""
        order = {session_id: place for place, session_id in enumerate(holder.session_data)}
        candidates = [
            session_id for session_id in holder.session_data if session_id != keep and not self.live(holder, session_id)
        ]
        holds = {s: bool(getattr(holder.session_data[s], "state_data", None)) for s in candidates}
        return sorted(candidates, key=lambda s: (holds[s], order[s]))[: max(0, excess)]

    def forget(self, session_id: str) -> None:
        """The session was dropped: remember its id (bounded), forget its page's comings and goings."""
        self.left_at.pop(session_id, None)
        self.dropped[session_id] = None
        self.dropped.move_to_end(session_id)
        while len(self.dropped) > DROPPED_KEPT:
            self.dropped.popitem(last=False)

    def tidy(self, holder: StateHolder, now: datetime.datetime) -> None:
        """Forget the leavings of pages that never made a session (a heartbeat alone), after the grace."""
        for session_id, when in list(self.left_at.items()):
            if session_id not in holder.session_data and (now - when).total_seconds() >= self.closed_grace_s:
                self.left_at.pop(session_id, None)


def in_flight(holder: StateHolder, session_id: str) -> bool:
    """Whether one of the session's queued events is waiting or running."""
    queue = getattr(getattr(holder, "blocks", None), "_queue", None)
    return bool(getattr(queue, "pending_event_ids_session", {}).get(session_id))


def rules_of(blocks: Any) -> SessionRules | None:
    """The session rules a Blocks was given (`bound_sessions`), None for Gradio's own behaviour."""
    rules = getattr(blocks, SESSION_BOUNDS, None)
    return rules if isinstance(rules, SessionRules) else None


def page_open(blocks: Any, session_id: str) -> bool:
    """Whether the page of `session_id` is open in a browser now (`SessionRules.page_open`); False for a Blocks
    without the app's rules (its heartbeats are not watched)."""
    rules = rules_of(blocks)
    return rules is not None and rules.page_open(session_id)


def stale_sessions(holder: StateHolder, closed_grace_s: float, idle_s: float, now: datetime.datetime) -> list[str]:
    """The sessions to drop, for a holder whose Blocks has no rules of its own yet (see `SessionRules.stale`)."""
    rules = rules_of(getattr(holder, "blocks", None)) or SessionRules(closed_grace_s, idle_s)
    return rules.stale(holder, now)


def drop_session(holder: StateHolder, session_id: str) -> None:
    """The whole session gone: its states through their delete callbacks (an export's file), then the
    session's copy of the page; its id remembered, so its page is told if it comes back."""
    holder.delete_state(session_id)
    with holder.lock:
        holder.session_data.pop(session_id, None)
        holder.time_last_used.pop(session_id, None)
    rules = rules_of(getattr(holder, "blocks", None))
    if rules is not None:
        rules.forget(session_id)


def session_lost(session: Any) -> bool:
    """Whether the session was made anew for a page whose own session the app had dropped: what its page
    shows is no longer on the server."""
    return bool(getattr(session, LOST_MARK, False))


def found_again(session: Any) -> None:
    """The page has been told, or has started anew: its session is its own again."""
    if session is not None and hasattr(session, LOST_MARK):
        setattr(session, LOST_MARK, False)


def _delete_all_expired_state(self: StateHolder) -> None:
    """Gradio's own cleanup (run every second by the server), then whole sessions for the app's Blocks."""
    _stock_delete_all_expired_state(self)
    rules = rules_of(getattr(self, "blocks", None))
    if rules is None:
        return
    now = datetime.datetime.now()
    for session_id in rules.stale(self, now):
        drop_session(self, session_id)
    rules.tidy(self, now)


def _getitem(self: StateHolder, session_id: str) -> Any:
    """Gradio's `state_holder[session_id]`, marking a session made anew for a dropped id as lost."""
    rules = rules_of(getattr(self, "blocks", None))
    fresh = rules is not None and session_id not in self.session_data
    session = _stock_getitem(self, session_id)
    if fresh and rules is not None and session_id in rules.dropped:
        setattr(session, LOST_MARK, True)
    return session


def _update(self: StateHolder, session_id: str) -> None:
    """Gradio's capacity, kept by the app's rules: a live page's session is never evicted by others, and an
    evicted session's files go with it."""
    rules = rules_of(getattr(self, "blocks", None))
    if rules is None:
        _stock_update(self, session_id)
        return
    with self.lock:
        if session_id in self.session_data:
            self.session_data.move_to_end(session_id)
        excess = len(self.session_data) - self.capacity
        victims = rules.evictable(self, excess, keep=session_id) if excess > 0 else []
    for victim in victims:
        drop_session(self, victim)


class HeartbeatWatch:
    """An ASGI middleware: each page's heartbeat opening and closing, told to its Blocks' `SessionRules`
    (Gradio marks a session closed when its heartbeat drops and never reopens it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        found = HEARTBEAT_PATH.search(scope.get("path", "")) if scope.get("type") == "http" else None
        server: Any = scope.get("app")
        blocks = server.get_blocks() if found is not None and hasattr(server, "get_blocks") else None
        rules = rules_of(blocks)
        if found is None or rules is None:
            await self.app(scope, receive, send)
            return
        session_id = found["session"]
        rules.arrived(getattr(server, "state_holder", None), session_id)
        try:
            await self.app(scope, receive, send)
        finally:
            rules.left(session_id)


def bound_sessions(demo: gr.Blocks, closed_grace_s: float, idle_s: float) -> None:
    """Keep `demo`'s sessions by `SessionRules` (the capacity is `launch`'s `state_session_capacity`; the
    heartbeats are watched by `HeartbeatWatch`, one of `launch`'s middleware). Other Blocks in the process
    keep Gradio's own behaviour."""
    setattr(demo, SESSION_BOUNDS, SessionRules(closed_grace_s, idle_s))
    # Gradio has no hooks for these: its cleanup, a session made anew, and the capacity's choice.
    for name, patched in (
        ("delete_all_expired_state", _delete_all_expired_state),
        ("__getitem__", _getitem),
        ("update", _update),
    ):
        setattr(StateHolder, name, patched)


__all__ = [
    "LOST_MARK",
    "SESSION_BOUNDS",
    "HeartbeatWatch",
    "SessionRules",
    "answer_full_queue",
    "around_preprocess",
    "around_preprocess_data",
    "bound_sessions",
    "drop_session",
    "found_again",
    "page_open",
    "rules_of",
    "session_lost",
    "stale_sessions",
]
