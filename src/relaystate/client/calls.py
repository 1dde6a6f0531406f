"""Every endpoint of the HTTP API as a call: its method, path, query, body, and how its answer
is read into the API's own records (``relaystate.server.schemas``). Written once, run by the
synchronous :class:`~relaystate.client.Client` and the asynchronous
:class:`~relaystate.client.AsyncClient` alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from ..server import schemas

T = TypeVar("T")
Mode = Literal["hybrid", "keyword", "vector"]


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its answer's JSON into ``T``."""

    method: str
    path: str
    read: Callable[[Any], T]
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    again: bool = False
    """Safe to send again after a timeout or a 503 (a read, or a turn with its key)."""


def _id(value: str) -> str:
    return quote(value, safe="")


def _field(name: str, model: type[BaseModel]) -> Callable[[Any], Any]:
    return lambda body: model.model_validate(body[name])


def _list(name: str, model: type[BaseModel]) -> Callable[[Any], Any]:
    return lambda body: [model.model_validate(item) for item in body[name]]


# -- the caller, agents, sessions and turns ---------------------------------------------------


def me() -> Call[schemas.Me]:
    return Call("GET", "/v1/me", schemas.Me.model_validate, again=True)


def agents() -> Call[schemas.Agents]:
    return Call("GET", "/v1/agents", schemas.Agents.model_validate, again=True)


def new_session(language: str | None = None) -> Call[schemas.Session]:
    body = {"language": language} if language else None
    return Call("POST", "/v1/sessions", _field("session", schemas.Session), body=body)


def session(session_id: str) -> Call[schemas.Session]:
    path = f"/v1/sessions/{_id(session_id)}"
    return Call("GET", path, _field("session", schemas.Session), again=True)


def messages(
    session_id: str, *, limit: int = 50, before: int | None = None
) -> Call[schemas.Messages]:
    params = {"limit": limit, **({"before": before} if before is not None else {})}
    path = f"/v1/sessions/{_id(session_id)}/messages"
    return Call("GET", path, schemas.Messages.model_validate, params=params, again=True)


def say(
    session_id: str,
    text: str,
    *,
    key: str,
    language: str | None = None,
    task_id: str | None = None,
) -> Call[schemas.Turn]:
    body: dict[str, Any] = {"text": text}
    if language:
        body["language"] = language
    if task_id:
        body["task_id"] = task_id
    return Call(
        "POST",
        f"/v1/sessions/{_id(session_id)}/messages",
        _field("turn", schemas.Turn),
        body=body,
        headers={"Idempotency-Key": key},
        again=True,  # its key makes a resent turn the same turn, never a second one
    )


# -- tasks and their actions -----------------------------------------------------------------


def tasks(status: str = "open", *, limit: int = 100) -> Call[list[schemas.Task]]:
    params = {"status": status, "limit": limit}
    return Call("GET", "/v1/tasks", _list("tasks", schemas.Task), params=params, again=True)


def task(task_id: str) -> Call[schemas.TaskWithActions]:
    path = f"/v1/tasks/{_id(task_id)}"
    return Call("GET", path, _field("task", schemas.TaskWithActions), again=True)


def actions(task_id: str) -> Call[list[schemas.Action]]:
    path = f"/v1/tasks/{_id(task_id)}/actions"
    return Call("GET", path, _list("actions", schemas.Action), again=True)


def history(task_id: str, language: str = "en") -> Call[schemas.History]:
    path = f"/v1/tasks/{_id(task_id)}/history"
    params = {"language": language}
    return Call("GET", path, schemas.History.model_validate, params=params, again=True)


def state_at(task_id: str, version: int) -> Call[schemas.TaskWithActions]:
    path = f"/v1/tasks/{_id(task_id)}/state"
    read = _field("task", schemas.TaskWithActions)
    return Call("GET", path, read, params={"at": version}, again=True)


def _task_post(task_id: str, what: str, body: Any = None) -> Call[schemas.TaskWithActions]:
    path = f"/v1/tasks/{_id(task_id)}/{what}"
    return Call("POST", path, _field("task", schemas.TaskWithActions), body=body)


