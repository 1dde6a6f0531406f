"""In-memory store for tests and demos: the same contract as SQLite, kept in dicts.

Values are copied in and out through their dict form, so callers can never alias stored
state, exactly as with a database.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import datetime

from ..errors import DuplicateKey, NotFound, VersionConflict
from ..model import (
    OPEN_ACTION_STATUSES,
    Action,
    JournalEntry,
    Message,
    Session,
    Snapshot,
    Task,
    TaskStatus,
    WorkerInfo,
)
from .base import Commit, Store


class InMemoryStore(Store):
    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._tasks: dict[str, dict[str, object]] = {}
        self._actions: dict[str, dict[str, object]] = {}
        self._keys: dict[str, str] = {}
        self._journal: dict[str, list[dict[str, object]]] = {}
        self._baselines: dict[str, dict[str, object]] = {}
        self._sessions: dict[str, dict[str, object]] = {}
        self._messages: dict[str, list[dict[str, object]]] = {}
        self._workers: dict[str, tuple[WorkerInfo, datetime | None]] = {}
        self._message_id = 0
        self._claims: dict[str, tuple[str, datetime]] = {}

    def commit(self, commit: Commit) -> None:
        task = commit.task
        with self._lock:
            current = self._tasks.get(task.id)
            actual = None if current is None else int(current["version"])  # type: ignore[call-overload]
            if commit.expected_version == 0:
                if current is not None:
                    raise VersionConflict(task.id, 0, actual)
            elif actual != commit.expected_version or current["user_id"] != task.user_id:  # type: ignore[index]
                raise VersionConflict(task.id, commit.expected_version, actual)
            for action in commit.actions:
                owner = self._keys.get(action.idempotency_key)
                if owner is not None and owner != action.id:
                    raise DuplicateKey(f"idempotency key {action.idempotency_key} is taken")
            self._tasks[task.id] = task.to_dict()
            for action in commit.actions:
                self._actions[action.id] = action.to_dict()
                self._keys[action.idempotency_key] = action.id
            self._journal.setdefault(task.id, []).append(commit.entry.to_dict())
            if commit.session is not None:
                self.put_session(commit.session)
            self.append_messages(commit.messages)

    def get_task(self, task_id: str, *, user_id: str | None) -> Task | None:
        with self._lock:
            row = self._tasks.get(task_id)
            if row is None or (user_id is not None and row["user_id"] != user_id):
                return None
            return Task.from_dict(row)

    def get_actions(self, task_id: str) -> list[Action]:
        with self._lock:
            rows = [Action.from_dict(a) for a in self._actions.values() if a["task_id"] == task_id]
        return sorted(rows, key=lambda a: a.seq)

    def list_tasks(
        self,
        user_id: str | None,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        wanted = {str(s) for s in statuses} if statuses is not None else None
        with self._lock:
            tasks = [
                Task.from_dict(t)
                for t in self._tasks.values()
                if (user_id is None or t["user_id"] == user_id)
                and (wanted is None or t["status"] in wanted)
            ]
        tasks.sort(key=lambda t: (t.updated_at, t.id), reverse=True)
        return tasks[:limit]

    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        wanted = {str(s) for s in OPEN_ACTION_STATUSES}
        with self._lock:
            rows = [
                Action.from_dict(a)
                for a in self._actions.values()
                if a["status"] in wanted and (after is None or str(a["id"]) > after)
            ]
        rows.sort(key=lambda a: a.id)
        return rows[:limit]

    def find_action(self, idempotency_key: str) -> Action | None:
        with self._lock:
            action_id = self._keys.get(idempotency_key)
            return None if action_id is None else Action.from_dict(self._actions[action_id])

    def journal(self, task_id: str, *, after_version: int = 0) -> list[JournalEntry]:
        with self._lock:
            rows = list(self._journal.get(task_id, []))
        entries = [JournalEntry.from_dict(r) for r in rows]
        return sorted((e for e in entries if e.version > after_version), key=lambda e: e.version)

    def baseline(self, task_id: str) -> Snapshot | None:
        with self._lock:
            row = self._baselines.get(task_id)
            return None if row is None else Snapshot.from_dict(row)

    def compact(self, snapshot: Snapshot) -> int:
        with self._lock:
            entries = self._journal.get(snapshot.task_id, [])
            kept = [e for e in entries if int(e["version"]) > snapshot.version]  # type: ignore[call-overload]
            self._journal[snapshot.task_id] = kept
            self._baselines[snapshot.task_id] = snapshot.to_dict()
            return len(entries) - len(kept)

    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        with self._lock:
            ids = [
                task_id
                for task_id, entries in self._journal.items()
                if any(JournalEntry.from_dict(e).at < cutoff for e in entries[:1])
            ]
        return sorted(ids)[:limit]

    def claim_for_recovery(
        self, task_ids: Sequence[str], owner: str, *, until: datetime, now: datetime
    ) -> list[str]:
        taken = []
        with self._lock:
            for task_id in task_ids:
                held = self._claims.get(task_id)
                if held is None or held[0] == owner or held[1] <= now:
                    self._claims[task_id] = (owner, until)
                    taken.append(task_id)
        return taken

    def release_recovery(self, owner: str) -> None:
        with self._lock:
            self._claims = {k: v for k, v in self._claims.items() if v[0] != owner}

    def put_session(self, session: Session) -> None:
        with self._lock:
            current = self._sessions.get(session.id)
            if current is not None and current["user_id"] != session.user_id:
                raise NotFound(f"no session {session.id} for user {session.user_id}")
            self._sessions[session.id] = session.to_dict()

    def get_session(self, session_id: str, *, user_id: str | None) -> Session | None:
        with self._lock:
            row = self._sessions.get(session_id)
            if row is None or (user_id is not None and row["user_id"] != user_id):
                return None
            return Session.from_dict(row)

    def append_messages(self, messages: Iterable[Message]) -> None:
        with self._lock:
            for message in messages:
                self._message_id += 1
                row = message.to_dict()
                row["id"] = self._message_id
                self._messages.setdefault(message.session_id, []).append(row)

    def messages(self, session_id: str, *, user_id: str | None, limit: int = 50) -> list[Message]:
        with self._lock:
            rows = [
                Message.from_dict(m)
                for m in self._messages.get(session_id, [])
                if user_id is None or m["user_id"] == user_id
            ]
        return rows[-limit:] if limit > 0 else []

    def register_worker(self, worker: WorkerInfo) -> None:
        with self._lock:
            self._workers[worker.id] = (worker, None)

    def deregister_worker(self, worker_id: str, at: datetime) -> None:
        with self._lock:
            info = self._workers.get(worker_id)
            if info is not None:
                self._workers[worker_id] = (info[0], at)

    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        with self._lock:
            return frozenset(
                w for w in worker_ids if w in self._workers and self._workers[w][1] is not None
            )
