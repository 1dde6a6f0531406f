"""Paths and query strings must be UTF-8 once percent-decoded; else 400, not a guess.

Starlette decodes ``%FF`` (no UTF-8) to U+FFFD, so ``/v1/sessions/zz%FF`` and
``/v1/sessions/zz%FE`` would reach one Session, ``zz\\ufffd``: two ids the client told apart
would be one here. This middleware refuses such a request before any route reads it, from
the bytes the client sent (``raw_path``, ``query_string``), not from their decoded text.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from . import errors
from .limits import ASGIApp, Receive, Scope, Send


class Utf8Only:
    """ASGI middleware: 400 (the JSON error body) for a path or query that is no UTF-8."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = not_utf8(scope)
            if problem is not None:
                await _refuse(send, problem)
                return
        await self.app(scope, receive, send)


def not_utf8(scope: Scope) -> str | None:
    """What of the request's target is not UTF-8 when percent-decoded, if anything."""
    raw_path = scope.get("raw_path")
    if isinstance(raw_path, bytes) and not _utf8(raw_path):
        return "the path"
    query = scope.get("query_string") or b""
    if isinstance(query, bytes) and not _utf8(query):
        return "the query string"
    return None


def _utf8(raw: bytes) -> bool:
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


async def _refuse(send: Send, what: str) -> None:
    message = f"{what} is not valid UTF-8 once percent-decoded (%XX must spell UTF-8 bytes)"
    await errors.send(send, 400, "bad_request", message)
