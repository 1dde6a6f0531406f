"""In-memory backend for tests and demos: the same contract as SQLite, kept in dicts.

Values are copied in and out through their dict form, so callers can never alias stored
state, exactly as with a database. One lock makes every commit atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from ..errors import DuplicateKey, NotFound, RepeatedRequest, SessionConflict, VersionConflict
from ..model import (
    OPEN_ACTION_STATUSES,
    Action,
    ApiKey,
    JournalEntry,
    Message,
    Session,
    Snapshot,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
    WorkerStatus,
    WorkItem,
    clone,
    to_iso,
)
from ..scope import Scope
from .roles import MEMORY_IN_COMMIT, ONE_READ_TURN, TURN_READ, Backend, Commit, one_turn
from .sqlite.connection import Read, Tx
from .sqlite.memories import SQLiteMemories, private_database
from .sqlite.remembered import remember_in
from .sqlite.working import SQLiteWorkingMemory
from .turn_memory import Remember

Row = dict[str, object]


class InMemoryStore(Backend):
    capabilities = frozenset({ONE_READ_TURN, MEMORY_IN_COMMIT})

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.RLock()
        self._tasks: dict[str, Row] = {}
        self._actions: dict[str, dict[int, Row]] = {}
        self._keys: dict[str, tuple[str, int]] = {}
        self._journal: dict[str, list[Row]] = {}
        self._baselines: dict[str, Row] = {}
        self._sessions: dict[str, Row] = {}
        self._messages: dict[str, list[Row]] = {}
        self._said: dict[tuple[str, str], tuple[str, int]] = {}
        """(user, request key) -> (session, message number) of the words said with it."""
        self._workers: dict[str, tuple[WorkerInfo, datetime | None]] = {}
        self._beats: dict[str, tuple[str, datetime]] = {}
        self._work: dict[str, WorkItem] = {}
        self._claims: dict[str, tuple[str, datetime]] = {}
        self._keys_by_id: dict[str, ApiKey] = {}
        self._memory_db: tuple[Tx, Read, Callable[[], None]] | None = None

    def _private(self) -> tuple[Tx, Read, Callable[[], None]]:
        """Memory lives in a private in-memory SQLite database, made on first use."""
        with self._lock:
            if self._memory_db is None:
                self._memory_db = private_database()
            return self._memory_db

    @property
    def memories(self) -> SQLiteMemories:
        tx, read, _ = self._private()
        return SQLiteMemories(tx, read)

    @property
    def working(self) -> SQLiteWorkingMemory:
        tx, read, _ = self._private()
        return SQLiteWorkingMemory(tx, read)

    def close(self) -> None:
        with self._lock:
            if self._memory_db is not None:
                self._memory_db[2]()
                self._memory_db = None

    # -- tasks, actions, journal -------------------------------------------------------
    def commit(self, commit: Commit) -> None:
        task = commit.task
        with self._lock:
            current = self._tasks.get(task.id)
            actual = None if current is None else _int(current["version"])
            if commit.expected_version == 0:
                if current is not None:
                    raise VersionConflict(task.id, 0, actual)
            elif actual != commit.expected_version or current["user_id"] != task.user_id:  # type: ignore[index]
                raise VersionConflict(task.id, commit.expected_version, actual)
            for action in commit.actions:
                owner = self._keys.get(action.idempotency_key)
                if owner is not None and owner != (task.id, action.seq):
                    raise DuplicateKey(f"idempotency key {action.idempotency_key} is taken")
            if commit.session is not None:
                self._check_session(commit.session)
            self._check_keys(commit.messages)
            self._tasks[task.id] = clone(commit.task_row())
            rows = self._actions.setdefault(task.id, {})
            for action in commit.actions:
                rows[action.seq] = clone(commit.action_row(action))
                self._keys[action.idempotency_key] = (task.id, action.seq)
            self._journal.setdefault(task.id, []).append(commit.entry.to_dict())
            if commit.requeue:
                self._requeue(task.id, commit.work)
            self._write(commit.session, commit.messages)
            if commit.remember is not None:
                self._remember(commit.remember, commit.messages, task, commit.entry.at)

    def _remember(
        self,
        remember: Remember,
        messages: Sequence[Message],
        task: Task | None,
        at: datetime | None,
    ) -> None:
        """The turn's memory, on the private database, while the store's lock is held (no
        reader sees the turn without it)."""
        tx, _, _ = self._private()
        with tx() as db:
            remember_in(db, remember, messages, task, at)

    def _state(self, task_id: str, scope: Scope) -> TaskState | None:
        row = self._tasks.get(task_id)
        if row is None or not scope.admits(str(row["user_id"])):
            return None
        actions = self._actions.get(task_id, {})
        return TaskState(
            Task.from_dict(row), [Action.from_dict(actions[s]) for s in sorted(actions)]
        )

    def load(self, task_id: str, scope: Scope) -> TaskState | None:
        with self._lock:
            return self._state(task_id, scope)

    def load_many(
        self,
        task_ids: Sequence[str],
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
    ) -> list[TaskState]:
        wanted = None if statuses is None else {str(s) for s in statuses}
        with self._lock:
            found = [self._state(t, scope) for t in dict.fromkeys(task_ids)]
        return [s for s in found if s is not None and (wanted is None or s.task.status in wanted)]

    def list_tasks(
        self,
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        wanted = {str(s) for s in statuses} if statuses is not None else None
        with self._lock:
            tasks = [
                Task.from_dict(t)
                for t in self._tasks.values()
                if scope.admits(str(t["user_id"])) and (wanted is None or t["status"] in wanted)
            ]
        tasks.sort(key=lambda t: (t.updated_at, t.id), reverse=True)
        return tasks[: max(limit, 0)]

    def find_action(self, idempotency_key: str, scope: Scope) -> Action | None:
        with self._lock:
            where = self._keys.get(idempotency_key)
            if where is None or self._state(where[0], scope) is None:
                return None
            return Action.from_dict(self._actions[where[0]][where[1]])

    def get_action(self, action_id: str, scope: Scope) -> Action | None:
        with self._lock:
            for task_id, rows in self._actions.items():
                for row in rows.values():
                    if row["id"] == action_id:
                        return (
                            None if self._state(task_id, scope) is None else Action.from_dict(row)
                        )
        return None

    def journal(self, task_id: str, scope: Scope, *, after_version: int = 0) -> list[JournalEntry]:
        with self._lock:
            if self._state(task_id, scope) is None:
                return []
            rows = list(self._journal.get(task_id, []))
        entries = [JournalEntry.from_dict(r) for r in rows]
        return sorted((e for e in entries if e.version > after_version), key=lambda e: e.version)

    def baseline(self, task_id: str, scope: Scope) -> Snapshot | None:
        with self._lock:
            row = self._baselines.get(task_id)
            if row is None or self._state(task_id, scope) is None:
                return None
            return Snapshot.from_dict(row)

    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        wanted = {str(s) for s in OPEN_ACTION_STATUSES}
        with self._lock:
            rows = [
                Action.from_dict(a)
                for actions in self._actions.values()
                for a in actions.values()
                if a["status"] in wanted and (after is None or str(a["id"]) > after)
            ]
        rows.sort(key=lambda a: a.id)
        return rows[: max(limit, 0)]

    def extend_leases(self, owner: str, until: datetime, *, now: datetime) -> int:
        stamp, count, live = to_iso(until), 0, str(to_iso(now))
        with self._lock:
            for actions in self._actions.values():
                for row in actions.values():
                    held = row["lease_owner"] == owner and row["status"] in ("running", "unknown")
                    lease = str(row["lease_expires_at"] or "")
                    if held and live < lease < str(stamp):
                        row["lease_expires_at"] = stamp
                        count += 1
        return count

    def compact(self, snapshot: Snapshot) -> int:
        with self._lock:
            entries = self._journal.get(snapshot.task_id, [])
            kept = [e for e in entries if _int(e["version"]) > snapshot.version]
            self._journal[snapshot.task_id] = kept
            held = self._baselines.get(snapshot.task_id)
            if held is None or _int(held["version"]) < snapshot.version:
                self._baselines[snapshot.task_id] = snapshot.to_dict()
            return len(entries) - len(kept)

    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        with self._lock:
            ids = [
                task_id
                for task_id, entries in self._journal.items()
                if any(JournalEntry.from_dict(e).at < cutoff for e in entries[:1])
            ]
        return sorted(ids)[: max(limit, 0)]

    # -- sessions and messages ---------------------------------------------------------
    def _check_session(self, session: Session) -> None:
        """Another user's session id is NotFound; one written since this copy was read is
        a SessionConflict (checked before anything of the commit is written)."""
        current = self._sessions.get(session.id)
        if current is not None and current["user_id"] != session.user_id:
            raise NotFound(f"no session {session.id} for user {session.user_id}")
        if current is not None and _int(current.get("version", 0)) != session.version:
            raise SessionConflict(session.id, session.version)

    def _write(self, session: Session | None, messages: Sequence[Message]) -> None:
        if session is not None:
            self._sessions[session.id] = session.next_stored()
            session.version += 1
        for message in messages:
            rows = self._messages.setdefault(message.session_id, [])
            message.id = (_int(rows[-1]["id"]) if rows else 0) + 1
            rows.append({**message.to_dict(), "request_key": message.request_key})
            if message.request_key is not None:
                self._said[(message.user_id, message.request_key)] = (
                    message.session_id,
                    message.id,
                )

    def _check_keys(self, messages: Sequence[Message]) -> None:
        for message in messages:
            if message.request_key is not None and (
                (message.user_id, message.request_key) in self._said
            ):
                raise RepeatedRequest(message.request_key)

    def write(
        self,
        session: Session | None,
        messages: Sequence[Message] = (),
        *,
        remember: Remember | None = None,
    ) -> None:
        with self._lock:
            if session is not None:
                self._check_session(session)
            self._check_keys(messages)
            self._write(session, messages)
            if remember is not None:
                self._remember(remember, messages, None, None)

    def said(self, user_id: str, request_key: str) -> list[Message]:
        with self._lock:
            found = self._said.get((user_id, request_key))
            if found is None:
                return []
            session_id, number = found
            rows = [r for r in self._messages[session_id] if _int(r["id"]) >= number]
            return one_turn([Message.from_dict(r) for r in rows[:TURN_READ]])

    def get_session(self, session_id: str, scope: Scope) -> Session | None:
        with self._lock:
            row = self._sessions.get(session_id)
            if row is None or not scope.admits(str(row["user_id"])):
                return None
            return Session.from_dict(row)

    def messages(
        self, session_id: str, scope: Scope, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        with self._lock:
            rows = [
                Message.from_dict(m)
                for m in self._messages.get(session_id, [])
                if scope.admits(str(m["user_id"])) and (before is None or _int(m["id"]) < before)
            ]
        return rows[-limit:] if limit > 0 else []

    # -- workers and recovery claims ----------------------------------------------------
    def claim_for_recovery(
        self,
        task_ids: Sequence[str],
        owner: str,
        *,
        until: datetime,
        now: datetime,
        gone: Collection[str] = (),
    ) -> list[str]:
        taken = []
        with self._lock:
            for task_id in task_ids:
                held = self._claims.get(task_id)
                if held is None or held[0] == owner or held[1] <= now or held[0] in gone:
                    self._claims[task_id] = (owner, until)
                    taken.append(task_id)
        return taken

    def release_recovery(self, owner: str) -> None:
        with self._lock:
            self._claims = {k: v for k, v in self._claims.items() if v[0] != owner}

    def recovery_claimants(self, now: datetime) -> frozenset[str]:
        with self._lock:
            return frozenset(o for o, until in self._claims.values() if until > now)

    def add_key(self, key: ApiKey) -> None:
        with self._lock:
            if key.id in self._keys_by_id:
                raise DuplicateKey(f"API key id {key.id} is taken")
            self._keys_by_id[key.id] = key

    def get_key(self, key_id: str) -> ApiKey | None:
        with self._lock:
            return self._keys_by_id.get(key_id)

    def list_keys(self, user_id: str | None = None) -> list[ApiKey]:
        with self._lock:
            keys = [k for k in self._keys_by_id.values() if user_id in (None, k.user_id)]
        return sorted(keys, key=lambda k: (k.created_at, k.id))

    def revoke_keys(
        self, *, at: datetime, key_id: str | None = None, user_id: str | None = None
    ) -> int:
        if key_id is None and user_id is None:
            return 0
        with self._lock:
            hit = [
                k
                for k in self._keys_by_id.values()
                if k.active and key_id in (None, k.id) and user_id in (None, k.user_id)
            ]
            for k in hit:
                self._keys_by_id[k.id] = replace(k, revoked_at=at)
        return len(hit)

    def register_worker(self, worker: WorkerInfo) -> None:
        with self._lock:
            self._workers[worker.id] = (worker, None)

    def deregister_worker(self, worker: WorkerInfo, at: datetime) -> None:
        with self._lock:
            known = self._workers.get(worker.id)
            self._workers[worker.id] = (known[0] if known else worker, at)

    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        with self._lock:
            return frozenset(
                w for w in worker_ids if w in self._workers and self._workers[w][1] is not None
            )

    def heartbeat(self, worker: WorkerInfo, at: datetime, *, role: str = "worker") -> None:
        with self._lock:
            if worker.id not in self._workers:
                self._workers[worker.id] = (worker, None)
            self._beats[worker.id] = (role, at)

    def workers(self, *, include_stopped: bool = False) -> list[WorkerStatus]:
        with self._lock:
            out = []
            for wid, (info, stopped) in self._workers.items():
                if stopped is not None and not include_stopped:
                    continue
                role, beat = self._beats.get(wid, ("worker", None))
                held = sum(1 for w in self._work.values() if w.owner == wid)
                out.append(WorkerStatus(info, role, beat, stopped, held))
        return sorted(out, key=lambda w: w.info.started_at)

    # -- the work queue ---------------------------------------------------------------
    def _requeue(self, task_id: str, item: WorkItem | None) -> None:
        old = self._work.get(task_id)
        if item is None:
            self._work.pop(task_id, None)
        elif old is None:
            self._work[task_id] = item
        else:
            self._work[task_id] = replace(item, owner=old.owner, lease_until=old.lease_until)

    def claim_work(
        self,
        owner: str,
        *,
        build: str,
        runnable: Mapping[str, Collection[int]],
        now: datetime,
        until: datetime,
        limit: int = 1,
        gone: Collection[str] = (),
    ) -> list[WorkItem]:
        with self._lock:
            free = [
                w
                for w in self._work.values()
                if (w.due_at <= now or w.owner in gone)
                and (
                    w.owner is None
                    or w.owner in gone
                    or (w.lease_until is not None and w.lease_until <= now)
                )
                and w.build in (None, build)
                and w.template_version in runnable.get(w.type, ())
            ]
            taken = sorted(free, key=lambda w: w.due_at)[: max(limit, 0)]
            for w in taken:
                self._work[w.task_id] = replace(w, owner=owner, lease_until=until)
            return [self._work[w.task_id] for w in taken]

    def enqueue_work(self, items: Sequence[WorkItem]) -> int:
        with self._lock:
            new = [w for w in items if w.task_id not in self._work]
            for w in new:
                self._work[w.task_id] = w
            return len(new)

    def release_work(self, task_id: str, owner: str, *, due_at: datetime | None = None) -> None:
        with self._lock:
            w = self._work.get(task_id)
            if w is not None and w.owner == owner:
                due = due_at or w.due_at
                self._work[task_id] = replace(w, owner=None, lease_until=None, due_at=due)

    def extend_work(self, owner: str, until: datetime) -> int:
        with self._lock:
            mine = [w for w in self._work.values() if w.owner == owner]
            for w in mine:
                self._work[w.task_id] = replace(w, lease_until=until)
            return len(mine)

    def work_holders(self, now: datetime) -> frozenset[str]:
        with self._lock:
            return frozenset(
                w.owner
                for w in self._work.values()
                if w.owner is not None and w.lease_until is not None and w.lease_until > now
            )

    def queued_work(self, *, limit: int = 1000) -> list[WorkItem]:
        with self._lock:
            return sorted(self._work.values(), key=lambda w: (w.due_at, w.task_id))[:limit]


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value
