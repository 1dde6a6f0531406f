"""Embedded store: one SQLite file in WAL mode, zero set-up.

``synchronous=FULL`` by default so that a committed turn survives a power cut; pass
``?synchronous=normal`` in the URL to trade that for speed. Every write takes the database
lock up front (``BEGIN IMMEDIATE``) so concurrent processes queue instead of failing
half-way; optimistic locking on the task version decides who wins. The schema comes from
the versioned steps in ``schema/sqlite/``, applied on open.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from ...errors import DuplicateKey, NotFound, RepeatedRequest, SessionConflict, VersionConflict
from ...model import (
    OPEN_TASK_STATUSES,
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
    from_iso,
    to_iso,
)
from ...scope import Scope
from .. import schema
from ..roles import (
    DURABLE,
    MEMORY_IN_COMMIT,
    SHARED,
    TURN_READ,
    Backend,
    Commit,
    SchemaAdmin,
    one_turn,
)
from ..turn_memory import Remember
from ..work_rows import WORK_COLUMNS, claimable, work_item
from ..work_rows import worker_status as _worker_status
from .connection import statements
from .files import check_pages, check_tables, connect, finish, rollback, translated
from .memories import SQLiteMemories
from .remembered import remember_in
from .working import SQLiteWorkingMemory


def _requeue(db: sqlite3.Connection, task_id: str, item: WorkItem | None) -> None:
    """The task's row in the work queue as its commit leaves it (a claim on it is kept)."""
    if item is None:
        db.execute("DELETE FROM work WHERE task_id = ?", (task_id,))
        return
    db.execute(
        "INSERT INTO work (task_id, user_id, type, template_version, build, due_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET"
        " user_id = excluded.user_id, type = excluded.type,"
        " template_version = excluded.template_version, build = excluded.build,"
        " due_at = excluded.due_at",
        (
            item.task_id,
            item.user_id,
            item.type,
            item.template_version,
            item.build,
            to_iso(item.due_at),
        ),
    )


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class SQLiteStore(Backend, SchemaAdmin):
    capabilities = frozenset({DURABLE, SHARED, MEMORY_IN_COMMIT})

    def __init__(
        self, path: str | Path, *, synchronous: str = "FULL", migrate: bool = True
    ) -> None:
        if synchronous.upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError("synchronous must be FULL, NORMAL or EXTRA")
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = connect(self.path, isolation_level=None, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA busy_timeout = 60000")
        try:
            check_tables(self._db, self.path)  # another application's file: before any write
            check_pages(self._db, self.path)  # a damaged page: before any write too
            self._use_wal()
            self._db.execute(f"PRAGMA synchronous = {synchronous.upper()}")
            self._schema = _Schema(self)
            if migrate:
                self.upgrade_schema()
        except BaseException:
            self._db.close()
            raise

    def _use_wal(self) -> None:
        """Switch the file to WAL. Processes opening a new file at once race for this, and
        SQLite answers "locked" at once instead of waiting (busy_timeout does not apply)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def schema_status(self) -> schema.SchemaStatus:
        with self._lock, translated(self.path):
            return schema.status(self._schema)

    def upgrade_schema(self) -> list[schema.SchemaStep]:
        with self._lock, translated(self.path):
            return schema.upgrade(self._schema)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, translated(self.path):  # a full disk, a read-only file: typed
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                rollback(self._db)
                raise
            finish(self._db)

    def _read(self, sql: str, args: Sequence[object] = ()) -> list[tuple[object, ...]]:
        with self._lock, translated(self.path):  # a damaged page read: typed, as in a write
            return self._db.execute(sql, args).fetchall()

    @contextmanager
    def _snapshot(self) -> Iterator[sqlite3.Connection]:
        """Several reads that see one committed state (a read transaction: no lock, no sync)."""
        with self._lock, translated(self.path):
            self._db.execute("BEGIN")
            try:
                yield self._db
            finally:
                self._db.execute("COMMIT")

    # -- tasks, actions, journal -------------------------------------------------------
    def commit(self, commit: Commit) -> None:
        task = commit.task
        row = (task.user_id, task.type, str(task.status), task.version, to_iso(task.updated_at))
        with self._tx() as db:
            if commit.expected_version == 0:
                try:
                    db.execute(
                        "INSERT INTO tasks (user_id, type, status, version, updated_at, data, id)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (*row, _dumps(commit.task_row()), task.id),
                    )
                except sqlite3.IntegrityError:
                    raise VersionConflict(task.id, 0, self._version(task.id)) from None
            else:
                cur = db.execute(
                    "UPDATE tasks SET user_id = ?, type = ?, status = ?, version = ?,"
                    " updated_at = ?, data = ? WHERE id = ? AND version = ? AND user_id = ?",
                    (
                        *row,
                        _dumps(commit.task_row()),
                        task.id,
                        commit.expected_version,
                        task.user_id,
                    ),
                )
                if cur.rowcount != 1:
                    raise VersionConflict(task.id, commit.expected_version, self._version(task.id))
            for action in commit.actions:
                try:
                    db.execute(
                        "INSERT INTO actions (id, task_id, seq, status, idempotency_key,"
                        " lease_expires_at, data) VALUES (?, ?, ?, ?, ?, ?, ?)"
                        " ON CONFLICT (id) DO UPDATE SET status = excluded.status,"
                        " lease_expires_at = excluded.lease_expires_at, data = excluded.data",
                        (
                            action.id,
                            action.task_id,
                            action.seq,
                            str(action.status),
                            action.idempotency_key,
                            to_iso(action.lease_expires_at),
                            _dumps(commit.action_row(action)),
                        ),
                    )
                except sqlite3.IntegrityError as exc:
                    raise DuplicateKey(
                        f"action {action.id}: idempotency key {action.idempotency_key} "
                        f"or seq {action.seq} is taken ({exc})"
                    ) from None
            entry = commit.entry
            db.execute(
                "INSERT INTO journal (task_id, version, at, data) VALUES (?, ?, ?, ?)",
                (entry.task_id, entry.version, to_iso(entry.at), _dumps(entry.to_dict())),
            )
            if commit.requeue:
                _requeue(db, task.id, commit.work)
            if commit.session is not None:
                self._put_session(db, commit.session)
            self._append(db, commit.messages)
            if commit.remember is not None:
                remember_in(db, commit.remember, commit.messages, task, entry.at)
        if commit.session is not None:
            commit.session.version += 1  # committed: this copy is now at the stored version

    def _version(self, task_id: str) -> int | None:
        row = self._db.execute("SELECT version FROM tasks WHERE id = ?", (task_id,)).fetchone()
        return None if row is None else int(row[0])

    def load(self, task_id: str, scope: Scope) -> TaskState | None:
        with self._snapshot() as db:
            found = _states(db, [task_id], scope, None)
        return found[0] if found else None

    def load_many(
        self,
        task_ids: Sequence[str],
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
    ) -> list[TaskState]:
        if not task_ids:
            return []
        with self._snapshot() as db:
            return _states(db, task_ids, scope, statuses)

    def read_turn(self, session_id: str, scope: Scope) -> tuple[Session | None, list[TaskState]]:
        """The session and the open tasks it lists, with their actions: one statement (so one
        consistent read, with no transaction to open and close around it)."""
        rows = self._read(_READ_TURN, (session_id, *_owner(scope)))
        if not rows:
            return None, []
        session = Session.from_dict(json.loads(str(rows[0][0])))
        found = {}
        for task, actions in json.loads(str(rows[0][1])):
            state = TaskState(Task.from_dict(task), [Action.from_dict(a) for a in actions])
            found[state.task.id] = state
        return session, [found[t] for t in dict.fromkeys(session.active_task_ids) if t in found]

    def list_tasks(
        self,
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        where, args = [], []
        if not scope.is_admin:
            where.append("user_id = ?")
            args.append(scope.user_id)
        if statuses is not None:
            where.append(f"status IN ({','.join('?' * len(statuses))})" if statuses else "0")
            args.extend(str(s) for s in statuses)
        sql = "SELECT data FROM tasks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        rows = self._read(sql, [*args, max(limit, 0)])
        return [Task.from_dict(json.loads(str(r[0]))) for r in rows]

    def task_ids_starting(self, prefix: str, scope: Scope, *, limit: int = 2) -> list[str]:
        rows = self._read(
            "SELECT id FROM tasks WHERE substr(id, 1, ?) = ? AND (? OR user_id = ?)"
            " ORDER BY id LIMIT ?",
            (len(prefix), prefix, *_owner(scope), max(limit, 0)),
        )
        return [str(r[0]) for r in rows]

    def count_tasks(self, scope: Scope) -> dict[TaskStatus, int]:
        rows = self._read(
            "SELECT status, COUNT(*) FROM tasks WHERE (? OR user_id = ?) GROUP BY status",
            _owner(scope),
        )
        return {TaskStatus(str(status)): int(str(n)) for status, n in rows}

    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        rows = self._read(
            "SELECT data FROM actions WHERE status IN ('pending', 'running', 'unknown')"
            " AND id > ? ORDER BY id LIMIT ?",
            (after or "", limit),
        )
        return [Action.from_dict(json.loads(str(r[0]))) for r in rows]

    def extend_leases(self, owner: str, until: datetime, *, now: datetime) -> int:
        stamp = to_iso(until)
        with self._tx() as db:
            cur = db.execute(
                "UPDATE actions SET lease_expires_at = ?,"
                " data = json_set(data, '$.lease_expires_at', ?)"
                " WHERE status IN ('running', 'unknown') AND lease_expires_at < ?"
                " AND lease_expires_at > ? AND json_extract(data, '$.lease_owner') = ?",
                (stamp, stamp, stamp, to_iso(now), owner),
            )
            return int(cur.rowcount)

    def find_action(self, idempotency_key: str, scope: Scope) -> Action | None:
        rows = self._read(
            "SELECT a.data FROM actions a JOIN tasks t ON t.id = a.task_id"
            f" WHERE a.idempotency_key = ?{_OWNED}",
            (idempotency_key, *_owner(scope)),
        )
        return Action.from_dict(json.loads(str(rows[0][0]))) if rows else None

    def get_action(self, action_id: str, scope: Scope) -> Action | None:
        rows = self._read(
            f"SELECT a.data FROM actions a JOIN tasks t ON t.id = a.task_id WHERE a.id = ?{_OWNED}",
            (action_id, *_owner(scope)),
        )
        return Action.from_dict(json.loads(str(rows[0][0]))) if rows else None

    def journal(self, task_id: str, scope: Scope, *, after_version: int = 0) -> list[JournalEntry]:
        rows = self._read(
            "SELECT j.data FROM journal j JOIN tasks t ON t.id = j.task_id"
            f" WHERE j.task_id = ? AND j.version > ?{_OWNED} ORDER BY j.version",
            (task_id, after_version, *_owner(scope)),
        )
        return [JournalEntry.from_dict(json.loads(str(r[0]))) for r in rows]

    def baseline(self, task_id: str, scope: Scope) -> Snapshot | None:
        rows = self._read(
            f"SELECT b.data FROM baselines b JOIN tasks t ON t.id = b.task_id"
            f" WHERE b.task_id = ?{_OWNED}",
            (task_id, *_owner(scope)),
        )
        return Snapshot.from_dict(json.loads(str(rows[0][0]))) if rows else None

    def compact(self, snapshot: Snapshot) -> int:
        with self._tx() as db:
            db.execute(
                "INSERT INTO baselines (task_id, version, at, data) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (task_id) DO UPDATE SET version = excluded.version,"
                " at = excluded.at, data = excluded.data WHERE excluded.version > version",
                (
                    snapshot.task_id,
                    snapshot.version,
                    to_iso(snapshot.at),
                    _dumps(snapshot.to_dict()),
                ),
            )
            cur = db.execute(
                "DELETE FROM journal WHERE task_id = ? AND version <= ?",
                (snapshot.task_id, snapshot.version),
            )
            return cur.rowcount

    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        # A task's oldest entry is its first by version (the primary key): no time index
        # needed, which keeps every turn's commit one b-tree page smaller.
        rows = self._read(
            "SELECT id FROM tasks WHERE (SELECT at FROM journal WHERE task_id = tasks.id"
            " ORDER BY version LIMIT 1) < ? ORDER BY id LIMIT ?",
            (to_iso(cutoff), limit),
        )
        return [str(r[0]) for r in rows]

    def claim_for_recovery(
        self,
        task_ids: Sequence[str],
        owner: str,
        *,
        until: datetime,
        now: datetime,
        gone: Collection[str] = (),
    ) -> list[str]:
        # BEGIN IMMEDIATE already serialises claimers; a live claim of another is kept,
        # unless its holder is gone.
        taken = []
        dead = json.dumps(sorted(gone))
        with self._tx() as db:
            for task_id in task_ids:
                row = db.execute(
                    "INSERT INTO recovery_claims (task_id, owner, until) VALUES (?, ?, ?)"
                    " ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner,"
                    " until = excluded.until"
                    " WHERE recovery_claims.until <= ? OR recovery_claims.owner = excluded.owner"
                    " OR recovery_claims.owner IN (SELECT value FROM json_each(?))"
                    " RETURNING task_id",
                    (task_id, owner, to_iso(until), to_iso(now), dead),
                ).fetchone()
                if row is not None:
                    taken.append(str(row[0]))
        return taken

    def recovery_claimants(self, now: datetime) -> frozenset[str]:
        rows = self._read(
            "SELECT DISTINCT owner FROM recovery_claims WHERE until > ?", (to_iso(now),)
        )
        return frozenset(str(r[0]) for r in rows)

    def release_recovery(self, owner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM recovery_claims WHERE owner = ?", (owner,))

    # -- API keys --------------------------------------------------------------------------
    def add_key(self, key: ApiKey) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO api_keys (id, user_id, name, admin, key_hash, created_at, revoked_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.user_id,
                    key.name,
                    int(key.admin),
                    key.key_hash,
                    to_iso(key.created_at),
                    to_iso(key.revoked_at),
                ),
            )

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._read(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?", (key_id,))
        return _api_key(rows[0]) if rows else None

    def list_keys(self, user_id: str | None = None) -> list[ApiKey]:
        rows = self._read(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE ?1 IS NULL OR user_id = ?1"
            " ORDER BY created_at, id",
            (user_id,),
        )
        return [_api_key(r) for r in rows]

    def revoke_keys(
        self, *, at: datetime, key_id: str | None = None, user_id: str | None = None
    ) -> int:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE revoked_at IS NULL"
                " AND (? IS NULL OR id = ?) AND (? IS NULL OR user_id = ?)"
                " AND (? IS NOT NULL OR ? IS NOT NULL)",
                (to_iso(at), key_id, key_id, user_id, user_id, key_id, user_id),
            )
            return cur.rowcount

    # -- sessions and messages ---------------------------------------------------------
    def write(
        self,
        session: Session | None,
        messages: Sequence[Message] = (),
        *,
        remember: Remember | None = None,
    ) -> None:
        if session is None and not messages:
            return
        with self._tx() as db:
            if session is not None:
                self._put_session(db, session)
            self._append(db, messages)
            if remember is not None:
                remember_in(db, remember, messages, None, None)
        if session is not None:
            session.version += 1

    @staticmethod
    def _put_session(db: sqlite3.Connection, session: Session) -> None:
        """Write the session if its row is still at the version this copy was read at (or
        absent, for a new one); SessionConflict if another turn wrote it since."""
        cur = db.execute(
            "INSERT INTO sessions (id, user_id, data) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET data = excluded.data"
            " WHERE sessions.user_id = excluded.user_id"
            " AND COALESCE(json_extract(sessions.data, '$.version'), 0) = ?",
            (session.id, session.user_id, _dumps(session.next_stored()), session.version),
        )
        if cur.rowcount != 1:
            owner = db.execute("SELECT user_id FROM sessions WHERE id = ?", (session.id,))
            row = owner.fetchone()
            if row is not None and row[0] == session.user_id:
                raise SessionConflict(session.id, session.version)
            raise NotFound(f"no session {session.id} for user {session.user_id}")

    def get_session(self, session_id: str, scope: Scope) -> Session | None:
        with self._lock, translated(self.path):
            return _session(self._db, session_id, scope)

    @staticmethod
    def _append(db: sqlite3.Connection, messages: Iterable[Message]) -> None:
        # One b-tree keyed by (session, number): appending touches one page, not two.
        for m in messages:
            try:
                row = db.execute(
                    "INSERT INTO messages (session_id, id, user_id, role, text, task_id,"
                    " created_at, request_key)"
                    " SELECT ?1, COALESCE(MAX(id), 0) + 1, ?2, ?3, ?4, ?5, ?6, ?7 FROM messages"
                    " WHERE session_id = ?1 RETURNING id",
                    (
                        m.session_id,
                        m.user_id,
                        m.role,
                        m.text,
                        m.task_id,
                        to_iso(m.created_at),
                        m.request_key,
                    ),
                ).fetchone()
            except sqlite3.IntegrityError:  # the only unique key a new message can hit
                raise RepeatedRequest(str(m.request_key)) from None
            m.id = int(row[0])

    def said(self, user_id: str, request_key: str) -> list[Message]:
        found = self._read(
            "SELECT session_id, id FROM messages WHERE user_id = ? AND request_key = ?",
            (user_id, request_key),
        )
        if not found:
            return []
        rows = self._read(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND id >= ?"
            " ORDER BY id LIMIT ?",
            (found[0][0], found[0][1], TURN_READ),
        )
        return one_turn([_message(r) for r in rows])

    def messages(
        self, session_id: str, scope: Scope, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ?"
        args: list[object] = [session_id]
        if not scope.is_admin:
            sql += " AND user_id = ?"
            args.append(scope.user_id)
        if before is not None:
            sql += " AND id < ?"
            args.append(before)
        rows = self._read(sql + " ORDER BY id DESC LIMIT ?", [*args, max(limit, 0)])
        return [_message(r) for r in reversed(rows)]

    # -- workers ---------------------------------------------------------------------
    def register_worker(self, worker: WorkerInfo) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO workers (id, host, pid, build, started_at, stopped_at)"
                " VALUES (?, ?, ?, ?, ?, NULL)",
                (worker.id, worker.host, worker.pid, worker.build, to_iso(worker.started_at)),
            )

    def deregister_worker(self, worker: WorkerInfo, at: datetime) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO workers (id, host, pid, build, started_at, stopped_at)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (id) DO UPDATE SET stopped_at = excluded.stopped_at",
                (
                    worker.id,
                    worker.host,
                    worker.pid,
                    worker.build,
                    to_iso(worker.started_at),
                    to_iso(at),
                ),
            )

    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        ids = list(worker_ids)
        if not ids:
            return frozenset()
        marks = ",".join("?" * len(ids))
        rows = self._read(
            f"SELECT id FROM workers WHERE stopped_at IS NOT NULL AND id IN ({marks})", ids
        )
        return frozenset(str(r[0]) for r in rows)

    def heartbeat(self, worker: WorkerInfo, at: datetime, *, role: str = "worker") -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO workers (id, host, pid, build, started_at, role, heartbeat_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE"
                " SET heartbeat_at = excluded.heartbeat_at, role = excluded.role",
                (
                    worker.id,
                    worker.host,
                    worker.pid,
                    worker.build,
                    to_iso(worker.started_at),
                    role,
                    to_iso(at),
                ),
            )

    def workers(self, *, include_stopped: bool = False) -> list[WorkerStatus]:
        rows = self._read(
            "SELECT w.id, w.host, w.pid, w.build, w.started_at, w.role, w.heartbeat_at,"
            " w.stopped_at, (SELECT count(*) FROM work WHERE work.owner = w.id)"
            " FROM workers w" + ("" if include_stopped else " WHERE w.stopped_at IS NULL")
        )
        return sorted((_worker_status(r) for r in rows), key=lambda w: w.info.started_at)

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
        c = claimable(runnable, gone, "?")
        if c is None:
            return []
        stamp = to_iso(now)
        with self._tx() as db:  # one writer at a time: no two claimers see the same row free
            rows = db.execute(
                f"SELECT {WORK_COLUMNS} FROM work WHERE (due_at <= ?" + c.gone_sql + ")"
                " AND (owner IS NULL OR lease_until <= ?" + c.gone_sql + ")"
                " AND (build IS NULL OR build = ?) AND (" + c.kinds_sql + ")"
                " ORDER BY due_at LIMIT ?",
                [
                    stamp,
                    *c.gone_args,
                    stamp,
                    *c.gone_args,
                    build,
                    *c.kind_args,
                    max(limit, 0),
                ],
            ).fetchall()
            db.executemany(
                "UPDATE work SET owner = ?, lease_until = ? WHERE task_id = ?",
                [(owner, to_iso(until), r[0]) for r in rows],
            )
        return [replace(work_item(r), owner=owner, lease_until=until) for r in rows]

    def enqueue_work(self, items: Sequence[WorkItem]) -> int:
        with self._tx() as db:
            before = db.total_changes
            db.executemany(
                "INSERT INTO work (task_id, user_id, type, template_version, build, due_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO NOTHING",
                [
                    (w.task_id, w.user_id, w.type, w.template_version, w.build, to_iso(w.due_at))
                    for w in items
                ],
            )
            return int(db.total_changes - before)

    def release_work(self, task_id: str, owner: str, *, due_at: datetime | None = None) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE work SET owner = NULL, lease_until = NULL,"
                " due_at = coalesce(?, due_at) WHERE task_id = ? AND owner = ?",
                (to_iso(due_at), task_id, owner),
            )

    def extend_work(self, owner: str, until: datetime) -> int:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE work SET lease_until = ? WHERE owner = ?", (to_iso(until), owner)
            )
            return int(cur.rowcount)

    def work_holders(self, now: datetime) -> frozenset[str]:
        rows = self._read(
            "SELECT DISTINCT owner FROM work WHERE owner IS NOT NULL AND lease_until > ?",
            (to_iso(now),),
        )
        return frozenset(str(r[0]) for r in rows)

    def queued_work(self, *, limit: int = 1000) -> list[WorkItem]:
        rows = self._read(
            f"SELECT {WORK_COLUMNS} FROM work ORDER BY due_at, task_id LIMIT ?", (max(limit, 0),)
        )
        return [work_item(r) for r in rows]

    @property
    def memories(self) -> SQLiteMemories:
        """Long-term memory in this file (its own tables, the same connection and lock)."""
        return SQLiteMemories(self._tx, self._read)

    @property
    def working(self) -> SQLiteWorkingMemory:
        """Working memory (facts, summaries) in this file."""
        return SQLiteWorkingMemory(self._tx, self._read)

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _Schema:
    """The migration runner's view of a SQLite store's connection."""

    backend = "sqlite"

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self.where = str(store.path)

    def applied_version(self) -> int:
        db = self._store._db
        if db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone():
            row = db.execute(_READ_VERSION).fetchone()
            return 0 if row is None else int(row[0])
        return 0

    @contextmanager
    def locked(self) -> Iterator[int]:
        # BEGIN IMMEDIATE takes the database's write lock: other processes wait for it.
        with self._store._tx() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            row = db.execute(_READ_VERSION).fetchone()
            yield 0 if row is None else int(row[0])

    def apply(self, step: schema.SchemaStep) -> None:
        db = self._store._db
        for statement in statements(step.sql):
            db.execute(statement)
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (str(step.version),),
        )


_READ_VERSION = "SELECT value FROM meta WHERE key = 'schema_version'"
_OWNED = " AND (? OR t.user_id = ?)"
_READ_TURN = (
    "SELECT s.data, (SELECT json_group_array(json_array(json(t.data), ("
    " SELECT json_group_array(json(a.data)) FROM"
    " (SELECT data FROM actions WHERE task_id = t.id ORDER BY seq) a)))"
    " FROM tasks t WHERE t.id IN (SELECT value FROM json_each(s.data, '$.active_task_ids'))"
    " AND t.user_id = s.user_id AND t.status IN ({}))"
    " FROM sessions s WHERE s.id = ?1 AND (?2 OR s.user_id = ?3)"
).format(", ".join(f"'{s}'" for s in OPEN_TASK_STATUSES))
"""The scope filter of a query that joins ``tasks t``: admin, or the task's owner."""


def _owner(scope: Scope) -> tuple[bool, str | None]:
    return scope.is_admin, scope.user_id


_KEY_COLUMNS = "id, user_id, name, admin, key_hash, created_at, revoked_at"


def _api_key(row: Sequence[object]) -> ApiKey:
    key_id, user_id, name, admin, key_hash, created_at, revoked_at = row
    return ApiKey(
        str(key_id),
        str(user_id),
        str(name),
        bool(admin),
        str(key_hash),
        _req_time(created_at),
        from_iso(str(revoked_at)) if revoked_at is not None else None,
    )


def _req_time(value: object) -> datetime:
    found = from_iso(str(value))
    assert found is not None
    return found


def _session(db: sqlite3.Connection, session_id: str, scope: Scope) -> Session | None:
    row = db.execute("SELECT user_id, data FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None or not scope.admits(str(row[0])):
        return None
    return Session.from_dict(json.loads(str(row[1])))


def _states(
    db: sqlite3.Connection,
    task_ids: Sequence[str],
    scope: Scope,
    statuses: Sequence[TaskStatus] | None,
) -> list[TaskState]:
    """Tasks by id (in scope, with one of ``statuses``) and their actions, in id order given."""
    ids = list(dict.fromkeys(task_ids))
    marks = ",".join("?" * len(ids))
    sql = f"SELECT id, data FROM tasks t WHERE id IN ({marks}){_OWNED}"
    args: list[object] = [*ids, *_owner(scope)]
    if statuses is not None:
        sql += f" AND status IN ({','.join('?' * len(statuses))})" if statuses else " AND 0"
        args.extend(str(s) for s in statuses)
    tasks = {str(r[0]): Task.from_dict(json.loads(str(r[1]))) for r in db.execute(sql, args)}
    if not tasks:
        return []
    actions: dict[str, list[Action]] = {t: [] for t in tasks}
    marks = ",".join("?" * len(tasks))
    for row in db.execute(
        f"SELECT task_id, data FROM actions WHERE task_id IN ({marks}) ORDER BY task_id, seq",
        list(tasks),
    ):
        actions[str(row[0])].append(Action.from_dict(json.loads(str(row[1]))))
    return [TaskState(tasks[t], actions[t]) for t in ids if t in tasks]


_MESSAGE_COLUMNS = "id, session_id, user_id, role, text, task_id, created_at, request_key"


def _message(row: Sequence[object]) -> Message:
    return Message.from_dict(dict(zip(_MESSAGE_COLUMNS.split(", "), row, strict=True)))
