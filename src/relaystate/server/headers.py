"""Security headers on every response of the app: no MIME sniffing, no referrer, no framing,
and a Content-Security-Policy.

An HTML page gets ``PAGE_POLICY`` (scripts, styles, images and requests from this server
only; nothing inline, nothing from another host); anything else (JSON, metrics, event
streams, static assets) gets ``API_POLICY``, which lets a response load nothing at all, so a
JSON body opened as a page cannot run anything. A header a route set itself (the docs pages'
own policies) is kept.

``install`` puts the middleware outside the whole stack, Starlette's ``ServerErrorMiddleware``
included: a 500, a 413 of the body limit and a 429 carry the headers as a 200 does.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The dashboard's (and any HTML page's) policy. ``img-src 'self'``: the browser's favicon."""
API_POLICY = "default-src 'none'; frame-ancestors 'none'"
"""Everything that is not a page: it may load nothing and be framed nowhere."""
ALWAYS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # frame-ancestors, for browsers that predate it
}


def defaults(headers: MutableHeaders) -> None:
    """Add the security headers ``headers`` lacks; keep those it has."""
    for name, value in ALWAYS.items():
        headers.setdefault(name, value)
    page = headers.get("content-type", "").lower().startswith("text/html")
    headers.setdefault("Content-Security-Policy", PAGE_POLICY if page else API_POLICY)


class SecurityHeaders:
    """ASGI middleware: ``defaults`` on the start of every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                defaults(MutableHeaders(scope=message))
            await send(message)

        await self.app(scope, receive, with_headers)


def install(app: FastAPI) -> None:
    """Wrap ``app``'s whole middleware stack in ``SecurityHeaders`` (``add_middleware`` would
    sit inside the error middleware, and a 500 would go without); call before it serves."""
    build = app.build_middleware_stack

    def outermost() -> ASGIApp:
        return SecurityHeaders(build())

    app.build_middleware_stack = outermost  # type: ignore[method-assign]
