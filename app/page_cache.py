"""The page, served from memory: a crowd of arrivals costs one rendering of it, not one each.

Gradio builds the page (`/`) and its config (`/config`) anew for every request: a deep copy of the
whole config, its file URLs rewritten, the API's code snippets, in a worker thread. Sixty arrivals at
once were sixty of those threads holding the interpreter while a race waited for it. This middleware
keeps the answer for each address it was asked under (the path, the query and the headers that
decide the page's root URL: a proxy's `X-Forwarded-*`), at most `SIZE` of them; while the first
request for an address is answered, the others for it wait for that answer instead of building
their own. Only complete 200 answers that set no cookie are kept. The app has no login, so the page
is the same for every visitor (with a login, Gradio's page names the user: do not use this then).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

Message = dict[str, Any]
#: The pages kept: the app's page and its config (what every arrival fetches).
PATHS = frozenset({"/", "/config", "/gradio_api/info"})
#: Request headers that change the page (its root URL); the cache key holds them.
ADDRESS_HEADERS = frozenset(
    {
        b"host",
        b"x-forwarded-host",
        b"x-forwarded-proto",
        b"x-forwarded-port",
        b"x-forwarded-prefix",
        b"x-forwarded-path",
    }
)
#: At most this many addresses are kept (the least recently asked for goes first).
SIZE = 16


class PageCache:
    """An ASGI middleware: GET of `PATHS` answered from memory after the first time."""

    def __init__(self, app: Any, size: int = SIZE) -> None:
        self.app, self.size = app, size
        self.pages: OrderedDict[tuple, list[Message]] = OrderedDict()
        self.building: dict[tuple, asyncio.Lock] = {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] not in PATHS:
            await self.app(scope, receive, send)
            return
        key = address(scope)
        page = self.pages.get(key)
        if page is None:
            lock = self.building.setdefault(key, asyncio.Lock())
            async with lock:
                page = self.pages.get(key) or await self.build(key, scope, receive)
            self.building.pop(key, None)
        else:
            self.pages.move_to_end(key)
        for message in page:
            await send(message)

    async def build(self, key: tuple, scope: dict, receive: Any) -> list[Message]:
        """Gradio's answer, kept when it is a plain page."""
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, keep)
        if cacheable(messages):
            self.pages[key] = messages
            while len(self.pages) > self.size:
                self.pages.popitem(last=False)
        return messages


def address(scope: dict) -> tuple:
    headers = tuple(sorted((k, v) for k, v in scope.get("headers", []) if k.lower() in ADDRESS_HEADERS))
    return scope["path"], scope.get("root_path", ""), scope.get("query_string", b""), headers


def cacheable(messages: list[Message]) -> bool:
    start = next((m for m in messages if m["type"] == "http.response.start"), None)
    if start is None or start["status"] != 200:
        return False
    if any(name.lower() == b"set-cookie" for name, _ in start.get("headers", [])):
        return False
    bodies = [m for m in messages if m["type"] == "http.response.body"]
    return bool(bodies) and not bodies[-1].get("more_body", False)
