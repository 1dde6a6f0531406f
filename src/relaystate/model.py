"""Plain typed data for the three layers (Session, Task, Action) plus messages and journal.

Everything here is a dataclass with an explicit, JSON-plain dict form, so every store backend
persists the same shape and the journal can diff it field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

SCHEMA_VERSION = 1
"""Shape version of stored Task/Action dicts: a writer never overwrites a newer shape
(``runtime/writer.py``). A task type's own versions and their migrations are
``task/versions.py``; the SQL schema's steps are ``store/schema/``."""

JSON = Any


class TaskStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING_USER = "waiting_user"
    NEEDS_ATTENTION = "needs_attention"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_open(self) -> bool:
        return self not in _FINISHED_TASK


_FINISHED_TASK = {TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED}
OPEN_TASK_STATUSES = tuple(s for s in TaskStatus if s.is_open)


class ActionStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    UNKNOWN = "unknown"
    COMPENSATED = "compensated"

    @property
    def is_open(self) -> bool:
        return self in _OPEN_ACTION


_OPEN_ACTION = {ActionStatus.PENDING, ActionStatus.RUNNING, ActionStatus.UNKNOWN}
OPEN_ACTION_STATUSES = tuple(s for s in ActionStatus if s.is_open)


class ActionKind(StrEnum):
    STEP = "step"
    COMPENSATION = "compensation"


def clone(value: JSON) -> JSON:
    """A deep copy of JSON-plain data; several times cheaper than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
    return value


def utcnow() -> datetime:
    return datetime.now(UTC)


def to_iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def from_iso(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _req_iso(value: str) -> datetime:
    return datetime.fromisoformat(value)


@dataclass
class Progress:
    """How many of a task's planned actions have succeeded."""

    done: int = 0
    total: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"done": self.done, "total": self.total}


@dataclass
class Task:
    """One goal as an explicit state machine, owned by a user and not by a session."""

    id: str
    type: str
    user_id: str
    stage: str
    status: TaskStatus = TaskStatus.PENDING
    origin_session_id: str | None = None
    slots: dict[str, JSON] = field(default_factory=dict)
    missing_slots: list[str] = field(default_factory=list)
    confirmed: bool = False
    goal: str = ""
    context: dict[str, JSON] = field(default_factory=dict)
    version: int = 0
    schema_version: int = SCHEMA_VERSION
    template_version: int = 1
    created_by_build: str = ""
    pinned: bool = False
    """Its work runs only in processes of ``created_by_build`` (its template is pinned)."""
    template_fingerprint: str = ""
    """The fingerprint of the template definition that made it, or last lifted it
    (``TaskTemplate.fingerprint``): a process whose definition of the same type and version
    differs refuses to write it. Kept in the Task's JSON, so no table changes; a Task stored
    before Tasks recorded it has "" and is accepted, stamped by the definition that runs it
    on its next write. No ``SCHEMA_VERSION`` step either: an older build reads the Task and
    drops the field when it writes, which only makes it "" again (stamped anew later),
    while a step would make every older build refuse every Task a newer one touched."""
    due_at: datetime | None = None
    """When automatic work is next due (an action to run, a retry, a lease to check); None
    while the task waits for a person or is finished. Kept by the writer: the work queue."""
    progress: Progress = field(default_factory=Progress)
    status_text: str = ""
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "type": self.type,
            "user_id": self.user_id,
            "origin_session_id": self.origin_session_id,
            "stage": self.stage,
            "status": str(self.status),
            "slots": clone(self.slots),
            "missing_slots": list(self.missing_slots),
            "confirmed": self.confirmed,
            "goal": self.goal,
            "context": clone(self.context),
            "version": self.version,
            "schema_version": self.schema_version,
            "template_version": self.template_version,
            "created_by_build": self.created_by_build,
            "pinned": self.pinned,
            "template_fingerprint": self.template_fingerprint,
            "due_at": to_iso(self.due_at),
            "progress": self.progress.to_dict(),
            "status_text": self.status_text,
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> Task:
        return cls(
            id=d["id"],
            type=d["type"],
            user_id=d["user_id"],
            origin_session_id=d.get("origin_session_id"),
            stage=d["stage"],
            status=TaskStatus(d["status"]),
            slots=clone(d.get("slots", {})),
            missing_slots=list(d.get("missing_slots", [])),
            confirmed=bool(d.get("confirmed", False)),
            goal=d.get("goal", ""),
            context=clone(d.get("context", {})),
            version=int(d["version"]),
            schema_version=int(d.get("schema_version", SCHEMA_VERSION)),
            template_version=int(d.get("template_version", 1)),
            created_by_build=d.get("created_by_build", ""),
            pinned=bool(d.get("pinned", False)),
            template_fingerprint=str(d.get("template_fingerprint") or ""),
            due_at=from_iso(d.get("due_at")),
            progress=Progress(**d.get("progress", {})),
            status_text=d.get("status_text", ""),
            created_at=_req_iso(d["created_at"]),
            updated_at=_req_iso(d["updated_at"]),
        )


