"""The ``/v1`` endpoints. Each one reads its caller from the API key (never a default scope)
and calls the runtime or the conversation, exactly as the CLI does; nothing here touches a
store's tables or the writer."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from ..errors import NotFound
from ..inputs import DEFAULT_MAX_TEXT, ID_PATTERN, MAX_COUNT, MAX_ID, REQUEST_KEY, TEXT_PATTERN
from ..memory.recorder import CONVERSATION
from ..model import OPEN_TASK_STATUSES, ApiKey, TaskState, TaskStatus
from ..runtime.narrate import task_type
from ..runtime.views import action_view, history_view, state_view, task_view
from ..scope import Scope
from ..task.labels import ACTION_STATUSES, LANGUAGES, TASK_STATUSES
from . import api_keys as keys
from . import schemas
from .bodies import JsonData, PlainText
from .errors import BY_ID, EVERY_CALL, OPERATORS, REPLAYS, WRITES, ApiError
from .limits import retry_after
from .state import ServerState

bearer = HTTPBearer(auto_error=False, description="An API key: `relaystate users create NAME`")
router = APIRouter(prefix="/v1", responses=EVERY_CALL)

Language = Literal["en", "zh"]
TaskFilter = Literal[
    "open", "all", "waiting_user", "running", "done", "failed", "cancelled", "needs_attention"
]


# -- who is calling --------------------------------------------------------------------------
@dataclass(frozen=True)
class Caller:
    """The key's user: ``acts`` as that user; ``reads`` every user's data with an admin key."""

    key: ApiKey

    @property
    def acts(self) -> Scope:
        return Scope.user(self.key.user_id)

    @property
    def reads(self) -> Scope:
        return Scope.admin(self.key.user_id) if self.key.admin else self.acts


def server(request: Request) -> ServerState:
    state: ServerState = request.app.state.relaystate
    return state


def authorise(request: Request, presented: str | None) -> Caller:
    state = server(request)
    if not presented:
        raise ApiError(
            401,
            "unauthorized",
            "an API key is needed: Authorization: Bearer <key>",
            {"WWW-Authenticate": "Bearer"},
        )
    key = keys.verify(state.runtime, presented)
    if key is None:
        raise ApiError(
            401, "unauthorized", "the API key is unknown or revoked", {"WWW-Authenticate": "Bearer"}
        )
    return admitted(request, key)


def admitted(request: Request, key: ApiKey) -> Caller:
    """The caller of a verified key, within its rate (429 with Retry-After beyond it)."""
    wait = server(request).limiter.take(key.id)
    if wait:
        raise ApiError(
            429,
            "rate_limited",
            "too many requests for this key; slow down",
            {"Retry-After": retry_after(wait)},
        )
    return Caller(key)


def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Caller:
    return authorise(request, credentials.credentials if credentials else None)


Who = Annotated[Caller, Depends(caller)]


# -- bodies and answers ----------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewSession(_Body):
    language: Language | None = None


class Say(_Body):
    text: StrictStr = Field(
        min_length=1,
        max_length=DEFAULT_MAX_TEXT,
        pattern=TEXT_PATTERN,
        description="What the user says",
    )
    language: Language | None = None
    task_id: StrictStr | None = Field(
        None,
        min_length=1,
        max_length=MAX_ID,
        pattern=ID_PATTERN,
        description="Send the turn to this Task",
    )


class Confirmation(_Body):
    yes: StrictBool
    version: int | None = Field(
        None, ge=1, le=MAX_COUNT, description="The task version the user was shown"
    )


class SlotValues(_Body):
    slots: dict[PlainText, JsonData] = Field(
        description=(
            "Slot name -> value (validated as the template declares; latest wins). A name the "
            "template does not have, or a value its slot refuses, is answered 422 with the reason"
        )
    )


class Resolution(_Body):
    outcome: Literal["success", "failed"]
    output: Any = None


class Unpinning(_Body):
    reason: Annotated[
        StrictStr,
        Field(
            min_length=1,
            max_length=DEFAULT_MAX_TEXT,
            pattern=TEXT_PATTERN,
            description="Why (kept in the Task's journal)",
        ),
    ]


class SessionOut(BaseModel):
    session: schemas.Session


class TurnOut(BaseModel):
    turn: schemas.Turn


class TasksOut(BaseModel):
    tasks: list[schemas.Task] = Field(description="The Tasks, most recently changed first")


class TaskOut(BaseModel):
    task: schemas.TaskWithActions


class ActionsOut(BaseModel):
    actions: list[schemas.Action] = Field(description="The Task's Actions, in seq order")


Limit = Annotated[int, Query(ge=1, le=1000)]
Id = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_ID,
        pattern=ID_PATTERN,
        description="An id: printable characters, no space at either end",
    ),
]


# -- endpoints ----------------------------------------------------------------------------------
def _task(state: TaskState) -> schemas.TaskWithActions:
    return schemas.TaskWithActions.model_validate(state_view(state))


@router.get("/me", response_model=schemas.Me)
def me(who: Who) -> schemas.Me:
    return schemas.Me(user_id=who.key.user_id, admin=who.key.admin, key_id=who.key.id)


@router.get("/agents", response_model=schemas.Agents)
def agents(request: Request, who: Who) -> schemas.Agents:
    """The task types this server runs, and what to call them and their slots, per language
    (for a greeting that says what the agents can do, and labels instead of identifiers)."""
    found = [
        schemas.Agent(
            type=t.type,
            version=t.version,
            titles={lang: t.title(lang) for lang in LANGUAGES},
            slots={s.name: {lang: s.label(lang) for lang in LANGUAGES} for s in t.slots},
            stages={s.name: {lang: s.label(lang) for lang in LANGUAGES} for s in t.stages},
        )
        for t in server(request).runtime.templates.values()
    ]
    return schemas.Agents(agents=found, statuses=TASK_STATUSES, action_statuses=ACTION_STATUSES)


@router.post("/sessions", status_code=201, response_model=SessionOut, responses=WRITES)
def new_session(request: Request, who: Who, body: NewSession | None = None) -> SessionOut:
    session = server(request).runtime.open_session(
        who.acts, language=body.language if body else None
    )
    return SessionOut(session=schemas.Session.model_validate(session.to_dict()))


@router.get("/sessions/{session_id}", response_model=SessionOut, responses=BY_ID)
def get_session(request: Request, who: Who, session_id: Id) -> SessionOut:
    found = server(request).runtime.session(who.reads, session_id)
    return SessionOut(session=schemas.Session.model_validate(found.to_dict()))


@router.get("/sessions/{session_id}/messages", response_model=schemas.Messages, responses=BY_ID)
def get_messages(
    request: Request,
    who: Who,
    session_id: Id,
    limit: Limit = 50,
    before: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> schemas.Messages:
    rt = server(request).runtime
    rt.session(who.reads, session_id)  # 404 for an unknown or another user's session
    found = rt.messages(who.reads, session_id, limit=limit, before=before)
    first = found[0].id if found else None
    return schemas.Messages(
        messages=[schemas.Message.model_validate(m.to_dict()) for m in found],
        next_before=first if first is not None and first > 1 and len(found) == limit else None,
    )


RequestKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=f"^{REQUEST_KEY.pattern}$",
        description="Your key for this request (a UUID): a retry with the same key and body is"
        " answered from the turn the first one committed (response header"
        " `Idempotent-Replayed: true`), never done twice. The same key with another text or"
        " session is refused (409 `idempotency_key_reused`).",
    ),
]


@router.post("/sessions/{session_id}/messages", response_model=TurnOut, responses=BY_ID | WRITES)
async def say(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    session_id: Id,
    body: Say,
    idempotency_key: RequestKey = None,
) -> Response:
    """Say something in a Session: the Turn that answers it. The hot path hops to a worker
    thread once, for the key check and the turn together (a synchronous dependency would
    hop once more: a turn's cost is the turn, not the hops)."""
    presented = credentials.credentials if credentials else None

    def turn() -> Response:
        who = authorise(request, presented)
        return _say(request, who, session_id, body, idempotency_key)

    return await run_in_threadpool(turn)


def _say(
    request: Request, who: Caller, session_id: str, body: Say, idempotency_key: str | None
) -> Response:
    state = server(request)
    started = time.perf_counter()
    turn = state.conversation.handle(
        who.acts,
        body.text,
        session_id,
        language=body.language,
        task_id=body.task_id,
        request_key=idempotency_key,
    )
    if turn.replayed:
        return _turn_answer(turn.to_dict(), {"Idempotent-Replayed": "true"})
    if not state.vectors_inline:  # else the turn's commit carried its vectors already
        state.embed_later(who.acts, CONVERSATION, layers=False)
    state.metrics.turns.inc()
    state.metrics.turn_latency.observe(time.perf_counter() - started)
    for action in turn.actions:
        state.metrics.actions.labels(str(action.status)).inc()
    return _turn_answer(turn.to_dict())


def _turn_answer(turn: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    """A Turn as ``TurnOut`` describes it: validated once and serialised once by pydantic
    (a returned model would be validated again by FastAPI, then serialised twice over)."""
    body = TurnOut(turn=schemas.Turn.model_validate(turn)).model_dump_json()
    return Response(body, media_type="application/json", headers=headers)


@router.get("/tasks", response_model=TasksOut)
def list_tasks(
    request: Request, who: Who, status: TaskFilter = "open", limit: Limit = 100
) -> TasksOut:
    statuses = (
        list(OPEN_TASK_STATUSES)
        if status == "open"
        else None
        if status == "all"
        else [TaskStatus(status)]
    )
    found = server(request).runtime.tasks(who.reads, statuses=statuses, limit=limit)
    return TasksOut(tasks=[schemas.Task.model_validate(task_view(t)) for t in found])


@router.get("/tasks/{task_id}", response_model=TaskOut, responses=BY_ID)
def get_task(request: Request, who: Who, task_id: Id) -> TaskOut:
    return TaskOut(task=_task(server(request).runtime.task(who.reads, task_id)))


@router.get("/tasks/{task_id}/actions", response_model=ActionsOut, responses=BY_ID)
def get_actions(request: Request, who: Who, task_id: Id) -> ActionsOut:
    state = server(request).runtime.task(who.reads, task_id)
    return ActionsOut(
        actions=[schemas.Action.model_validate(action_view(a)) for a in state.actions]
    )


@router.get("/tasks/{task_id}/history", response_model=schemas.History, responses=BY_ID | REPLAYS)
def get_history(
    request: Request,
    who: Who,
    task_id: Id,
    language: Annotated[Language, Query(description="The language of each entry's `said`")] = "en",
) -> schemas.History:
    """The Task's journal, each entry with what it changed in people's words first."""
    runtime = server(request).runtime
    baseline, entries = runtime.history(who.reads, task_id)
    labels = runtime.labels(task_type(baseline, entries), language)
    return schemas.History.model_validate(history_view(baseline, entries, labels))


@router.get("/tasks/{task_id}/state", response_model=TaskOut, responses=BY_ID | REPLAYS)
def get_state_at(
    request: Request,
    who: Who,
    task_id: Id,
    at: Annotated[int, Query(ge=1, le=2**31 - 1, description="A journal version")],
) -> TaskOut:
    rt = server(request).runtime
    current = rt.task(who.reads, task_id)
    if at > current.task.version:
        raise NotFound(f"task {task_id} has no version {at} (it is at {current.task.version})")
    return TaskOut(task=_task(rt.replay(who.reads, task_id, at)))


@router.post("/tasks/{task_id}/resume", response_model=TaskOut, responses=BY_ID | WRITES)
def resume(request: Request, who: Who, task_id: Id) -> TaskOut:
    done = server(request).runtime.resume(who.reads, task_id)
    return TaskOut(task=_task(done.state))


@router.post("/tasks/{task_id}/cancel", response_model=TaskOut, responses=BY_ID | WRITES)
def cancel(request: Request, who: Who, task_id: Id) -> TaskOut:
    return TaskOut(task=_task(server(request).runtime.cancel(who.acts, task_id)))


@router.post("/tasks/{task_id}/slots", response_model=TaskOut, responses=BY_ID | WRITES)
def fill(request: Request, who: Who, task_id: Id, body: SlotValues) -> TaskOut:
    """Set slot values without a conversation (a form): the caller's own Task; an admin key
    may set any user's, and only it the slots an operator fills (an approval)."""
    state = server(request).runtime.fill(who.reads, task_id, body.slots)
    return TaskOut(task=_task(state))


@router.post("/tasks/{task_id}/confirm", response_model=TaskOut, responses=BY_ID | WRITES)
def confirm(request: Request, who: Who, task_id: Id, body: Confirmation) -> TaskOut:
    state = server(request).runtime.confirm(who.acts, task_id, body.yes, seen=body.version)
    return TaskOut(task=_task(state))


@router.post(
    "/actions/{action_id}/resolve", response_model=TaskOut, responses=BY_ID | WRITES | OPERATORS
)
def resolve(request: Request, who: Who, action_id: Id, body: Resolution) -> TaskOut:
    rt = server(request).runtime
    action = rt.action(who.reads, action_id)
    state = rt.resolve(
        who.reads,
        action.task_id,
        action.seq,
        succeeded=body.outcome == "success",
        output=body.output,
    )
    return TaskOut(task=_task(state))


@router.post(
    "/actions/{action_id}/rerun", response_model=TaskOut, responses=BY_ID | WRITES | OPERATORS
)
def rerun(request: Request, who: Who, action_id: Id) -> TaskOut:
    """An operator runs an Action stopped by an error in its own code again, once the code
    is fixed (one with a side effect is reconciled with the downstream first)."""
    rt = server(request).runtime
    action = rt.action(who.reads, action_id)
    return TaskOut(task=_task(rt.rerun(who.reads, action.task_id, action.seq)))


@router.post("/tasks/{task_id}/unpin", response_model=TaskOut, responses=BY_ID | WRITES | OPERATORS)
def unpin(request: Request, who: Who, task_id: Id, body: Unpinning) -> TaskOut:
    """An operator lets any build continue a pinned Task whose build is gone for good; the
    serving build lifts it to the version it runs."""
    state = server(request).runtime.unpin(who.reads, task_id, reason=body.reason)
    return TaskOut(task=_task(state))
