"""The public entry: start and change tasks, run their actions, resume, recover, audit.

A :class:`Runtime` binds a store to the task templates this build knows. Every change goes
through the writer (optimistic locking, journal, task before messages); every action goes
through the action protocol. Nothing here reads chat history to decide what to do next.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import journal
from .actions import ActionRunner
from .errors import InvalidSlot, NotFound, TaskLocked, TemplateError
from .leases import Owner, hostname, lease_expired
from .machine import first_stage
from .model import (
    OPEN_TASK_STATUSES,
    ActionKind,
    ActionStatus,
    JournalEntry,
    Message,
    Session,
    Snapshot,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
    utcnow,
)
from .next_step import InProgress, NextStep, Reconcile, RunAction, WaitRetry
from .store.base import Store
from .templates import TaskTemplate
from .writer import TaskWriter

JSON = Any
MessageLike = Message | tuple[str, str]

DEFAULT_RETENTION = timedelta(days=7)
DEFAULT_SESSION_TTL = timedelta(hours=24)
RECOVERY_BATCH = 100
SESSION_TOUCH = timedelta(seconds=60)
"""A turn rewrites its session row only if the task is new to it or this long has passed."""


@dataclass
class Resumption:
    """Where a task stands after resuming it, computed from stored state alone."""

    state: TaskState
    step: NextStep

    @property
    def task(self) -> Task:
        return self.state.task


@dataclass
class RecoveryReport:
    """What one ``recover`` pass found and did."""

    examined: int = 0
    resumed: list[str] = field(default_factory=list)
    skipped: int = 0
    """Open actions left alone because their lease is alive."""
    claimed_elsewhere: int = 0
    """Tasks another recoverer was already working on."""
    errors: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)


class Runtime:
    """Durable Sessions, Tasks and Actions over one store."""

    def __init__(
        self,
        store: Store,
        templates: Iterable[TaskTemplate],
        *,
        build: str = "dev",
        clock: Callable[[], datetime] = utcnow,
        lease: timedelta = timedelta(seconds=60),
        retention: timedelta = DEFAULT_RETENTION,
        max_inline_wait: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.build = build
        self.clock = clock
        self.retention = retention
        self.max_inline_wait = max_inline_wait
        self.sleep = sleep
        self.templates: dict[str, TaskTemplate] = {}
        for template in templates:
            self.register(template)
        self.owner = Owner.current().id
        self._stopped: set[str] = set()
        self._registered = False
        self.writer = TaskWriter(store, self.templates, clock)
        self.actions = ActionRunner(
            self.writer, owner=self.owner, lease=lease, is_stopped=self._is_stopped
        )

    # -- set-up --------------------------------------------------------------------------
    def register(self, template: TaskTemplate) -> None:
        """Make a task type known to this runtime (checked for undeclared actions)."""
        template.validate()
        self.templates[template.type] = template

    def _is_stopped(self, owner_id: str) -> bool:
        # A worker that deregistered never comes back: remember it, ask once.
        if owner_id in self._stopped:
            return True
        if owner_id in self.store.stopped_workers([owner_id]):
            self._stopped.add(owner_id)
            return True
        return False

    def _ensure_registered(self) -> None:
        if not self._registered:
            owner = Owner.parse(self.owner)
            self.store.register_worker(
                WorkerInfo(self.owner, hostname(), os.getpid(), self.build, self.clock())
            )
            self._registered = owner is not None

    def close(self) -> None:
        """Deregister as a worker (leases still held count as expired) and close the store."""
        if self._registered:
            with contextlib.suppress(Exception):
                self.store.deregister_worker(self.owner, self.clock())
        self.store.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sessions ------------------------------------------------------------------------
    def open_session(
        self,
        user_id: str,
        session_id: str | None = None,
        *,
        language: str | None = None,
        timezone: str | None = None,
        ttl: timedelta | None = None,
    ) -> Session:
        """Reopen a session (a new one if it is unknown or expired; tasks are unaffected)."""
        session = self._live_session(session_id, user_id)
        if language:
            session.language = language
        if timezone:
            session.timezone = timezone
        if ttl is not None:
            session.ttl_seconds = max(int(ttl.total_seconds()), 1)
        session.touch(self.clock())
        self.store.put_session(session)
        return session

    def _live_session(self, session_id: str | None, user_id: str) -> Session:
        """The stored session if it is still alive, else a new empty one with that id."""
        now = self.clock()
        session = (
            self.store.get_session(session_id, user_id=user_id) if session_id is not None else None
        )
        if session is not None and not session.expired(now):
            return session
        ttl = session.ttl_seconds if session else int(DEFAULT_SESSION_TTL.total_seconds())
        return Session(
            id=session_id or uuid.uuid4().hex,
            user_id=user_id,
            ttl_seconds=ttl,
            created_at=now,
            updated_at=now,
        )

    def messages(self, session_id: str, user_id: str, *, limit: int = 50) -> list[Message]:
        return self.store.messages(session_id, user_id=user_id, limit=limit)

    def _session_for(
        self, session_id: str | None, user_id: str
    ) -> Callable[[TaskState], Session | None]:
        def touch(state: TaskState) -> Session | None:
            if session_id is None:
                return None
            session = self._live_session(session_id, user_id)
            now = self.clock()
            known = state.task.id in session.active_task_ids
            if known and session.created_at != now and now - session.updated_at < SESSION_TOUCH:
                return None  # nothing new to say; spare the turn a second row write
            if not known:
                session.active_task_ids = [*session.active_task_ids, state.task.id][-20:]
            session.touch(now)
            return session

        return touch

    def _messages_for(
        self, session_id: str | None, user_id: str, messages: Sequence[MessageLike]
    ) -> Callable[[TaskState], list[Message]]:
        def build(state: TaskState) -> list[Message]:
            if not messages:
                return []
            if session_id is None:
                raise ValueError("messages need a session_id")
            now = self.clock()
            out = []
            for m in messages:
                if isinstance(m, Message):
                    out.append(m)
                else:
                    role, text = m
                    out.append(Message(session_id, user_id, role, text, state.task.id, now))
            return out

        return build

    # -- tasks ---------------------------------------------------------------------------
    def start(
        self,
        user_id: str,
        type: str,
        *,
        session_id: str | None = None,
        slots: Mapping[str, JSON] | None = None,
        goal: str | None = None,
        context: Mapping[str, JSON] | None = None,
        task_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
    ) -> TaskState:
        """Start a task of a registered type for a user; runs what it can right away."""
        template = self.templates.get(type)
        if template is None:
            known = ", ".join(sorted(self.templates)) or "none"
            raise TemplateError(f"unknown task type {type!r} (known: {known})")
        if not user_id:
            raise ValueError("user_id is required")
        task = Task(
            id=task_id or uuid.uuid4().hex,
            type=type,
            user_id=user_id,
            stage=template.stages[0].name,
            origin_session_id=session_id,
            goal=goal if goal is not None else template.goal,
            context=dict(context or {}),
            template_version=template.version,
            created_by_build=self.build,
        )
        state = TaskState(task)
        state.task.slots = _validated(template, slots or {})
        state.task.stage = first_stage(template, state)
        touch = self._session_for(session_id, user_id)
        created = self.writer.create(
            state,
            actor=f"user:{user_id}",
            reason=f"started {type}",
            session=touch(state),
            messages=self._messages_for(session_id, user_id, messages)(state),
        )
        return self._drive(created, user_id)[0] if run else created[0]

    def fill(
        self,
        task_id: str,
        user_id: str,
        slots: Mapping[str, JSON],
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
    ) -> TaskState:
        """Set slot values (latest wins; the journal keeps the old ones) and go on.

        A changed value sends the task back to its first stage, so it is confirmed again,
        and read-only actions that already ran (a look-up) run again on the new values.
        Once a side effect has been recorded the slots are locked.
        """

        def change(draft: TaskState) -> bool:
            _require_open(draft)
            template = self.writer.template(draft)
            values = _validated(template, slots)
            changed = {k: v for k, v in values.items() if draft.task.slots.get(k) != v}
            if not changed:
                return True
            draft.task.slots.update(changed)
            _change_of_mind(draft, template, "its slots can no longer change")
            return True

        state, step = self._user_change(
            task_id,
            user_id,
            change,
            f"filled {', '.join(slots) or 'nothing'}",
            session_id,
            messages,
        )
        return self._drive((state, step), user_id)[0] if run else state

    def confirm(
        self,
        task_id: str,
        user_id: str,
        yes: bool = True,
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
    ) -> TaskState:
        """Record the user's yes (go on) or no (back to collecting) on the collected slots."""

        def change(draft: TaskState) -> bool:
            _require_open(draft)
            template = self.writer.template(draft)
            _require_no_effect(draft, template, "it is past confirmation")
            if yes:
                draft.task.confirmed = True
            else:
                _change_of_mind(draft, template, "it is past confirmation")
            return True

        state, step = self._user_change(
            task_id,
            user_id,
            change,
            "user confirmed" if yes else "user declined",
            session_id,
            messages,
        )
        return self._drive((state, step), user_id)[0] if run else state

    def cancel(
        self,
        task_id: str,
        user_id: str,
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
    ) -> TaskState:
        """Cancel an open task, unless an action is in flight or a side effect already landed."""

        def change(draft: TaskState) -> bool:
            _require_open(draft)
            template = self.writer.template(draft)
            for action in draft.actions:
                if action.status.is_open:
                    raise TaskLocked(f"{action.name} is {action.status}; cancel after it settles")
                spec = template.spec(action.name.removesuffix(".compensate"))
                if action.status == ActionStatus.SUCCESS and spec.side_effect:
                    raise TaskLocked(f"{action.name} already took effect; it cannot be cancelled")
            draft.task.status = TaskStatus.CANCELLED
            return True

        state, _ = self._user_change(
            task_id, user_id, change, "cancelled by the user", session_id, messages
        )
        return state

    def _user_change(
        self,
        task_id: str,
        user_id: str,
        change: Callable[[TaskState], bool | None],
        reason: str,
        session_id: str | None,
        messages: Sequence[MessageLike],
    ) -> tuple[TaskState, NextStep]:
        """A change a user asked for, committed with the session and messages of the turn."""
        state, step, _ = self.writer.mutate(
            task_id,
            user_id,
            change,
            actor=f"user:{user_id}",
            reason=reason,
            session=self._session_for(session_id, user_id),
            messages=self._messages_for(session_id, user_id, messages),
        )
        return state, step

    def resolve(
        self, task_id: str, seq: int, *, succeeded: bool, output: JSON = None, by: str = "operator"
    ) -> TaskState:
        """A person settles an action that needs attention: it did or did not take effect."""

        def change(draft: TaskState) -> bool:
            action = draft.action(seq)
            if action.status not in (ActionStatus.UNKNOWN, ActionStatus.FAILED):
                raise TaskLocked(f"{action.name} is {action.status}; nothing to resolve")
            action.status = ActionStatus.SUCCESS if succeeded else ActionStatus.FAILED
            action.output = output if succeeded else action.output
            action.error = None if succeeded else (action.error or f"resolved as failed by {by}")
            action.lease_owner = action.lease_expires_at = action.next_attempt_at = None
            if succeeded and action.compensates is not None:
                draft.action(action.compensates).status = ActionStatus.COMPENSATED
            return True

        try:
            self.writer.mutate(
                task_id,
                None,
                change,
                actor=by,
                reason=f"action {seq} resolved as {'succeeded' if succeeded else 'failed'}",
            )
        except KeyError:
            raise NotFound(f"task {task_id} has no action {seq}") from None
        return self.advance(task_id, None)

    # -- running and resuming ------------------------------------------------------------
    def advance(self, task_id: str, user_id: str | None = None) -> TaskState:
        """Run what the machine says until the task waits for someone or something."""
        return self._drive(self.writer.current(task_id, user_id), user_id)[0]

    def resume(self, task_id: str, user_id: str | None = None, *, run: bool = True) -> Resumption:
        """Pick a task up where it stopped: reconcile and run what is due, then say what's next."""
        current = self.writer.current(task_id, user_id)
        return Resumption(*(self._drive(current, user_id) if run else current))

    def _drive(
        self, current: tuple[TaskState, NextStep], user_id: str | None, max_steps: int = 200
    ) -> tuple[TaskState, NextStep]:
        state, step = current
        for _ in range(max_steps):
            if isinstance(step, RunAction):
                self._ensure_registered()
                if not self.actions.run(state, step):
                    break
            elif isinstance(step, Reconcile | InProgress):
                if isinstance(step, InProgress) and not self.actions.expired(
                    state.action(step.seq), self.clock()
                ):
                    break
                self._ensure_registered()
                if not self.actions.reconcile(state, step.seq):
                    break
            elif isinstance(step, WaitRetry):
                wait = (step.at - self.clock()).total_seconds()
                if wait > self.max_inline_wait:
                    break
                self.sleep(max(wait, 0.0))
            else:
                break
            state, step = self.writer.current(state.task.id, user_id)
        return state, step

    def task(self, task_id: str, user_id: str | None = None) -> TaskState:
        """A task and its actions (``user_id=None`` is the admin scope)."""
        return self.writer.load(task_id, user_id)

    def open_tasks(self, user_id: str, *, limit: int = 100) -> list[Task]:
        """A user's unfinished tasks, from any session or device, most recent first."""
        return self.store.list_tasks(user_id, statuses=OPEN_TASK_STATUSES, limit=limit)

    def tasks(
        self, user_id: str | None, *, statuses: Sequence[TaskStatus] | None = None, limit: int = 100
    ) -> list[Task]:
        return self.store.list_tasks(user_id, statuses=statuses, limit=limit)

    def recover(
        self,
        *,
        limit: int | None = None,
        page: int = 1000,
        on_task: Callable[[str, str], None] | None = None,
    ) -> RecoveryReport:
        """Reconcile actions whose lease expired and continue interrupted tasks: all of them,
        or at most ``limit`` tasks.

        Run at start-up: a lease held by a dead process on this host, or by a deregistered
        worker, counts as expired at once, so recovery after a crash does not wait.
        """
        report = RecoveryReport()
        now = self.clock()
        candidates: dict[str, None] = {}
        held: set[str] = set()
        after: str | None = None
        while True:  # every open action, a page at a time
            actions = self.store.open_actions(limit=page, after=after)
            if not actions:
                break
            after = actions[-1].id
            # One look per holder, not per action: thousands of actions share a few holders.
            holders = {a.lease_owner for a in actions if a.lease_owner is not None}
            stopped = self.store.stopped_workers(holders)
            gone = functools.cache(
                lambda owner, stopped=stopped: lease_expired(
                    owner, None, now, me=self.owner, is_stopped=stopped.__contains__
                )
            )
            for action in actions:
                report.examined += 1
                timed_out = action.lease_expires_at is not None and action.lease_expires_at <= now
                if action.lease_owner is None or timed_out or gone(action.lease_owner):
                    candidates[action.task_id] = None
                else:
                    report.skipped += 1
                    held.add(action.task_id)
        # A task can also stop between two actions (after one committed, before the next
        # was recorded): it is running with no open action.
        for task in self.store.list_tasks(None, statuses=[TaskStatus.RUNNING], limit=10**9):
            if task.id not in held:
                candidates.setdefault(task.id, None)
        ids = list(candidates)[:limit]
        try:
            for start in range(0, len(ids), RECOVERY_BATCH):
                # Claim a batch first: a concurrent recoverer takes other tasks meanwhile.
                batch = self.store.claim_for_recovery(
                    ids[start : start + RECOVERY_BATCH],
                    self.owner,
                    until=self.clock() + self.actions.lease,
                    now=self.clock(),
                )
                report.claimed_elsewhere += min(RECOVERY_BATCH, len(ids) - start) - len(batch)
                for task_id in batch:
                    self._recover_one(task_id, report, on_task)
        finally:
            self.store.release_recovery(self.owner)
        return report

    def _recover_one(
        self, task_id: str, report: RecoveryReport, on_task: Callable[[str, str], None] | None
    ) -> None:
        try:
            state = self.advance(task_id, None)
        except Exception as exc:
            report.errors[task_id] = f"{type(exc).__name__}: {exc}"
            outcome = "error"
        else:
            report.resumed.append(task_id)
            outcome = str(state.task.status)
            report.outcomes[task_id] = outcome
        if on_task is not None:
            on_task(task_id, outcome)

    # -- journal -------------------------------------------------------------------------
    def history(
        self, task_id: str, user_id: str | None = None
    ) -> tuple[Snapshot | None, list[JournalEntry]]:
        """A task's baseline (if compacted) and the journal entries after it."""
        self.writer.load(task_id, user_id)  # scope check
        baseline = self.store.baseline(task_id)
        entries = self.store.journal(task_id, after_version=baseline.version if baseline else 0)
        return baseline, entries

    def replay(
        self, task_id: str, upto: int | datetime | None = None, user_id: str | None = None
    ) -> TaskState:
        """The task and its actions as they were at version (or time) ``upto``."""
        baseline, entries = self.history(task_id, user_id)
        return journal.replay(entries, baseline, upto)

    def compact(self, *, now: datetime | None = None, retention: timedelta | None = None) -> int:
        """Fold journal entries older than the retention into baselines; returns entries folded."""
        cutoff = (now or self.clock()) - (retention if retention is not None else self.retention)
        folded = 0
        for task_id in self.store.tasks_with_entries_before(cutoff):
            baseline, entries = self.history(task_id)
            old = [e for e in entries if e.at < cutoff]
            if not old:
                continue
            state = journal.replay(entries, baseline, old[-1].version)
            snapshot = Snapshot(task_id, old[-1].version, old[-1].at, state.to_dict())
            folded += self.store.compact(snapshot)
        return folded


