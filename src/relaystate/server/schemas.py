"""The records the HTTP API answers with, typed field by field: what ``/openapi.json`` says a
Session, a Turn, a Task, an Action, a journal entry... is, so a client can be generated
from it (and ``relaystate.client`` reads its answers into these very models).

They describe the JSON shapes of ``relaystate.runtime.views``, which every surface shares:
the CLI's ``--json`` prints the same fields. Values a user or a template chooses (slot values,
an Action's input and output, metadata) are plain JSON, typed as such.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

JSONValue = Any
"""Plain JSON: a value a user gave or a template's code returned."""

TaskStatus = Literal[
    "pending", "running", "waiting_user", "needs_attention", "done", "failed", "cancelled"
]
ActionStatus = Literal["pending", "running", "success", "failed", "unknown", "compensated"]


class Record(BaseModel):
    """A record the API answers with (unknown fields are kept: a newer server may add some)."""

    model_config = ConfigDict(extra="allow")


class Progress(Record):
    """How far a Task's Actions have come."""

    done: int = Field(description="Step Actions that succeeded")
    total: int = Field(description="Step Actions the template runs when it goes all the way")


class Task(Record):
    """One goal as an explicit state machine, owned by a user (not by a session)."""

    id: str = Field(description="The Task's id")
    type: str = Field(description="Its template's type, such as flight_booking")
    user_id: str = Field(description="Whose Task it is")
    origin_session_id: str | None = Field(description="The Session it was started in, if any")
    stage: str = Field(description="The template stage it is in")
    status: TaskStatus = Field(description="Where it stands")
    slots: dict[str, JSONValue] = Field(description="Slot name -> value, as validated")
    missing_slots: list[str] = Field(description="Required slots with no value yet, in order")
    confirmed: bool = Field(description="Whether the user said yes to the collected slots")
    goal: str = Field(description="What it is for, in one line (may be empty)")
    context: dict[str, JSONValue] = Field(description="Data of its own beside the slots")
    version: int = Field(description="Bumped by every change; a stale writer gets 409")
    schema_version: int = Field(description="The shape version of its stored state")
    template_version: int = Field(description="The version of its template it runs on")
    created_by_build: str = Field(description="The build that started it")
    pinned: bool = Field(description="It runs to its end on the build that started it")
    due_at: str | None = Field(description="When its automatic work is due (ISO 8601), if any")
    progress: Progress = Field(description="How far its Actions have come")
    status_text: str = Field(description="One sentence: where it stands, what comes next")
    created_at: str = Field(description="When it was started (ISO 8601)")
    updated_at: str = Field(description="When it last changed (ISO 8601)")


class Action(Record):
    """One step of a Task: recorded before it runs, under a lease while it runs."""

    id: str = Field(description="The Action's id")
    task_id: str = Field(description="The Task it belongs to")
    seq: int = Field(description="Its place in the Task, 1 and up")
    name: str = Field(description="The template's name for it")
    kind: Literal["step", "compensation"] = Field(description="A step, or the undoing of one")
    stage: str = Field(description="The stage that ran it")
    status: ActionStatus = Field(description="Where it stands")
    idempotency_key: str = Field(description="The same in every process and every retry")
    attempts: int = Field(description="Times it was run")
    checks: int = Field(description="Times the downstream was asked what happened to it")
    compensates: int | None = Field(description="For a compensation: the seq it undoes")
    input: dict[str, JSONValue] = Field(description="What it was run with")
    output: JSONValue = Field(description="What it returned (null until it succeeded)")
    error: str | None = Field(description="Why it failed, or why its outcome is unknown")
    error_kind: Literal["programming"] | None = Field(
        description="programming: an error of its own code, not retried (rerun it after the fix)"
    )
    lease_owner: str | None = Field(description="The process that holds it while it runs")
    lease_expires_at: str | None = Field(description="When that lease ends (ISO 8601)")
    next_attempt_at: str | None = Field(description="When a retry is due (ISO 8601)")
    created_at: str = Field(description="When it was recorded (ISO 8601)")
    updated_at: str = Field(description="When it last changed (ISO 8601)")


