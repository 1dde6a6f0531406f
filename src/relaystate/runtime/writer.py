"""Every task change goes through here: read, change a copy, settle, journal, commit.

One place enforces the write rules for all callers: optimistic locking with re-read and
retry on conflict, derived fields recomputed by the machine, one journal entry holding
only the delta, the turn's session and messages in the same commit as the task, and no
writing of state whose schema is newer than this code, nor of a task another definition of
its template version made (:class:`~relaystate.errors.TemplateMismatch`). A caller that has
just read the task passes it as ``known``: the first attempt starts from it instead of
reading again.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .. import failpoints
from ..errors import (
    MigrationFailed,
    NotFound,
    OtherBuild,
    SchemaTooNew,
    TaskLocked,
    VersionConflict,
)
from ..model import SCHEMA_VERSION, ActionStatus, Message, Session, TaskState, TaskStatus, to_iso
from ..scope import Scope
from ..store.bundle import Stores
from ..store.roles import Commit
from ..store.turn_memory import Remember
from ..task import fingerprint
from ..task.journal import entry_for
from ..task.machine import settle
from ..task.next_step import NextStep
from ..task.templates import TaskTemplate
from ..task.versions import TemplateVersions
from . import work

Change = Callable[[TaskState], bool | None]
"""Edits a draft in place; returns False to leave the task as it is."""


@dataclass
class Attached:
    """What else a commit carries: the turn's session and messages, and whether memory
    keeps the turn in the same transaction."""

    session: Session | None = None
    messages: list[Message] = field(default_factory=list)
    remember: Remember | None = None


Attach = Callable[[TaskState, NextStep], Attached]
"""What else a commit carries, given the settled draft."""

CONFLICT_ATTEMPTS = 16
MIGRATION_FAILED = "migration_failed"
"""Key in ``task.context`` of why this build could not lift the task (and which build)."""


@dataclass
class Written:
    """The state after a change, its next step, and whether a commit happened."""

    state: TaskState
    step: NextStep
    written: bool


class TaskWriter:
    def __init__(
        self,
        stores: Stores,
        versions: TemplateVersions,
        clock: Callable[[], datetime],
        *,
        build: str = "dev",
    ) -> None:
        self.stores = stores
        self.versions = versions
        self.clock = clock
        self.build = build

    def template(self, state: TaskState) -> TaskTemplate:
        """The template ``state`` runs on here; TaskTooNew if a newer build wrote it."""
        if state.task.schema_version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"task {state.task.id} has state schema {state.task.schema_version}; this "
                f"build understands {SCHEMA_VERSION} and will not overwrite it"
            )
        return self.versions.runs_on(state.task)

    def load(self, task_id: str, scope: Scope) -> TaskState:
        state = self.stores.tasks.load(task_id, scope)
        if state is None:
            raise NotFound(f"no task {task_id}")
        return state

    def next_step(self, state: TaskState) -> NextStep:
        """The step stored state implies as of now, computed on a copy (nothing written)."""
        return settle(self.template(state), state.copy(), self.clock())

    # -- lifting stored tasks to the version this build runs ----------------------------
    def upgraded(self, state: TaskState, scope: Scope) -> TaskState:
        """``state`` as this build runs it: an older ``auto`` task is lifted through its
        migrations and the lift committed (journaled by ``migration``) before anything
        else touches it. A failing migration leaves the task as it was, marked as needing
        attention with the reason (once per build), and raises MigrationFailed."""
        for _ in range(CONFLICT_ATTEMPTS):
            if not self.versions.needs_lift(state.task):
                return state
            until = self._in_flight(state)
            if until is not None:  # its holder writes the result on the old version first
                if self.versions.carries(state.task):
                    return state
                raise OtherBuild(
                    f"task {state.task.id}: an action runs on {state.task.type!r} version "
                    f"{state.task.template_version} in another process; this build lifts the "
                    "task once it settles",
                    until=until,
                )
            failed = state.task.context.get(MIGRATION_FAILED)
            if isinstance(failed, dict) and failed.get("build") == self.build:
                raise MigrationFailed(str(failed.get("reason")))
            try:
                lifted = self.versions.lift(state, self.clock())
            except MigrationFailed as exc:
                self._mark_failed(state, str(exc))
                raise
            to = lifted.task.template_version
            reason = (
                f"migrated {state.task.type} from version {state.task.template_version} to {to}"
            )
            lifted.task.context.pop(MIGRATION_FAILED, None)  # an earlier build's failure
            try:
                return self._write(state, lifted, actor="migration", reason=reason).state
            except VersionConflict:
                state = self.load(state.task.id, scope)
        raise VersionConflict(state.task.id, state.task.version, None)

    def _in_flight(self, state: TaskState) -> datetime | None:
        """When the lease of an action running under a live lease ends (None: none is)."""
        now = self.clock()
        leases = [
            a.lease_expires_at
            for a in state.actions
            if a.status == ActionStatus.RUNNING
            and a.lease_expires_at is not None
            and a.lease_expires_at > now
        ]
        return max(leases) if leases else None

    def _mark_failed(self, state: TaskState, reason: str) -> None:
        """Record why the task cannot be lifted; its data and version stay as they were."""
        draft = state.copy()
        draft.task.context[MIGRATION_FAILED] = {"build": self.build, "reason": reason}
        draft.task.status = TaskStatus.NEEDS_ATTENTION
        draft.task.status_text = f"Needs attention: {reason}"
        draft.task.due_at = None
        draft.task.updated_at = self.clock()
        with contextlib.suppress(VersionConflict):  # someone else changed it: they decide
            self._commit(
                state, draft, None, actor="migration", reason=f"migration failed: {reason}"
            )

    def unpin(self, task_id: str, scope: Scope, *, by: str, why: str) -> TaskState:
        """Let any build continue a pinned task (an operator's call when its build is gone
        for good): the pin is lifted in one journaled commit, its queued work goes to any
        build, and this build then lifts it to the version it runs, as any ``auto`` task.
        Refused while one of its actions runs under a live lease (its build is not gone)."""
        for _ in range(CONFLICT_ATTEMPTS):
            state = self.load(task_id, scope)
            if not state.task.pinned:
                return self.upgraded(state, scope)
            until = self._in_flight(state)
            if until is not None:
                raise TaskLocked(
                    f"an action of task {task_id} runs in build {state.task.created_by_build!r}"
                    f" until {until.isoformat()}: that build is alive; unpin once it settles",
                    code="running",
                )
            draft = state.copy()
            draft.task.pinned = False
            draft.task.updated_at = self.clock()
            reason = f"unpinned from build {state.task.created_by_build!r} by {by}: {why}"
            try:
                self._commit(state, draft, None, actor=by, reason=reason)
            except VersionConflict:
                continue
            return self.upgraded(draft, scope)
        raise VersionConflict(task_id, state.task.version)

    # -- writing -------------------------------------------------------------------------
    def create(
        self,
        state: TaskState,
        change: Change | None = None,
        *,
        actor: str,
        reason: str | Callable[[TaskState], str],
        attach: Attach | None = None,
    ) -> Written:
        """Commit a new task (version 1) after ``change``; VersionConflict if its id exists."""
        if change is not None:
            change(state)
        now = self.clock()
        template = self.template(state)
        state.task.template_fingerprint = template.fingerprint
        step = settle(template, state, now)
        state.task.version = 1
        state.task.created_at = state.task.updated_at = now
        state.task.due_at = work.due_at(state, step)
        for action in state.actions:
            action.created_at = action.updated_at = now
        text = reason(state) if callable(reason) else reason
        entry = entry_for(None, state.to_dict(), at=now, actor=actor, reason=text)
        said = attach(state, step) if attach is not None else Attached()
        failpoints.hit("before_commit", state.task.type)
        item = work.item_for(state)
        self.stores.commit(
            Commit(
                state,
                0,
                list(state.actions),
                entry,
                said.session,
                said.messages,
                requeue=item is not None,
                work=item,
                remember=said.remember,
            )
        )
        return Written(state, step, True)

    def mutate(
        self,
        task_id: str,
        scope: Scope,
        change: Change,
        *,
        actor: str,
        reason: str | Callable[[TaskState], str],
        known: TaskState | None = None,
        attach: Attach | None = None,
    ) -> Written:
        """Apply ``change`` to fresh state until it commits.

        Nothing is written when the change declines or changes nothing; ``attach`` is then
        not asked either, and the caller decides what to do with its messages.
        """
        conflict: VersionConflict | None = None
        for attempt in range(CONFLICT_ATTEMPTS):
            read = known if known is not None and attempt == 0 else self.load(task_id, scope)
            before = self.upgraded(read, scope)
            template = self.template(before)
            self.versions.check_made_by(before.task)  # before the change is even made
            old = before.to_dict()
            draft = TaskState.from_dict(old)
            if change(draft) is False:
                return Written(before, settle(template, draft, self.clock()), False)
            try:
                return self._write(
                    before, draft, actor=actor, reason=reason, attach=attach, old=old
                )
            except VersionConflict as exc:
                conflict = exc
                time.sleep(random.random() * 0.002 * (attempt + 1))
        assert conflict is not None
        raise conflict

    def _write(
        self,
        before: TaskState,
        draft: TaskState,
        *,
        actor: str,
        reason: str | Callable[[TaskState], str],
        attach: Attach | None = None,
        old: dict[str, Any] | None = None,
    ) -> Written:
        """Settle ``draft`` and commit it over ``before`` (nothing if nothing changed);
        ``old``: ``before.to_dict()`` if the caller made it already."""
        now = self.clock()
        template = self.template(draft)
        step = settle(template, draft, now)
        draft.task.due_at = before.task.due_at  # a new due time alone is no change
        old = old if old is not None else before.to_dict()
        new = draft.to_dict()
        if new == old:
            return Written(before, step, False)
        if fingerprint.stamp(draft.task, template):  # a task from before fingerprints
            new["task"]["template_fingerprint"] = draft.task.template_fingerprint
        draft.task.updated_at = now
        draft.task.due_at = work.due_at(draft, step)
        new["task"]["updated_at"] = to_iso(now)
        new["task"]["due_at"] = to_iso(draft.task.due_at)
        self._commit(
            before, draft, step, actor=actor, reason=reason, attach=attach, rows=(old, new)
        )
        return Written(draft, step, True)

    def _commit(
        self,
        before: TaskState,
        draft: TaskState,
        step: NextStep | None,
        *,
        actor: str,
        reason: str | Callable[[TaskState], str],
        attach: Attach | None = None,
        rows: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> None:
        """One journaled commit of ``draft`` over ``before``, with its queue row; never
        over a task another definition of its template version made."""
        self.versions.check_made_by(before.task)
        now = draft.task.updated_at if rows is not None else self.clock()
        old, new = rows if rows is not None else (before.to_dict(), draft.to_dict())
        touched = [
            a for a in draft.actions if old["actions"].get(str(a.seq)) != new["actions"][str(a.seq)]
        ]
        stamp = to_iso(now)
        for action in touched:
            action.updated_at = now
            new["actions"][str(action.seq)]["updated_at"] = stamp
        draft.task.version = new["task"]["version"] = before.task.version + 1
        text = reason(draft) if callable(reason) else reason
        entry = entry_for(old, new, at=now, actor=actor, reason=text)
        said = attach(draft, step) if attach is not None and step is not None else Attached()
        failpoints.hit("before_commit", draft.task.type)
        self.stores.commit(
            Commit(
                draft,
                before.task.version,
                touched,
                entry,
                said.session,
                said.messages,
                new,
                requeue=work.changed(old["task"], new["task"]),
                work=work.item_for(draft),
                remember=said.remember,
            )
        )