def _require_no_effect(state: TaskState, template: TaskTemplate, why: str) -> None:
    """Refuse a change of mind once a side effect is recorded (it may have happened)."""
    for action in state.actions:
        if action.kind == ActionKind.STEP and template.spec(action.name).side_effect:
            raise TaskLocked(f"task {state.task.id} has recorded {action.name}: {why}")


def _change_of_mind(state: TaskState, template: TaskTemplate, why: str) -> None:
    """Back to the first stage, to be confirmed again; read-only actions run again later.

    Refused once a side effect is recorded, or while an action is in flight (its result
    would land on a task that no longer wants it).
    """
    _require_no_effect(state, template, why)
    for action in state.actions:
        if action.status == ActionStatus.RUNNING:
            raise TaskLocked(f"{action.name} is running; change it after it settles")
    state.task.confirmed = False
    state.task.stage = first_stage(template, state)
    for action in state.actions:  # read-only look-ups: safe to run again on new values
        action.status, action.output, action.error = ActionStatus.PENDING, None, None
        action.attempts = action.checks = 0
        action.next_attempt_at = action.lease_owner = action.lease_expires_at = None


def _require_open(state: TaskState) -> None:
    if not state.task.status.is_open:
        raise TaskLocked(f"task {state.task.id} is {state.task.status}")


def _validated(template: TaskTemplate, slots: Mapping[str, JSON]) -> dict[str, JSON]:
    out = {}
    for name, value in slots.items():
        try:
            slot = template.slot(name)
        except TemplateError:
            raise InvalidSlot(name, f"{template.type} has no such slot") from None
        out[name] = slot.validate(value)
    return out
