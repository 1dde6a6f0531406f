"""Every task change goes through here: read, change a copy, settle, journal, commit.

One place enforces the write rules for all callers: optimistic locking with re-read and
retry on conflict, derived fields recomputed by the machine, one journal entry holding
only the delta, the turn's session and messages in the same commit as the task, and no
writing of state whose schema is newer than this code. A caller that has just read the
task passes it as ``known``: the first attempt starts from it instead of reading again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from . import failpoints
from .errors import NotFound, SchemaTooNew, TemplateError, VersionConflict
from .journal import entry_for
from .machine import settle
from .model import SCHEMA_VERSION, Message, Session, TaskState, to_iso
from .next_step import NextStep
from .scope import Scope
from .store.bundle import Stores
from .store.roles import Commit
from .templates import TaskTemplate

Change = Callable[[TaskState], bool | None]
"""Edits a draft in place; returns False to leave the task as it is."""
Attach = Callable[[TaskState, NextStep], tuple[Session | None, list[Message]]]
"""What else a commit carries (the turn's session and messages), given the settled draft."""

CONFLICT_ATTEMPTS = 16


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
        templates: Mapping[str, TaskTemplate],
        clock: Callable[[], datetime],
    ) -> None:
        self.stores = stores
        self.templates = templates
        self.clock = clock

    def template(self, state: TaskState) -> TaskTemplate:
        task = state.task
        template = self.templates.get(task.type)
        if template is None:
            raise TemplateError(f"task {task.id} is of type {task.type!r}, unknown here")
        if task.template_version > template.version:
            raise TemplateError(
                f"task {task.id} was started by template {task.type!r} version "
                f"{task.template_version}; this build knows version {template.version}"
            )
        if task.schema_version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"task {task.id} has state schema {task.schema_version}; this build "
                f"understands {SCHEMA_VERSION} and will not overwrite it"
            )
        return template

    def load(self, task_id: str, scope: Scope) -> TaskState:
        state = self.stores.tasks.load(task_id, scope)
        if state is None:
            raise NotFound(f"no task {task_id}")
        return state

    def next_step(self, state: TaskState) -> NextStep:
        """The step stored state implies as of now, computed on a copy (nothing written)."""
        return settle(self.template(state), state.copy(), self.clock())

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
        step = settle(self.template(state), state, now)
        state.task.version = 1
        state.task.created_at = state.task.updated_at = now
        for action in state.actions:
            action.created_at = action.updated_at = now
        text = reason(state) if callable(reason) else reason
        entry = entry_for(None, state.to_dict(), at=now, actor=actor, reason=text)
        session, messages = attach(state, step) if attach is not None else (None, [])
        failpoints.hit("before_commit", state.task.type)
        self.stores.commit(Commit(state, 0, list(state.actions), entry, session, messages))
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
            before = known if known is not None and attempt == 0 else self.load(task_id, scope)
            template = self.template(before)
            old = before.to_dict()
            draft = TaskState.from_dict(old)
            if change(draft) is False:
                return Written(before, settle(template, draft, self.clock()), False)
            now = self.clock()
            step = settle(template, draft, now)
            new = draft.to_dict()
            touched = [
                a
                for a in draft.actions
                if old["actions"].get(str(a.seq)) != new["actions"][str(a.seq)]
            ]
            if not touched and new["task"] == old["task"]:
                return Written(before, step, False)
            stamp = to_iso(now)
            for action in touched:
                action.updated_at = now
                new["actions"][str(action.seq)]["updated_at"] = stamp
            draft.task.version = new["task"]["version"] = before.task.version + 1
            draft.task.updated_at = now
            new["task"]["updated_at"] = stamp
            text = reason(draft) if callable(reason) else reason
            entry = entry_for(old, new, at=now, actor=actor, reason=text)
            session, messages = attach(draft, step) if attach is not None else (None, [])
            failpoints.hit("before_commit", draft.task.type)
            try:
                self.stores.commit(
                    Commit(draft, before.task.version, touched, entry, session, messages, new)
                )
            except VersionConflict as exc:
                conflict = exc
                time.sleep(random.random() * 0.002 * (attempt + 1))
                continue
            return Written(draft, step, True)
        assert conflict is not None
        raise conflict
