"""Per-key request rate limits and the size of request bodies.

The rate limit is a token bucket per API key, in the server process: ``rate`` requests a
second on average, bursts up to ``burst``. Over it, a request gets 429 with ``Retry-After``.
Bodies over ``max_body`` bytes get 413 before they are read into memory: by their
``Content-Length``, or, for a streamed (chunked) body, as soon as the bytes that came in
pass the limit (the rest is never held).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from starlette.exceptions import HTTPException

from . import errors

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class RateLimiter:
    """Token buckets by key id; thread-safe (handlers run in a thread pool)."""

    rate: float = 20.0
    burst: float = 40.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, key_id: str) -> float:
        """0 if the request may go on, else the seconds until the next one may."""
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(key_id, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[key_id] = (tokens - 1, now)
                return 0.0
            self._buckets[key_id] = (tokens, now)
            return (1 - tokens) / self.rate


def retry_after(seconds: float) -> str:
    return str(max(1, math.ceil(seconds)))


class BodyLimit:
    """ASGI middleware: a body larger than ``max_body`` bytes is refused with 413, by its
    Content-Length when given, else while it streams in.

    A streamed body over the limit raises :class:`_TooLarge` (an HTTPException) from the
    app's ``receive``: FastAPI lets an HTTPException from reading the body through (any other
    error there becomes its 400 "error parsing the body"), and the app's handler answers it
    in the JSON error body; if nothing did, this middleware answers it itself."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await _too_large(send, self.max_body)
            return
        seen = 0
        started = False

        async def limited() -> MutableMapping[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _TooLarge(self.max_body)
            return message

        async def sending(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, sending)
        except _TooLarge:
            if started:  # the app answered before it read the body out: that answer stands
                raise
            await _too_large(send, self.max_body)


class _TooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(413, _message(limit))


def _message(limit: int) -> str:
    return f"the request body is over {limit:,} bytes"


async def _too_large(send: Send, limit: int) -> None:
    await errors.send(send, 413, "too_large", _message(limit))