PROGRAMMING_ERROR = "programming"
"""An action's ``error_kind`` when its own code is wrong (see ``spec.PROGRAMMING_ERRORS``)."""


@dataclass
class Action:
    """One step of a task; recorded before its effect and reconciled before any retry."""

    id: str
    task_id: str
    seq: int
    name: str
    stage: str
    idempotency_key: str
    kind: ActionKind = ActionKind.STEP
    status: ActionStatus = ActionStatus.PENDING
    input: dict[str, JSON] = field(default_factory=dict)
    output: JSON = None
    error: str | None = None
    error_kind: str | None = None
    """:data:`PROGRAMMING_ERROR` when the action's own code raised a programming error
    (NameError, TypeError...): it is not retried, and the task waits for a person."""
    attempts: int = 0
    checks: int = 0
    compensates: int | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    next_attempt_at: datetime | None = None
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "task_id": self.task_id,
            "seq": self.seq,
            "name": self.name,
            "stage": self.stage,
            "kind": str(self.kind),
            "idempotency_key": self.idempotency_key,
            "status": str(self.status),
            "input": clone(self.input),
            "output": clone(self.output),
            "error": self.error,
            "error_kind": self.error_kind,
            "attempts": self.attempts,
            "checks": self.checks,
            "compensates": self.compensates,
            "lease_owner": self.lease_owner,
            "lease_expires_at": to_iso(self.lease_expires_at),
            "next_attempt_at": to_iso(self.next_attempt_at),
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> Action:
        return cls(
            id=d["id"],
            task_id=d["task_id"],
            seq=int(d["seq"]),
            name=d["name"],
            stage=d["stage"],
            kind=ActionKind(d.get("kind", "step")),
            idempotency_key=d["idempotency_key"],
            status=ActionStatus(d["status"]),
            input=clone(d.get("input", {})),
            output=clone(d.get("output")),
            error=d.get("error"),
            error_kind=d.get("error_kind"),
            attempts=int(d.get("attempts", 0)),
            checks=int(d.get("checks", 0)),
            compensates=d.get("compensates"),
            lease_owner=d.get("lease_owner"),
            lease_expires_at=from_iso(d.get("lease_expires_at")),
            next_attempt_at=from_iso(d.get("next_attempt_at")),
            created_at=_req_iso(d["created_at"]),
            updated_at=_req_iso(d["updated_at"]),
        )


