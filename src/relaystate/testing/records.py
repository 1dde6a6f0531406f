"""Records and commits the role tests build on: one task, its changes, its actions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..model import Action, Message, Session, Task, TaskState
from ..scope import Scope
from ..store import Commit
from ..task.journal import entry_for

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ADMIN = Scope.admin("conformance")
ALICE = Scope.user("alice")
MALLORY = Scope.user("mallory")


class Committer(Protocol):
    """Anything with ``commit(Commit)``: a TaskStore, or the Stores bundle."""

    def commit(self, commit: Commit) -> None: ...


def new_task(task_id: str = "t1", user: str = "alice", **fields: object) -> TaskState:
    task = Task(id=task_id, type="demo", user_id=user, stage="collecting", version=1)
    task.created_at = task.updated_at = T0
    for key, value in fields.items():
        setattr(task, key, value)
    return TaskState(task)


def create(store: Committer, state: TaskState, **extra: object) -> TaskState:
    entry = entry_for(None, state, at=state.task.updated_at, actor="test", reason="created")
    store.commit(Commit(state, 0, list(state.actions), entry, **extra))  # type: ignore[arg-type]
    return state


def change(
    store: Committer,
    before: TaskState,
    edit: Callable[[TaskState], object],
    *,
    at: datetime | None = None,
    **extra: object,
) -> TaskState:
    after = before.copy()
    edit(after)
    after.task.version = before.task.version + 1
    after.task.updated_at = at or before.task.updated_at + timedelta(seconds=1)
    old = {a.seq: a.to_dict() for a in before.actions}
    touched = [a for a in after.actions if old.get(a.seq) != a.to_dict()]
    entry = entry_for(before, after, at=after.task.updated_at, actor="test", reason="changed")
    store.commit(Commit(after, before.task.version, touched, entry, **extra))  # type: ignore[arg-type]
    return after


def action(seq: int, key: str | None = None, task_id: str = "t1", **fields: object) -> Action:
    a = Action(
        id=f"{task_id}-a{seq}",
        task_id=task_id,
        seq=seq,
        name=f"step{seq}",
        stage="executing",
        idempotency_key=key or f"{task_id}:{seq}",
        created_at=T0,
        updated_at=T0,
    )
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def session(sid: str = "s1", user: str = "alice", **fields: object) -> Session:
    s = Session(id=sid, user_id=user, created_at=T0, updated_at=T0)
    for k, v in fields.items():
        setattr(s, k, v)
    return s


def said(
    *texts: str, sid: str = "s1", user: str = "alice", task_id: str | None = None
) -> list[Message]:
    return [Message(sid, user, "user", t, task_id, T0) for t in texts]
