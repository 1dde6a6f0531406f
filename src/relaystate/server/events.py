"""A task's changes as server-sent events: ``GET /v1/tasks/{id}/events``.

The stream sends the task (with its actions) at once, then again whenever its version moves,
whichever process moved it: the store is polled (a cheap keyed read) rather than this
process notified, so a worker or another server's change shows up too. A comment line keeps
idle connections open through proxies.

A program sends its API key in the ``Authorization`` header, as everywhere. A browser's
EventSource cannot send headers, and a key in a URL lands in access logs and the browser's
history: it first asks ``POST /v1/tasks/{id}/events/token`` for a token good for one
minute, for this Task's stream only, and puts that in the URL (``?token=``). A key in the URL
is refused. The token is signed with the key's stored hash, so any API process of the fleet
can check it and a revoked key's tokens stop at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials

from ..model import ApiKey
from ..runtime.views import state_view, to_json
from . import schemas
from .errors import BY_ID, EVERY_CALL, ApiError
from .routes import Caller, Id, Who, admitted, authorise, bearer, server

router = APIRouter(prefix="/v1", responses=EVERY_CALL)
POLL = 0.5
"""Seconds between two looks at the task."""
KEEPALIVE = 15.0


TOKEN_SECONDS = 60
"""How long an events token may be used to open its stream."""


def _caller(
    request: Request,
    task_id: Id,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    token: Annotated[
        str | None,
        Query(max_length=400, description="An events token (EventSource), from POST .../token"),
    ] = None,
    key: Annotated[str | None, Query(include_in_schema=False)] = None,
) -> Caller:
    if key is not None:
        raise ApiError(
            400,
            "key_in_url",
            "an API key never goes in a URL (it would land in logs): send it in the "
            "Authorization header, or put an events token from POST "
            "/v1/tasks/{id}/events/token in ?token=",
        )
    if credentials is not None or token is None:
        return authorise(request, credentials.credentials if credentials else None)
    found = checked_token(request, token, task_id)
    if found is None:
        raise ApiError(
            401,
            "unauthorized",
            "the events token is unknown, expired, or for another Task: ask for a new one",
            {"WWW-Authenticate": "Bearer"},
        )
    return found


@router.post("/tasks/{task_id}/events/token", response_model=schemas.EventsToken, responses=BY_ID)
def events_token(request: Request, who: Who, task_id: Id) -> schemas.EventsToken:
    """A token that opens this Task's event stream for the next minute (for EventSource,
    which cannot send the Authorization header)."""
    rt = server(request).runtime
    rt.task(who.reads, task_id)  # 404 for a Task the key cannot see
    until = int(time.time()) + TOKEN_SECONDS
    return schemas.EventsToken(
        token=_token(who.key, task_id, until),
        expires_at=datetime.fromtimestamp(until, UTC).isoformat(),
    )


def _token(key: ApiKey, task_id: str, until: int) -> str:
    scope = base64.urlsafe_b64encode(task_id.encode()).decode().rstrip("=")
    return f"evt.{key.id}.{scope}.{until}.{_signature(key, task_id, until)}"


def _signature(key: ApiKey, task_id: str, until: int) -> str:
    message = f"events\0{key.id}\0{task_id}\0{until}".encode()
    digest = hmac.new(key.key_hash.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def checked_token(request: Request, token: str, task_id: str) -> Caller | None:
    """The caller an events token speaks for, if it is for this Task, unexpired and signed
    by an active key; else None."""
    parts = token.split(".")
    if len(parts) != 5 or parts[0] != "evt" or not parts[3].isdigit():
        return None
    _, key_id, scope, until, signature = parts
    try:
        named = base64.urlsafe_b64decode(scope + "=" * (-len(scope) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if named != task_id or int(until) < time.time() or not key_id.isalnum():
        return None
    key = server(request).runtime.api_key(key_id)
    if key is None or not key.active:
        return None
    if not hmac.compare_digest(signature, _signature(key, task_id, int(until))):
        return None
    return admitted(request, key)


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
