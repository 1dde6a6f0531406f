"""The HTTP app: the ``/v1`` API, health and metrics, and the dashboard, over one runtime.

``create_app(runtime)`` builds it; ``relaystate serve`` runs it with uvicorn. Handlers are
plain functions run in a thread pool (the runtime is synchronous), so a slow turn never
blocks another request. A recovery pass runs once at start-up, in the background: tasks
interrupted by the previous server process are reconciled and continued.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..conversation import Conversation
from ..errors import RelaystateError
from ..memory.embed import Embedder
from ..memory.extract import FactExtractor
from ..memory.recorder import MemoryLayers, Recorder
from ..memory.rerank import Reranker
from ..memory.rewrite import QueryRewriter
from ..runtime.runtime import Runtime
from ..scope import Scope
from . import apidocs, encoding, errors, events, fleet, headers, memory, openapi, routes
from .limits import BodyLimit, RateLimiter, Receive, Send
from .limits import Scope as AsgiScope
from .metrics import Metrics
from .query import known_query
from .state import ServerState

log = logging.getLogger("relaystate.server")
DASHBOARD = Path(__file__).with_name("dashboard")
MAX_BODY = 256 * 1024
"""Bytes a request body may have: a turn's text is at most ``Runtime.max_text`` characters."""


def create_app(
    runtime: Runtime,
    *,
    rate: float = 20.0,
    burst: float = 40.0,
    recover_on_start: bool = True,
    max_body: int = MAX_BODY,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    rewriter: QueryRewriter | None = None,
    extractor: FactExtractor | None = None,
) -> FastAPI:
    """The app over ``runtime`` (the caller keeps it open and closes it). The models of
    long-term memory, each optional:

    - ``embedder`` makes its vectors (none: keyword search only);
    - ``reranker`` orders the top hits of memory search again (``GET
      /v1/memory/{ns}/search``, and a task's context), fused with the rule order (their
      ``ranks`` gain ``rerank``); one that fails leaves the rule order;
    - ``rewriter`` splits a search's question into the searches that answer it (``ranks``
      gain ``rewrite``); one that fails searches the question alone;
    - ``extractor`` extracts the facts of the items ``POST /v1/memory/{ns}/items`` adds
      into the memory graph, in the background job that embeds them, and keeps them for
      search (``ranks`` gain ``fact``); one that fails costs the facts, never the items.
      Turns are not extracted.
    """
    layers = MemoryLayers.of(runtime, embedder=embedder)
    if layers.longterm is not None:
        layers.longterm.reranker, layers.longterm.rewriter = reranker, rewriter
    state = ServerState(
        runtime=runtime,
        conversation=Conversation(runtime, memory=Recorder(layers, clock=runtime.clock)),
        limiter=RateLimiter(rate=rate, burst=burst),
        metrics=Metrics(),
        layers=layers,
        extractor=extractor,
    )

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if recover_on_start:
            threading.Thread(target=_recover, args=(state,), daemon=True).start()
        yield
        state.close()

    app = FastAPI(
        docs_url=None,  # apidocs serves them, from assets of its own
        redoc_url=None,
        title="relaystate",
        version="1",
        summary="Durable Sessions, Tasks and Actions: resume any multi-step task where it stopped.",
        lifespan=lifespan,
        dependencies=[Depends(known_query)],
    )
    app.state.relaystate = state
    app.state.store_url = runtime.stores.url
    errors.install(app)
    openapi.install(app)
    apidocs.install(app)
    app.include_router(routes.router)
    app.include_router(events.router)
    app.include_router(memory.router)
    app.include_router(memory.tasks)
    app.include_router(fleet.router)
    _health(app, state)
    _dashboard(app)
    app.add_middleware(_Counted, metrics=state.metrics)
    app.add_middleware(BodyLimit, max_body=max_body)
    app.add_middleware(encoding.Utf8Only)  # before any route reads the path
    headers.install(app)  # outermost: every response, a 500 too
    return app


def _recover(state: ServerState) -> None:
    """Reconcile and continue what the previous process left running; then queue the
    vectors its last turns did not get."""
    try:
        report = state.runtime.recover(Scope.admin("server"))
    except RelaystateError as exc:
        log.warning("recovery at start-up failed: %s", exc)
        return
    for status in report.outcomes.values():
        state.metrics.recovered.labels(status).inc()
    try:
        state.catch_up()
    except RelaystateError as exc:
        log.warning("catching up memory vectors at start-up failed: %s", exc)


def _health(app: FastAPI, state: ServerState) -> None:
    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"description": "the store is away"}})
    def readyz() -> JSONResponse:
        """The process answers and its store does (503 while it does not)."""
        try:
            state.runtime.api_key("readyz")
        except RelaystateError as exc:
            return errors.response(503, "unavailable", str(exc), **{"Retry-After": "5"})
        return JSONResponse({"status": "ready"})

    @app.get("/metrics", tags=["health"], response_class=Response)
    def metrics() -> Response:
        """Prometheus metrics of this server process."""
        return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def _dashboard(app: FastAPI) -> None:
    if (DASHBOARD / "index.html").exists():
        app.mount("/ui", StaticFiles(directory=DASHBOARD), name="ui")

    @app.get("/", include_in_schema=False, response_model=None)
    def index() -> FileResponse | HTMLResponse:
        page = DASHBOARD / "index.html"
        if page.exists():
            return FileResponse(page, media_type="text/html")
        return HTMLResponse("<!doctype html><title>relaystate</title><p>The API is at /docs.")


class _Counted:
    """ASGI middleware: every request counted by its route template, method and status,
    and timed (the route template, not the path: ids would explode the label space)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sent(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(template, scope.get("method", ""), str(status)).inc()
            self.metrics.latency.labels(template).observe(time.perf_counter() - started)