@dataclass
class Session:
    """One person's interaction container; it may expire without touching any task."""

    id: str
    user_id: str
    language: str = "en"
    timezone: str = "UTC"
    active_task_ids: list[str] = field(default_factory=list)
    context: dict[str, JSON] = field(default_factory=dict)
    """Conversation state that is not task state, e.g. the open tasks a user may pick from."""
    ttl_seconds: int = 86_400
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    expires_at: datetime | None = None
    version: int = 0
    """The stored version this copy was read at (0: never stored). A store writes a session
    only if its row is still at this version, then counts it up (optimistic locking, as for
    tasks: two turns in one session never overwrite each other's task list)."""

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def touch(self, now: datetime) -> None:
        """Slide the expiry: a session lives ``ttl_seconds`` past its last use."""
        self.updated_at = now
        self.expires_at = now + timedelta(seconds=self.ttl_seconds)

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "language": self.language,
            "timezone": self.timezone,
            "active_task_ids": list(self.active_task_ids),
            "context": clone(self.context),
            "ttl_seconds": self.ttl_seconds,
            "created_at": to_iso(self.created_at),
            "updated_at": to_iso(self.updated_at),
            "expires_at": to_iso(self.expires_at),
            "version": self.version,
        }

    def next_stored(self) -> dict[str, JSON]:
        """What a store writes for this session: its fields at the next version."""
        data = self.to_dict()
        data["version"] = self.version + 1
        return data

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> Session:
        return cls(
            id=d["id"],
            user_id=d["user_id"],
            language=d.get("language", "en"),
            timezone=d.get("timezone", "UTC"),
            active_task_ids=list(d.get("active_task_ids", [])),
            context=clone(d.get("context", {})),
            ttl_seconds=int(d.get("ttl_seconds", 86_400)),
            created_at=_req_iso(d["created_at"]),
            updated_at=_req_iso(d["updated_at"]),
            expires_at=from_iso(d.get("expires_at")),
            version=int(d.get("version", 0)),
        )


@dataclass
class Message:
    """One line of a session's chat; display only, never the source of task state."""

    session_id: str
    user_id: str
    role: str
    text: str
    task_id: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    id: int | None = None
    request_key: str | None = None
    """The client's key for the request that said this (HTTP ``Idempotency-Key``): a user's
    words are stored once per key, so a retried request is answered, not redone. Stored
    beside the message, never shown with it."""

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "user_id": self.user_id,
            "role": self.role,
            "text": self.text,
            "task_id": self.task_id,
            "created_at": to_iso(self.created_at),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> Message:
        return cls(
            id=d.get("id"),
            session_id=d["session_id"],
            user_id=d["user_id"],
            role=d["role"],
            text=d["text"],
            task_id=d.get("task_id"),
            created_at=_req_iso(d["created_at"]),
            request_key=d.get("request_key"),
        )


