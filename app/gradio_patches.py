"""Where the app reaches into Gradio's internals, gathered in one place (each checked by
`tests/test_gradio_patches.py`, which fails loudly when an upgrade moves what it relies on).

- `answer_full_queue`: a full queue answers the app's own "busy" sentence (Gradio has no hook for it).
- `around_preprocess_data`: the app's look at an event's raw inputs before Gradio's own checks refuse them
  with a bare "Error" (`boundary.refusals_as_sentences`).
- `around_preprocess`: a component's look at a payload before Gradio decodes it (a picture's size read
  from its header, `sketch.checked`; an odd value handed on for the handler to name, `page.lenient`).
- `bound_sessions`: Gradio keeps every session it has seen (a copy of the page's configuration and the
  last value of every component the session updated, about 0.2–0.6 MB here) until 10,000 sessions
  exist, and drops a closed session's `gr.State` only after an hour. The app drops a whole session
  once its visitor has left (`closed_grace_s` after the last use) or it has been idle for
  `idle_s`; `launch(state_session_capacity=...)` keeps at most that many (the least recently used go
  first).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr
from gradio.state_holder import StateHolder

# The attribute on a Blocks that opts it into whole-session cleanup: (closed grace, idle limit) in seconds.
SESSION_BOUNDS = "_sage_session_bounds"
_stock_delete_all_expired_state = StateHolder.delete_all_expired_state


def answer_full_queue(demo: gr.Blocks, answer: Callable[[int, int | None], str]) -> None:
    """A request refused by the full queue gets `answer(waiting, limit)` instead of Gradio's line."""
    queue = demo._queue
    stock: Callable[..., Awaitable[tuple[bool, Any, str]]] = queue.push

    async def push(*args: Any, **kwargs: Any) -> Any:
        accepted, message, state = await stock(*args, **kwargs)
        if state == "queue_full":
            message = answer(len(queue), queue.max_size)
        return accepted, message, state

    queue.push = push  # type: ignore[method-assign]  # Gradio's queue has no hook for a full queue's answer


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

    demo.preprocess_data = preprocess_data  # type: ignore[method-assign]  # Gradio has no hook for bad input


def stale_sessions(holder: StateHolder, closed_grace_s: float, idle_s: float, now: datetime.datetime) -> list[str]:
    """The sessions to drop: closed (their visitor left) and unused for `closed_grace_s`, or unused for
    `idle_s` whether closed or not."""
    stale = []
    for session_id, session in list(holder.session_data.items()):
        last_used = holder.time_last_used.get(session_id)
        if last_used is None:
            continue
        unused = (now - last_used).total_seconds()
        if unused >= idle_s or (session.is_closed and unused >= closed_grace_s):
            stale.append(session_id)
    return stale


def drop_session(holder: StateHolder, session_id: str) -> None:
    """The whole session gone: its states through their delete callbacks (an export's file), then the
    session's copy of the page."""
    holder.delete_state(session_id)
    with holder.lock:
        holder.session_data.pop(session_id, None)
        holder.time_last_used.pop(session_id, None)


def _delete_all_expired_state(self: StateHolder) -> None:
    """Gradio's own cleanup (run every second by the server), then whole sessions for the app's Blocks."""
    _stock_delete_all_expired_state(self)
    bounds = getattr(getattr(self, "blocks", None), SESSION_BOUNDS, None)
    if bounds is None:
        return
    closed_grace_s, idle_s = bounds
    for session_id in stale_sessions(self, closed_grace_s, idle_s, datetime.datetime.now()):
        drop_session(self, session_id)


def bound_sessions(demo: gr.Blocks, closed_grace_s: float, idle_s: float) -> None:
    """Drop `demo`'s sessions whole (see the module's note; the capacity is `launch`'s
    `state_session_capacity`). Other Blocks in the process keep Gradio's own behaviour."""
    setattr(demo, SESSION_BOUNDS, (closed_grace_s, idle_s))
    StateHolder.delete_all_expired_state = _delete_all_expired_state  # type: ignore[method-assign]  # no hook


__all__ = [
    "SESSION_BOUNDS",
    "answer_full_queue",
    "around_preprocess",
    "around_preprocess_data",
    "bound_sessions",
    "drop_session",
    "stale_sessions",
]