def resume(task_id: str) -> Call[schemas.TaskWithActions]:
    return _task_post(task_id, "resume")


def cancel(task_id: str) -> Call[schemas.TaskWithActions]:
    return _task_post(task_id, "cancel")


def confirm(
    task_id: str, yes: bool = True, *, version: int | None = None
) -> Call[schemas.TaskWithActions]:
    return _task_post(task_id, "confirm", {"yes": yes, "version": version})


def fill(task_id: str, slots: Mapping[str, Any]) -> Call[schemas.TaskWithActions]:
    return _task_post(task_id, "slots", {"slots": dict(slots)})


def unpin(task_id: str, reason: str) -> Call[schemas.TaskWithActions]:
    return _task_post(task_id, "unpin", {"reason": reason})


def resolve(
    action_id: str, outcome: Literal["success", "failed"], output: Any = None
) -> Call[schemas.TaskWithActions]:
    path = f"/v1/actions/{_id(action_id)}/resolve"
    body = {"outcome": outcome, "output": output}
    return Call("POST", path, _field("task", schemas.TaskWithActions), body=body)


def rerun(action_id: str) -> Call[schemas.TaskWithActions]:
    path = f"/v1/actions/{_id(action_id)}/rerun"
    return Call("POST", path, _field("task", schemas.TaskWithActions))


def events_token(task_id: str) -> Call[schemas.EventsToken]:
    path = f"/v1/tasks/{_id(task_id)}/events/token"
    return Call("POST", path, schemas.EventsToken.model_validate)


def events(task_id: str) -> Call[schemas.TaskWithActions]:
    """The stream's path; each event's data is read with this call's ``read``."""
    path = f"/v1/tasks/{_id(task_id)}/events"
    return Call("GET", path, schemas.TaskWithActions.model_validate)


# -- memory ------------------------------------------------------------------------------------


def add_memory(namespace: str, items: Sequence[Mapping[str, Any]]) -> Call[schemas.Added]:
    path = f"/v1/memory/{_id(namespace)}/items"
    return Call(
        "POST", path, schemas.Added.model_validate, body={"items": [dict(i) for i in items]}
    )


def memory_item(namespace: str, item_id: str) -> Call[schemas.MemoryItem]:
    path = f"/v1/memory/{_id(namespace)}/items/{_id(item_id)}"
    return Call("GET", path, _field("item", schemas.MemoryItem), again=True)


def search(
    namespace: str,
    q: str,
    *,
    k: int = 10,
    mode: Mode = "hybrid",
    since: datetime | None = None,
    until: datetime | None = None,
    source: Sequence[str] = (),
    task_id: Sequence[str] = (),
) -> Call[list[schemas.Hit]]:
    params: dict[str, Any] = {"q": q, "k": k, "mode": mode}
    if since is not None:
        params["since"] = since.isoformat()
    if until is not None:
        params["until"] = until.isoformat()
    if source:
        params["source"] = list(source)
    if task_id:
        params["task_id"] = list(task_id)
    path = f"/v1/memory/{_id(namespace)}/search"
    return Call("GET", path, _list("hits", schemas.Hit), params=params, again=True)


def context(
    task_id: str, *, q: str | None = None, budget: int | None = None, window: int | None = None
) -> Call[schemas.Context]:
    given = {"q": q, "budget": budget, "window": window}
    params = {k: v for k, v in given.items() if v is not None}
    path = f"/v1/tasks/{_id(task_id)}/context"
    return Call("GET", path, schemas.Context.model_validate, params=params, again=True)


# -- operators and health ----------------------------------------------------------------------


def builds() -> Call[list[schemas.Build]]:
    return Call("GET", "/v1/builds", _list("builds", schemas.Build), again=True)


def workers(*, stopped: bool = False) -> Call[list[schemas.Worker]]:
    params = {"stopped": stopped}
    return Call("GET", "/v1/workers", _list("workers", schemas.Worker), params=params, again=True)


def ready() -> Call[bool]:
    return Call("GET", "/readyz", lambda body: body.get("status") == "ready", again=True)
