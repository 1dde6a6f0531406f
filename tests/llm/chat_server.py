"""A local server speaking the OpenAI chat-completions wire protocol with scripted replies:
how the model client is tested here, where no hosted model can run."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer: a JSON body (dict) or raw bytes, with optional slowness."""

    body: dict[str, Any] | bytes
    status: int = 200
    delay: float = 0.0  # seconds before the status line
    trickle: float = 0.0  # seconds between body bytes, after the headers


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ChatServer:
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
    chat: ChatServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a slow answer closes the socket; that is the point


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        chat = self.server.chat
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        chat.received.append(
            Received(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw))
        )
        reply = chat.replies.popleft() if chat.replies else Reply({"error": "unscripted"}, 599)
        if reply.delay and chat.stop.wait(reply.delay):
            return
        data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        if not reply.trickle:
            self.wfile.write(data)
            return
        for byte in data:
            if chat.stop.wait(reply.trickle):
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()


@contextmanager
def running() -> Iterator[ChatServer]:
    """A chat server on a free port until the block ends."""
    httpd = _Server(("127.0.0.1", 0), _Handler)
    chat = ChatServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    httpd.chat = chat
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield chat
    finally:
        chat.stop.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def completion(
    content: str | None, *, refusal: str | None = None, finish: str = "stop"
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_800_000_000,
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
        ],
    }