class TaskWithActions(Task):
    """A Task and its Actions, in seq order."""

    actions: list[Action] = Field(description="Its Actions, in seq order")


class Session(Record):
    """One person's interaction container: it may expire; its Tasks never do."""

    id: str = Field(description="The Session's id")
    user_id: str = Field(description="Whose Session it is")
    language: str = Field(description="The language it speaks: en or zh")
    timezone: str = Field(description="The timezone its dates are read in")
    active_task_ids: list[str] = Field(description="The Tasks it touches, oldest first")
    context: dict[str, JSONValue] = Field(description="Conversation state that is not Task state")
    ttl_seconds: int = Field(description="How long it lives after its last change")
    created_at: str = Field(description="When it was opened (ISO 8601)")
    updated_at: str = Field(description="When it last changed (ISO 8601)")
    expires_at: str = Field(description="When it expires (ISO 8601)")
    version: int = Field(description="Bumped by every change; a stale writer gets 409")


class Message(Record):
    """One message of a Session: the user's words or a reply."""

    id: int | None = Field(description="Its number in the Session, 1 and up")
    session_id: str = Field(description="The Session it belongs to")
    user_id: str = Field(description="Whose Session it is")
    role: Literal["user", "assistant", "system"] = Field(description="Who said it")
    text: str = Field(description="What was said")
    task_id: str | None = Field(description="The Task it was about, if any")
    created_at: str = Field(description="When it was said (ISO 8601)")


class Turn(Record):
    """One conversational turn: the reply, the Task it touched, the Actions that moved."""

    session_id: str = Field(description="The Session of the turn")
    reply: str = Field(description="What to say to the user")
    language: str = Field(description="The language of the reply")
    task: Task | None = Field(description="The Task the turn went to, as it left it")
    actions: list[Action] = Field(description="The Actions this turn created or changed")
    why: str = Field(description="Why the message went to that Task (or to none), for people")


class Change(Record):
    """One field a journal entry changed: ``before`` absent when it was new, ``after``
    absent when it was removed."""

    path: list[str | int] = Field(description="Where the field is: ['task', 'slots', 'date']")
    before: JSONValue = Field(None, description="Its value before (absent: it was new)")
    after: JSONValue = Field(None, description="Its value after (absent: it was removed)")


class JournalEntry(Record):
    """One committed change of a Task: what changed, why, by whom, when."""

    task_id: str = Field(description="The Task it changed")
    version: int = Field(description="The Task version the change produced")
    at: str = Field(description="When it was committed (ISO 8601)")
    actor: str = Field(description="Who made it: user:ID, admin:NAME, worker:ID, migration")
    reason: str = Field(description="Why, in words")
    said: list[str] = Field(
        description="What changed in the user's terms (slots, stage, status, Actions)"
    )
    bookkeeping: list[str] = Field(
        description="The internal fields it changed too (leases, due times, derived text)"
    )
    changes: list[Change] = Field(description="Every changed field, before and after")


class Snapshot(Record):
    """A baseline: the whole Task and its Actions at one version (older entries folded in)."""

    task_id: str = Field(description="The Task")
    version: int = Field(description="The version it holds")
    at: str = Field(description="When that version was committed (ISO 8601)")
    state: dict[str, JSONValue] = Field(description="The Task and its Actions, as stored")


class Worker(Record):
    """A registered process: an API server or a worker."""

    id: str = Field(description="Its owner id (host, pid, start time)")
    role: str = Field(description="api or worker")
    build: str = Field(description="The build it runs")
    host: str = Field(description="Where it runs")
    pid: int = Field(description="Its process id")
    claimed: int = Field(description="Work items it holds")
    heartbeat_age_s: float | None = Field(description="Seconds since its last heartbeat")
    started_at: str | None = Field(description="When it registered (ISO 8601)")
    stopped_at: str | None = Field(description="When it deregistered (ISO 8601), if it did")


