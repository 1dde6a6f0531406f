"""uvicorn's HTTP protocols, answering the requests they refuse with the API's JSON error.

uvicorn refuses a request it cannot parse (a bad ``Content-Length``, a NUL in a header, a
broken chunk) itself, before the app sees it, with a plain-text 400; a client of the API
expects ``{"error": {"code": ..., "message": ...}}`` from every answer. These subclasses
override ``send_400_response``, the one method both protocols write that answer with, to
write the JSON body instead (431 when the request head is too large, else 400).

They also bound the request head (its line and headers) at :data:`MAX_HEAD` bytes in both
protocols: h11 bounds only a head it is still waiting for, httptools none at all (a 10 MB
header reached the app). A refused connection is half-closed, its further bytes read and
dropped for :data:`LINGER` seconds, so a client still sending gets the answer rather than a
reset that discards it.

What this leans on in uvicorn beyond its public ``Config(http=...)``: ``send_400_response``
is called inside the ``except`` of the parser's error, the protocols' ``conn``, ``cycle``,
``url`` and ``headers`` attributes, and the parser callbacks; tests/server/test_http_edges.py
fails if any of them changes.
"""

from __future__ import annotations

import asyncio
import http
import json
import sys
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from .errors import body
from .headers import ALWAYS, API_POLICY

MAX_HEAD = 64 * 1024
"""Bytes the request line and headers may have together (an API request needs a few
hundred; nginx allows 32 KiB of headers, h11 16 KiB)."""
LINGER = 2.0
"""Seconds a refused connection still reads (and drops) what the client sends."""
_CODES = {400: "bad_request", 431: "headers_too_large"}
_REASON = 200
"""Characters of the parser's reason quoted in a 400's message."""


class _JsonRefusals(asyncio.Protocol):
    """What both protocols share: the JSON refusal and the lingering close after it."""

    transport: asyncio.Transport
    server_state: ServerState
    _refused = False
    _linger: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this while handling the parser's exception: that says why."""
        status, message = self.diagnose(sys.exc_info()[1])
        self.refuse(status, message)

    def diagnose(self, exc: BaseException | None) -> tuple[int, str]:
        reason = str(exc or "")[:_REASON]
        return 400, "the request is not valid HTTP/1.1" + (f": {reason}" if reason else "")

    def refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with the JSON error body and stop reading requests here."""
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        cycle: Any = getattr(self, "cycle", None)  # the request the app may be serving
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # its later writes are dropped, its reads see an end
            cycle.message_event.set()
            if cycle.response_started:  # half an answer is out: no second one after it
                self.transport.close()
                return
        payload = json.dumps(body(_CODES.get(status, "bad_request"), message)).encode()
        head = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n".encode()]
        for name, value in self.server_state.default_headers:
            head.append(name + b": " + value + b"\r\n")
        for field, text in (*ALWAYS.items(), ("Content-Security-Policy", API_POLICY)):
            head.append(f"{field.lower()}: {text}\r\n".encode())  # as the app's answers
        head.append(b"content-type: application/json\r\n")
        head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(payload))
        self.transport.write(b"".join(head) + payload)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()
        self.transport.resume_reading()  # flow control may have paused it mid-body
        self._linger = asyncio.get_running_loop().call_later(LINGER, self.transport.close)


class JsonH11Protocol(_JsonRefusals, H11Protocol):
    """uvicorn's h11 protocol, with a bound on the request head.

    h11 bounds a head it is still waiting for (``h11_max_incomplete_event_size``), not one
    that arrived whole in one read: :class:`_BoundedConnection` measures that one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _BoundedConnection(
            h11.SERVER, self.config.h11_max_incomplete_event_size or MAX_HEAD
        )

    def diagnose(self, exc: BaseException | None) -> tuple[int, str]:
        if isinstance(exc, h11.RemoteProtocolError) and exc.error_status_hint == 431:
            return 431, f"the request line and headers are over {MAX_HEAD:,} bytes"
        return super().diagnose(exc)


class _BoundedConnection(h11.Connection):
    """An h11 server connection that refuses a whole request head over its bound (431)."""

    def __init__(self, role: type[h11.SERVER], max_head: int) -> None:
        super().__init__(role, max_incomplete_event_size=max_head)
        self.max_head = max_head

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request):
            size = len(event.target) + sum(len(n) + len(v) + 4 for n, v in event.headers)
            if size > self.max_head:
                raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
        return event


class JsonHttpToolsProtocol(_JsonRefusals, HttpToolsProtocol):
    """uvicorn's httptools protocol, with a bound on the request head.

    httptools reports a header only once it is whole, so bytes are counted as they arrive
    while a head is being read (never more than the head has: the count restarts where a
    request ends, and stops where its headers do); a finished head is measured exactly."""

    _head: int | None = 0
    _head_over = False

    def data_received(self, data: bytes) -> None:
        if self._head is not None:
            self._head += len(data)
        super().data_received(data)
        if self._head is not None and self._head > MAX_HEAD:
            self._head_over = True
            self.refuse(*self.diagnose(None))

    def on_headers_complete(self) -> None:
        self._head = None
        size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers)
        if size > MAX_HEAD:
            self._head_over = True
            raise _HeadTooLarge  # the parser stops, and uvicorn calls send_400_response
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head = 0

    def diagnose(self, exc: BaseException | None) -> tuple[int, str]:
        if self._head_over:
            return 431, f"the request line and headers are over {MAX_HEAD:,} bytes"
        return super().diagnose(exc)


class _HeadTooLarge(Exception):
    pass


PROTOCOLS: dict[str, type[asyncio.Protocol]] = {
    "httptools": JsonHttpToolsProtocol,
    "h11": JsonH11Protocol,
}
DEFAULT = "httptools"
"""What uvicorn's ``auto`` picks when httptools is installed (a dependency of relaystate)."""


def uvicorn_options(http_name: str = DEFAULT) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments that make the protocol ``http_name`` answer in JSON."""
    return {"http": PROTOCOLS[http_name], "h11_max_incomplete_event_size": MAX_HEAD}
