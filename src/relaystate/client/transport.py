"""What both clients share about one request: its URL, headers and answer, and when a
request that may not have landed is sent again (a timeout, a dropped connection, a 503:
only a call marked safe to send again, with backoff)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..errors import RelaystateError
from .calls import Call, T
from .errors import from_answer

AGAIN = (httpx.TimeoutException, httpx.TransportError)
"""Failures after which a request's outcome is unknown."""


def request(base: str, key: str, call: Call[Any]) -> dict[str, Any]:
    """The keyword arguments of ``httpx``'s ``request`` for ``call``."""
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json", **call.headers}
    made: dict[str, Any] = {
        "method": call.method,
        "url": base.rstrip("/") + call.path,
        "params": dict(call.params),
        "headers": headers,
    }
    if call.body is not None:
        made["json"] = call.body
    return made


def answer(response: httpx.Response, call: Call[T]) -> T:
    """The answer read into the call's type, or the error it stands for."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        raise from_answer(response.status_code, body, response.headers)
    if body is None:
        raise RelaystateError(f"{call.method} {call.path}: the answer is not JSON")
    return call.read(body)


def should_retry(
    call: Call[Any], response: httpx.Response | None, attempt: int, tries: int
) -> bool:
    """Whether to send ``call`` again: it is safe to, attempts are left, and it timed out,
    lost its connection (``response`` None) or was answered 503."""
    if not call.again or attempt + 1 >= tries:
        return False
    return response is None or response.status_code == 503


def wait(attempt: int, response: httpx.Response | None, backoff: float) -> float:
    """Seconds before the next attempt: what the server asked (Retry-After), else backoff
    doubling, at most 30."""
    asked = response.headers.get("retry-after") if response is not None else None
    seconds = float(asked) if asked and asked.isdigit() else backoff * 2**attempt
    return min(seconds, 30.0)


class Events:
    """Server-sent events read line by line: ``feed`` a line, get an event (its name and
    parsed JSON data) when one ends."""

    def __init__(self) -> None:
        self.name = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> tuple[str, Any] | None:
        if line.startswith(":"):
            return None  # a comment: the server keeps the connection open
        if line:
            if line.startswith("event:"):
                self.name = line[6:].strip()
            elif line.startswith("data:"):
                self.data.append(line[5:].lstrip())
            return None
        done = (self.name, json.loads("\n".join(self.data))) if self.data else None
        self.name, self.data = "message", []
        return done
