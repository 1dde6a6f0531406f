"""A local HTTP server answering JSON POSTs with scripted replies: how the clients of hosted
services (a chat model, an embeddings server) are tested here, against their wire protocol,
where no hosted service can run."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a JSON body (dict) or raw bytes (None: the server's default answer
    to the request), its status and headers, and optional slowness."""

    body: dict[str, Any] | bytes | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line
    trickle: float = 0.0  # seconds between body bytes, after the headers


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Default = Callable[[dict[str, Any]], Reply]
"""The answer to a request the script has no reply for (or a reply without a body)."""


@dataclass
class StubServer:
    default: Default
    url: str = ""
    replies: deque[Reply] = field(default_factory=deque)
    received: list[Received] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def last(self) -> Received:
        return self.received[-1]


class _Server(ThreadingHTTPServer):
    stub: StubServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a slow answer closes the socket; that is the point


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        stub = self.server.stub
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        headers = {k.lower(): v for k, v in self.headers.items()}
        stub.received.append(Received(self.path, headers, body))
        reply = stub.replies.popleft() if stub.replies else stub.default(body)
        if reply.delay and stub.stop.wait(reply.delay):
            return
        content = reply.body if reply.body is not None else stub.default(body).body
        data = content if isinstance(content, bytes) else json.dumps(content).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not reply.trickle:
            self.wfile.write(data)
            return
        for byte in data:
            if stub.stop.wait(reply.trickle):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()


@contextmanager
def running(default: Default, *, path: str = "/v1") -> Iterator[StubServer]:
    """A stub server on a free port until the block ends; ``url`` ends in ``path``."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    stub = StubServer(default, url=f"http://127.0.0.1:{httpd.server_address[1]}{path}")
    httpd.stub = stub
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