class Build(Record):
    """A build in service: its processes and the open Tasks pinned to it."""

    build: str = Field(description="The build id")
    processes: dict[str, int] = Field(description="Role -> processes of this build")
    pinned_open_tasks: int = Field(description="Open Tasks pinned to this build")
    open_tasks_started: int = Field(description="Open Tasks this build started")
    queued_pinned_work: int = Field(description="Queued work only this build may run")
    can_retire: bool = Field(description="Nothing is pinned to it: it may go")


class MemoryItem(Record):
    """One item of a user's long-term memory."""

    id: str = Field(description="Its id in the namespace")
    namespace: str = Field(description="The namespace it is in")
    text: str = Field(description="What it says")
    time: str | None = Field(description="When it was said or happened (ISO 8601)")
    source: str | None = Field(description="Where it came from")
    task_id: str | None = Field(description="The Task it is about, if any")
    metadata: dict[str, JSONValue] = Field(description="Anything its writer attached")
    cites: list[str] = Field(description="Items it summarises or derives from")
    added_at: str | None = Field(description="When it was stored (ISO 8601)")


class Hit(MemoryItem):
    """A memory item that answers a search, with how it ranked."""

    score: float = Field(description="Its fused score (higher is better)")
    ranks: dict[str, int] = Field(
        description="Its rank in each list it was in (keyword, vector...)"
    )


class Kept(Record):
    """One candidate of a context: kept or dropped, and why."""

    id: str = Field(description="The candidate's id")
    layer: str = Field(description="The memory layer it came from")
    score: float = Field(description="Its score")
    tokens: int = Field(description="Its size in tokens")
    kept: bool = Field(description="Whether it is in the prompt")
    reason: str = Field(description="Why it was kept or dropped")


class Agent(Record):
    """A task type this server runs, as people call it."""

    type: str = Field(description="The template's type")
    version: int = Field(description="The version new Tasks start on")
    titles: dict[str, str] = Field(description="Language -> what to call it")
    slots: dict[str, dict[str, str]] = Field(
        description="Slot name -> language -> what to call the slot"
    )
    stages: dict[str, dict[str, str]] = Field(
        description="Stage name -> language -> what to call the stage"
    )


# -- the answers that are not a single record ------------------------------------------------
class Me(Record):
    """Who an API key acts as."""

    user_id: str = Field(description="The key's user")
    admin: bool = Field(description="Whether it is an operator's key")
    key_id: str = Field(description="The key's public id")


class Agents(Record):
    """What the server runs, and what to call it."""

    agents: list[Agent] = Field(description="The task types this server runs")
    statuses: dict[str, dict[str, str]] = Field(
        description="Language -> Task status -> what to call it"
    )
    action_statuses: dict[str, dict[str, str]] = Field(
        description="Language -> Action status -> what to call it"
    )


class Messages(Record):
    """One page of a Session's messages."""

    messages: list[Message] = Field(description="The messages, oldest first")
    next_before: int | None = Field(
        description="Pass as before= for the messages before these (null: none are left)"
    )


class History(Record):
    """A Task's journal: a baseline (if compacted) and the entries after it."""

    baseline: Snapshot | None = Field(
        description="The baseline older entries were folded into, if any"
    )
    entries: list[JournalEntry] = Field(description="The journal, oldest first")


class EventsToken(Record):
    """A short-lived token that opens one Task's events stream."""

    token: str = Field(description="Put it in the events URL: ?token=...")
    expires_at: str = Field(description="Until when it opens the stream (ISO 8601)")


class Added(Record):
    """What adding memory items did."""

    added: int = Field(description="Items added or replaced")
    total: int = Field(description="Items the namespace holds now")


class Context(Record):
    """A Task's context within a token budget, and why each candidate was kept."""

    query: str = Field(description="What the context was built for")
    prompt: str = Field(description="The context, as a model would get it")
    tokens: int = Field(description="Its size in tokens")
    budget: int = Field(description="The most tokens it could have")
    explanation: list[Kept] = Field(description="Every candidate, kept or dropped")
