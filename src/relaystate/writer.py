"""Every task change goes through here: read, change a copy, settle, journal, commit.

One place enforces the write rules for all callers: optimistic locking with re-read and
retry on conflict, derived fields recomputed by the machine, one journal entry holding
only the delta, task before messages in one commit, and no writing of state whose schema is
newer than this code.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from .errors import NotFound, SchemaTooNew, TemplateError, VersionConflict
from .journal import entry_for
from .machine import settle
from .model import SCHEMA_VERSION, Message, Session, TaskState, to_iso
from .next_step import NextStep
from .store.base import Commit, Store
from .templates import TaskTemplate

Change = Callable[[TaskState], bool | None]
"""Edits a draft in place; returns False to leave the task as it is."""

CONFLICT_ATTEMPTS = 16


class TaskWriter:
    def __init__(
        self,
        store: Store,
        templates: Mapping[str, TaskTemplate],
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
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

    def load(self, task_id: str, user_id: str | None) -> TaskState:
        state = self.store.load(task_id, user_id=user_id)
        if state is None:
            raise NotFound(f"no task {task_id}")
        return state

    def current(self, task_id: str, user_id: str | None) -> tuple[TaskState, NextStep]:
        """The stored state and its next step as of now, without writing anything."""
        state = self.load(task_id, user_id)
        step = settle(self.template(state), state.copy(), self.clock())
        return state, step

    def create(
        self,
        state: TaskState,
        *,
        actor: str,
        reason: str,
        session: Session | None = None,
        messages: Iterable[Message] = (),
    ) -> tuple[TaskState, NextStep]:
        now = self.clock()
        step = settle(self.template(state), state, now)
        state.task.version = 1
        state.task.created_at = state.task.updated_at = now
        entry = entry_for(None, state.to_dict(), at=now, actor=actor, reason=reason)
        self.store.commit(Commit(state, 0, list(state.actions), entry, session, list(messages)))
        return state, step

    def mutate(
        self,
        task_id: str,
        user_id: str | None,
        change: Change,
        *,
        actor: str,
        reason: str | Callable[[TaskState], str],
        session: Callable[[TaskState], Session | None] | None = None,
        messages: Callable[[TaskState], Iterable[Message]] | None = None,
    ) -> tuple[TaskState, NextStep, bool]:
        """Apply ``change`` to fresh state until it commits; returns (state, step, written)."""
        conflict: VersionConflict | None = None
        for attempt in range(CONFLICT_ATTEMPTS):
            before = self.load(task_id, user_id)
            template = self.template(before)
            old = before.to_dict()
            draft = TaskState.from_dict(old)
            if change(draft) is False:
                return before, settle(template, draft, self.clock()), False
            now = self.clock()
            step = settle(template, draft, now)
            new = draft.to_dict()
            touched = [
                a
                for a in draft.actions
                if old["actions"].get(str(a.seq)) != new["actions"][str(a.seq)]
            ]
            new_messages = list(messages(draft)) if messages is not None else []
            if not touched and new["task"] == old["task"] and not new_messages:
                return before, step, False
            stamp = to_iso(now)
            for action in touched:
                action.updated_at = now
                new["actions"][str(action.seq)]["updated_at"] = stamp
            draft.task.version = new["task"]["version"] = before.task.version + 1
            draft.task.updated_at = now
            new["task"]["updated_at"] = stamp
            text = reason(draft) if callable(reason) else reason
            entry = entry_for(old, new, at=now, actor=actor, reason=text)
            try:
                self.store.commit(
                    Commit(
                        draft,
                        before.task.version,
                        touched,
                        entry,
                        session(draft) if session is not None else None,
                        new_messages,
                    )
                )
            except VersionConflict as exc:
                conflict = exc
                time.sleep(random.random() * 0.002 * (attempt + 1))
                continue
            return draft, step, True
        assert conflict is not None
        raise conflict
