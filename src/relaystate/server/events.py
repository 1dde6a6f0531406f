"""A task's changes as server-sent events: ``GET /v1/tasks/{id}/events``.

The stream sends the task (with its actions) at once, then again whenever its version moves,
whichever process moved it: the store is polled (a cheap keyed read) rather than this
process notified, so a worker or another server's change shows up too. A comment line keeps
idle connections open through proxies. EventSource cannot send headers, so this endpoint
also takes the API key as ``?key=``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials

from ..runtime.views import state_view, to_json
from .errors import BY_ID, EVERY_CALL
from .routes import Caller, Id, authorise, bearer, server

router = APIRouter(prefix="/v1", responses=EVERY_CALL)
POLL = 0.5
"""Seconds between two looks at the task."""
KEEPALIVE = 15.0


def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    key: Annotated[
        str | None, Query(max_length=200, description="The API key (EventSource)")
    ] = None,
) -> Caller:
    return authorise(request, credentials.credentials if credentials else key)


@router.get(
    "/tasks/{task_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **BY_ID},
)
def task_events(
    request: Request, task_id: Id, who: Annotated[Caller, Depends(_caller)]
) -> StreamingResponse:
    """The task now, then on every change, as ``event: task`` with its JSON."""
    runtime = server(request).runtime
    first = runtime.task(who.reads, task_id)  # 404 before the stream starts

    async def stream() -> AsyncIterator[str]:
        version = first.task.version
        yield _event(state_view(first))
        quiet = time.monotonic()
        while not await request.is_disconnected():
            await anyio.sleep(POLL)
            state = await anyio.to_thread.run_sync(runtime.task, who.reads, task_id)
            if state.task.version != version:
                version = state.task.version
                quiet = time.monotonic()
                yield _event(state_view(state))
            elif time.monotonic() - quiet > KEEPALIVE:
                quiet = time.monotonic()
                yield ": keepalive\n\n"

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _event(data: object) -> str:
    return f"event: task\ndata: {to_json(data)}\n\n"
