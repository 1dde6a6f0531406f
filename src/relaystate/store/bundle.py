"""The roles a runtime writes to and reads from, bound to the backends that play them.

Usually one database plays every role (``Stores.of(SQLiteStore(...))``). With a session
cache, Redis plays the session role in front of that database: the task commit still writes
the session and messages durably in its transaction, and the cache is told afterwards.

A turn's memory (a :class:`~relaystate.store.turn_memory.Remember` on the commit) rides in
the same transaction where the database holding the messages keeps memory too and says so
(``MEMORY_IN_COMMIT``); otherwise it is written right after the commit, through the memory
roles, and a failure there is logged (the turn happened; memory is derived from it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from ..errors import RelaystateError, StoreCorrupt, StoreNotDatabase, StoreURLError
from ..model import OPEN_TASK_STATUSES, Message, Session, Task, TaskState
from ..scope import Scope
from .roles import (
    MEMORY_IN_COMMIT,
    Backend,
    Commit,
    Coordination,
    Identities,
    Memories,
    SchemaAdmin,
    SessionStore,
    TaskStore,
    WorkingMemory,
)
from .turn_memory import Remember, turn_rows

log = logging.getLogger("relaystate.memory")

DAMAGED = (StoreCorrupt, StoreNotDatabase)
"""Errors no later turn recovers from (a damaged page, a file that is no database now):
memory written after a commit raises them rather than logging them."""


class Stores:
    """One object per role: ``tasks``, ``sessions``, ``coordination``, ``identities`` (the
    HTTP API's keys), ``memories`` (long-term memory), ``working`` (working memory and the
    memory graph) and ``schema``."""

    def __init__(
        self,
        tasks: TaskStore,
        sessions: SessionStore,
        coordination: Coordination,
        schema: SchemaAdmin | None = None,
        identities: Identities | None = None,
        memories: Memories | None = None,
        working: WorkingMemory | None = None,
        *,
        memory_in_commit: bool = False,
    ) -> None:
        self.tasks = tasks
        self.sessions = sessions
        self.coordination = coordination
        self.schema = schema
        self.identities = identities
        self.memories = memories
        self.working = working
        self.url = tasks.url
        # The commit can carry the turn's session and messages when they live in the same
        # database as the task (directly, or behind a cache of that database).
        self._shared = _same(sessions, tasks)
        self._sessions_with_tasks = self._shared or _same(getattr(sessions, "durable", None), tasks)
        self.memory_in_commit = memory_in_commit and self._sessions_with_tasks
        """A turn's memory commits with it (else it is written right after the commit)."""

    @classmethod
    def of(cls, backend: Backend, *, sessions: SessionStore | None = None) -> Stores:
        """One backend in every role it plays (a cache may take the session role)."""
        if not isinstance(backend, Backend):
            raise StoreURLError(f"{type(backend).__name__} cannot hold tasks and sessions")
        schema = backend if isinstance(backend, SchemaAdmin) else None
        memories = getattr(backend, "memories", None)
        working = getattr(backend, "working", None)
        inline = MEMORY_IN_COMMIT in getattr(backend, "capabilities", frozenset())
        return cls(
            backend,
            sessions or backend,
            backend,
            schema,
            backend,
            memories,
            working,
            memory_in_commit=inline and memories is not None and working is not None,
        )

    def commit(self, commit: Commit) -> None:
        """The task change, then what its turn said: one transaction where one database
        holds both; else the task first, then the session and messages (invariant 2)."""
        remember = commit.remember
        if remember is not None and not self.memory_in_commit:
            commit = replace(commit, remember=None)
        if self._sessions_with_tasks:
            self.tasks.commit(commit)
            if not self._shared and (commit.session or commit.messages):
                self.sessions.committed(commit.session, commit.messages)
        else:
            self.tasks.commit(replace(commit, session=None, messages=[]))
            self.write_session(commit.session, commit.messages)
        if remember is not None and commit.remember is None:
            self._remember_after(remember, commit.messages, commit.task, commit.entry.at)

    def write_session(
        self,
        session: Session | None,
        messages: Sequence[Message],
        *,
        remember: Remember | None = None,
    ) -> None:
        """A turn that changed no task: its session and messages in one transaction (and
        with ``remember``, their memory items)."""
        if session is None and not messages:
            return
        if remember is not None and self.memory_in_commit:
            self.sessions.write(session, messages, remember=remember)
            return
        self.sessions.write(session, messages)
        if remember is not None:
            self._remember_after(remember, messages, None, None)

    def _remember_after(
        self,
        remember: Remember,
        messages: Sequence[Message],
        task: Task | None,
        at: datetime | None,
    ) -> None:
        """A committed turn's memory, written after its commit by a backend that cannot
        write it inside; a failure is logged: the turn happened, and the next catches up
        (its facts are compared with the task's slots then). A damaged store is not such a
        failure: it is raised, as every other command that reads the page will."""
        try:
            rows = turn_rows(remember, messages, task, at)
            if rows.items and self.memories is not None:
                self.memories.put_memories(rows.items, at=at or messages[0].created_at)
                if rows.vectors is not None:
                    embedder, blobs = rows.vectors
                    pairs = [(i.id, b) for i, b in zip(rows.items, blobs, strict=True)]
                    user = rows.items[0].user_id
                    self.memories.put_vectors(user, remember.namespace, embedder, pairs)
            if rows.facts and self.working is not None:
                self.working.record_facts(rows.facts)
        except DAMAGED:
            raise
        except RelaystateError as exc:
            log.warning("a turn was not recorded in memory: %s", exc)

    def said(self, user_id: str, request_key: str) -> list[Message]:
        """The turn a request key committed: the user's words and the replies (or [])."""
        return self.sessions.said(user_id, request_key)

    def read_turn(self, session_id: str, scope: Scope) -> tuple[Session | None, list[TaskState]]:
        """A session and its open tasks, in one read where one database holds both (with a
        cache in front, the database's copy is the truth and one round trip beats two)."""
        if self._sessions_with_tasks and isinstance(self.tasks, Backend):
            return self.tasks.read_turn(session_id, scope)
        session = self.sessions.get_session(session_id, scope)
        if session is None or not session.active_task_ids:
            return session, []
        states = self.tasks.load_many(session.active_task_ids, scope, statuses=OPEN_TASK_STATUSES)
        return session, states

    def close(self) -> None:
        """Close every backend once (a cache closes before the database behind it)."""
        seen: list[object] = []
        for role in (self.sessions, self.tasks, self.coordination, self.schema, self.identities):
            if role is not None and not any(role is s for s in seen):
                seen.append(role)
                role.close()


def _same(a: object, b: object) -> bool:
    return a is b