@dataclass
class JournalEntry:
    """One committed change of a task (and its actions): the delta, why, by whom, when.

    ``version`` is the task version the change produced; ``changes`` is a list of
    ``{"path": [...], "before": x, "after": y}`` where a missing key means "absent".
    """

    task_id: str
    version: int
    at: datetime
    actor: str
    reason: str
    changes: list[dict[str, JSON]]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "task_id": self.task_id,
            "version": self.version,
            "at": to_iso(self.at),
            "actor": self.actor,
            "reason": self.reason,
            "changes": clone(self.changes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> JournalEntry:
        return cls(
            task_id=d["task_id"],
            version=int(d["version"]),
            at=_req_iso(d["at"]),
            actor=d["actor"],
            reason=d["reason"],
            changes=clone(d["changes"]),
        )


@dataclass
class Snapshot:
    """A baseline: the full state of a task and its actions at one version."""

    task_id: str
    version: int
    at: datetime
    state: dict[str, JSON]

    def to_dict(self) -> dict[str, JSON]:
        return {
            "task_id": self.task_id,
            "version": self.version,
            "at": to_iso(self.at),
            "state": clone(self.state),
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> Snapshot:
        return cls(
            task_id=d["task_id"],
            version=int(d["version"]),
            at=_req_iso(d["at"]),
            state=clone(d["state"]),
        )


@dataclass
class TaskState:
    """A task together with its actions: the unit the machine reads and the journal diffs."""

    task: Task
    actions: list[Action] = field(default_factory=list)

    def copy(self) -> TaskState:
        return TaskState(
            Task.from_dict(self.task.to_dict()),
            [Action.from_dict(a.to_dict()) for a in self.actions],
        )

    def action(self, seq: int) -> Action:
        for a in self.actions:
            if a.seq == seq:
                return a
        raise KeyError(seq)

    def find(self, stage: str, name: str, kind: ActionKind = ActionKind.STEP) -> Action | None:
        for a in self.actions:
            if a.stage == stage and a.name == name and a.kind == kind:
                return a
        return None

    def next_seq(self) -> int:
        return max((a.seq for a in self.actions), default=0) + 1

    def to_dict(self) -> dict[str, JSON]:
        return {
            "task": self.task.to_dict(),
            "actions": {str(a.seq): a.to_dict() for a in self.actions},
        }

    @classmethod
    def from_dict(cls, d: dict[str, JSON]) -> TaskState:
        actions = [Action.from_dict(a) for a in d.get("actions", {}).values()]
        return cls(Task.from_dict(d["task"]), sorted(actions, key=lambda a: a.seq))


@dataclass(frozen=True)
class WorkerInfo:
    """A process that holds leases; a deregistered or dead worker's leases expire at once."""

    id: str
    host: str
    pid: int
    build: str
    started_at: datetime


@dataclass(frozen=True)
class WorkerStatus:
    """A registered process as ``relaystate workers`` shows it: ``role`` "worker" (takes
    queued work) or "api" (a server); ``claimed`` work items it holds now."""

    info: WorkerInfo
    role: str
    heartbeat_at: datetime | None
    stopped_at: datetime | None
    claimed: int = 0


@dataclass(frozen=True)
class WorkItem:
    """A task with automatic work due at ``due_at``, as the queue holds it: written in the
    same commit as the task change that made it due. ``build``: only workers of that build
    may take it (a pinned task), else any build that runs ``type`` at ``template_version``.
    ``owner`` holds it until ``lease_until``."""

    task_id: str
    user_id: str
    type: str
    template_version: int
    build: str | None
    due_at: datetime
    owner: str | None = None
    lease_until: datetime | None = None


@dataclass(frozen=True)
class ApiKey:
    """A key of the HTTP API: whose it is (``user_id``), whether it may read every user's
    data (``admin``), and a hash of its secret (the secret itself is shown once, never
    stored). Revoked keys are kept, with the time, for the audit."""

    id: str
    user_id: str
    name: str
    admin: bool
    key_hash: str
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class MemoryItem:
    """One thing long-term memory holds for a user in a namespace: a turn, a document, a
    note. ``id`` is the caller's own (kept as given, unique per user and namespace); ``time``
    is when it was said or happened (what "when did..." and time filters read), not when it
    was stored (``added_at``). ``cites`` names the items a derived one (a summary) covers."""

    id: str
    user_id: str
    namespace: str
    text: str
    time: datetime | None = None
    source: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    cites: tuple[str, ...] = ()
    added_at: datetime | None = None


@dataclass(frozen=True)
class Fact:
    """One statement ``subject predicate object`` a user's memory holds, valid from
    ``valid_from`` until ``valid_to`` (open: still true). A task's key entities are facts
    about ``task:<id>``; the memory graph is every fact, its subjects and objects the nodes.
    A ``single`` predicate has one value at a time: a new value closes the old one, which
    stays in the history. ``object`` None says the predicate has no value any more."""

    user_id: str
    subject: str
    predicate: str
    object: JSON
    valid_from: datetime
    valid_to: datetime | None = None
    source: str | None = None
    task_id: str | None = None
    single: bool = True
    seq: int = 0

    @property
    def current(self) -> bool:
        return self.valid_to is None and self.object is not None


@dataclass(frozen=True)
class Summary:
    """A summary of a task's older turns. ``cites`` are the turns it covers (for a summary
    of summaries, every turn its parts cover); ``parts`` the summaries it merged; a summary
    merged into another keeps its row with ``merged_into`` set."""

    id: str
    user_id: str
    task_id: str
    level: int
    text: str
    cites: tuple[str, ...]
    created_at: datetime
    parts: tuple[str, ...] = ()
    merged_into: str | None = None
