"""Production store: PostgreSQL through psycopg 3 and a connection pool.

``postgresql://user:password@host:port/dbname?pool_size=10``: see ``url`` for relaystate's
own options (``pool_size``, ``pooler``); every other option goes to libpq as it is.

A commit is ONE SQL statement, run in autocommit mode, so one transaction and one round
trip: data-modifying CTEs write the task (conditional on its version and owner), then, only
if that row was written, the actions, the journal entry, the session and the messages. A
stale version writes nothing and is reported as :class:`VersionConflict`; a taken
idempotency key or another user's session id fails the statement, so nothing at all is
written. Messages are numbered per session through a counter row that concurrent writers
serialise on.

Task, action, journal and session state is stored as JSONB in the model's dict form; what
is filtered or sorted on is also a typed column. JSONB keeps values, not the order of keys.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from ...errors import (
    DuplicateKey,
    NotFound,
    RepeatedRequest,
    SessionConflict,
    StoreUnavailable,
    VersionConflict,
)
from ...model import (
    OPEN_ACTION_STATUSES,
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
    to_iso,
)
from ...scope import Scope
from .. import schema
from ..roles import (
    DURABLE,
    MEMORY_IN_COMMIT,
    ONE_READ_TURN,
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
from . import durability, remembered
from .connections import Conn, ConnectionLost, Connections
from .memories import PostgresMemories
from .url import PostgresURL, redact
from .working import PostgresWorkingMemory

_MIGRATION_LOCK = 0x72656C6179737461  # "relaysta": the advisory lock of schema changes
SETTLE_WITHIN = 15.0
"""Seconds a commit whose answer was lost waits for the server to tell whether it
committed (a failover to a standby takes a few seconds)."""
SETTLE_POLL = 0.25
_RETRIES = 5  # a deadlock or serialization failure rolls back the statement: run it again


class PostgresStore(Backend, SchemaAdmin):
    capabilities = frozenset({DURABLE, SHARED, ONE_READ_TURN, MEMORY_IN_COMMIT})

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self._where = redact(url)
        options = PostgresURL.parse(url)
        conninfo = options.conninfo
        # A direct connection first: an unreachable server fails now with libpq's reason
        # (a pool would only time out), and the schema is upgraded before any pooled use.
        try:
            first: Conn = psycopg.connect(
                conninfo, autocommit=True, prepare_threshold=options.prepare_threshold
            )
        except psycopg.OperationalError as exc:
            reason = " ".join(str(exc).split())  # libpq's reason, on one line
            raise StoreUnavailable(f"cannot connect to {self._where}: {reason}") from None
        try:
            if migrate:
                schema.upgrade(_Schema(first, self._where))
        except BaseException:
            first.close()
            raise
        # the first connection serves the first statements while the pool opens its own in
        # the background: no cold wait for a pooled connection
        self._connections = Connections(options, self._where, first=first)

    # -- plumbing --------------------------------------------------------------------
    def _conn(self) -> AbstractContextManager[Conn]:
        return self._connections.connection()

    def _rows(self, sql: str, args: Sequence[object] | dict[str, object] = ()) -> list[Any]:
        with self._conn() as conn:
            return conn.execute(sql, args).fetchall()

    def schema_status(self) -> schema.SchemaStatus:
        with self._conn() as conn:
            return schema.status(_Schema(conn, self._where))

    def upgrade_schema(self) -> list[schema.SchemaStep]:
        with self._conn() as conn:
            return schema.upgrade(_Schema(conn, self._where))

    def durability_warnings(self) -> list[str]:
        with self._conn() as conn:
            return durability.warnings(conn)

    # -- tasks, actions, journal -------------------------------------------------------
    def commit(self, commit: Commit) -> None:
        task = commit.task
        params: dict[str, object] = {
            "id": task.id,
            "user_id": task.user_id,
            "type": task.type,
            "status": str(task.status),
            "version": task.version,
            "expected": commit.expected_version,
            "updated_at": task.updated_at,
            "data": Jsonb(commit.task_row()),
            "entry_at": commit.entry.at,
            "entry": Jsonb(commit.entry.to_dict()),
        }
        parts = [_INSERT_TASK if commit.expected_version == 0 else _UPDATE_TASK, _JOURNAL]
        if commit.actions:
            parts.append(_ACTIONS)
            params["actions"] = Jsonb([commit.action_row(a) for a in commit.actions])
        session = commit.session
        if session is not None:
            parts.append(_SESSION)
            params["session_id"] = session.id
            params["session_user"] = session.user_id
            params["session"] = Jsonb(session.next_stored())
            params["session_version"] = session.version
        if commit.requeue:
            parts.append(_DEQUEUE if commit.work is None else _ENQUEUE)
            if commit.work is not None:
                params["work_user"] = commit.work.user_id
                params["work_type"] = commit.work.type
                params["work_version"] = commit.work.template_version
                params["work_build"] = commit.work.build
                params["work_due"] = commit.work.due_at
        locks: list[str] = []
        remember = commit.remember
        if commit.messages:
            parts.append(_messages_cte("WHERE EXISTS (SELECT FROM t)"))
            at = commit.entry.at if remember is not None else None
            params["messages"] = _messages_json(commit.messages, remember, at)
            if remember is not None:
                parts.append(remembered.items_part(remember, task.id, params))
        if remember is not None:
            facts, locks = remembered.facts_part(task, params, bool(commit.messages))
            parts.append(facts)
        sql = (
            "WITH "
            + ",\n".join(parts)
            + "\nSELECT (SELECT count(*) FROM t), "
            + (_NEW_IDS if commit.messages else "NULL")
            + (", " + _SESSION_GATE if session is not None else "")
        )
        try:
            row = self._write(sql, params, locks)
        except ConnectionLost as lost:
            row = self._settle(commit, lost)
        except pg_errors.UniqueViolation as exc:
            raise self._unique_violation(exc, commit.task.id, session, commit.messages) from None
        except pg_errors.DivisionByZero:
            assert session is not None
            raise SessionConflict(session.id, session.version) from None
        if row[0] != 1:
            actual = self._rows("SELECT version FROM tasks WHERE id = %s", (task.id,))
            raise VersionConflict(
                task.id, commit.expected_version, int(actual[0][0]) if actual else None
            )
        _number(commit.messages, row[1])
        if session is not None:
            session.version += 1

    def _settle(self, commit: Commit, lost: ConnectionLost) -> tuple[Any, ...]:
        """What became of a commit whose answer was lost with the connection: read back,
        as soon as the server (or the standby promoted in its place) answers, whether the
        journal holds this commit's entry. Committed: the commit's result, as if answered.
        Not committed: StoreUnavailable, and a retry writes it once. Still unreachable
        after ``SETTLE_WITHIN``: StoreUnavailable saying the outcome is unknown (a retry
        with the same request key is answered from what committed, never written twice)."""
        entry = commit.entry
        shown = [[m.session_id, to_iso(m.created_at), m.role, m.text] for m in commit.messages]
        deadline = time.monotonic() + SETTLE_WITHIN
        while True:
            try:
                found = self._rows(
                    _SETTLE,
                    {
                        "task": entry.task_id,
                        "version": entry.version,
                        "entry": Jsonb(entry.to_dict()),
                        "messages": Jsonb(shown),
                    },
                )
                break
            except StoreUnavailable:
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"{lost}; whether task {entry.task_id} version {entry.version} "
                        "committed is unknown: retry with the same request key"
                    ) from None
                time.sleep(SETTLE_POLL)
        if not found or not found[0][0]:
            raise StoreUnavailable(
                f"{lost}; task {entry.task_id} version {entry.version} "
                "did not commit: nothing was written"
            ) from None
        return (1, found[0][1], 1)

    def _write(
        self, sql: str, params: dict[str, object], locks: Sequence[str] = ()
    ) -> tuple[Any, ...]:
        """Run one writing statement (its own transaction), again after a deadlock; with
        ``locks``, those advisory locks are taken first, in the same transaction."""
        for attempt in range(_RETRIES):
            try:
                with self._conn() as conn:
                    if not locks:
                        row = conn.execute(sql, params).fetchone()
                    else:
                        with conn.transaction():
                            conn.execute(remembered.LOCKS, (list(locks),))
                            row = conn.execute(sql, params).fetchone()
                    assert row is not None
                    return row
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(0.005 * (attempt + 1))
        raise AssertionError("unreachable")

    @staticmethod
    def _unique_violation(
        exc: pg_errors.UniqueViolation,
        task_id: str | None,
        session: Session | None,
        messages: Sequence[Message] = (),
    ) -> Exception:
        constraint = exc.diag.constraint_name
        if constraint == "messages_request_key":
            keys = [m.request_key for m in messages if m.request_key is not None]
            return RepeatedRequest(keys[0] if keys else "")
        if constraint in ("actions_idempotency_key", "actions_task_seq"):
            return DuplicateKey(f"task {task_id}: an idempotency key or seq of an action is taken")
        if constraint == "sessions_pkey" and session is not None:
            return NotFound(f"no session {session.id} for user {session.user_id}")
        if constraint == "journal_pkey" and task_id is not None:
            return VersionConflict(task_id, 0, None)
        return exc

    def load(self, task_id: str, scope: Scope) -> TaskState | None:
        """The task row and its actions in one round trip."""
        found = self.load_many([task_id], scope)
        return found[0] if found else None

    def load_many(
        self,
        task_ids: Sequence[str],
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
    ) -> list[TaskState]:
        if not task_ids or (statuses is not None and not statuses):
            return []
        sql = _LOAD + " WHERE t.id = ANY(%(ids)s) AND (%(admin)s OR t.user_id = %(user)s)"
        args = {"ids": list(task_ids), **_owner(scope)}
        if statuses is not None:
            sql += " AND t.status = ANY(%(statuses)s)"
            args["statuses"] = [str(s) for s in statuses]
        rows = {r[0]["id"]: _state(r[0], r[1]) for r in self._rows(sql, args)}
        return [rows[t] for t in dict.fromkeys(task_ids) if t in rows]

    def read_turn(self, session_id: str, scope: Scope) -> tuple[Session | None, list[TaskState]]:
        """The session and the open tasks it lists, with their actions: one round trip."""
        rows = self._rows(
            _READ_TURN,
            {"id": session_id, "open": [str(s) for s in OPEN_TASK_STATUSES], **_owner(scope)},
        )
        if not rows:
            return None, []
        session = Session.from_dict(rows[0][0])
        found = {d[0]["id"]: _state(d[0], d[1]) for d in rows[0][1]}
        return session, [found[t] for t in dict.fromkeys(session.active_task_ids) if t in found]

    def list_tasks(
        self,
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        if statuses is not None and not statuses:
            return []
        where: list[str] = []
        args: list[object] = []
        if not scope.is_admin:
            where.append("user_id = %s")
            args.append(scope.user_id)
        if statuses is not None:
            where.append("status = ANY(%s)")
            args.append([str(s) for s in statuses])
        sql = "SELECT data FROM tasks"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += ' ORDER BY updated_at DESC, id COLLATE "C" DESC LIMIT %s'
        rows = self._rows(sql, [*args, max(limit, 0)])
        return [Task.from_dict(r[0]) for r in rows]

    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        rows = self._rows(_OPEN_ACTIONS, (after or "", max(limit, 0)))
        return [Action.from_dict(r[0]) for r in rows]

    def extend_leases(self, owner: str, until: datetime, *, now: datetime) -> int:
        rows = self._rows(
            "UPDATE actions SET lease_expires_at = %(until)s,"
            " data = jsonb_set(data, '{lease_expires_at}', to_jsonb(%(stamp)s::text))"
            " WHERE status IN ('running', 'unknown') AND lease_expires_at < %(until)s"
            " AND lease_expires_at > %(now)s AND data->>'lease_owner' = %(owner)s RETURNING 1",
            {"until": until, "stamp": to_iso(until), "owner": owner, "now": now},
        )
        return len(rows)

    def task_ids_starting(self, prefix: str, scope: Scope, *, limit: int = 2) -> list[str]:
        rows = self._rows(
            "SELECT id FROM tasks WHERE left(id, %s) = %s AND (%s OR user_id = %s)"
            ' ORDER BY id COLLATE "C" LIMIT %s',
            [len(prefix), prefix, scope.is_admin, scope.user_id, max(limit, 0)],
        )
        return [str(r[0]) for r in rows]

    def count_tasks(self, scope: Scope) -> dict[TaskStatus, int]:
        rows = self._rows(
            "SELECT status, COUNT(*) FROM tasks WHERE (%s OR user_id = %s) GROUP BY status",
            [scope.is_admin, scope.user_id],
        )
        return {TaskStatus(str(status)): int(n) for status, n in rows}

    def find_action(self, idempotency_key: str, scope: Scope) -> Action | None:
        rows = self._rows(
            "SELECT a.data FROM actions a JOIN tasks t ON t.id = a.task_id"
            f" WHERE a.idempotency_key = %(key)s{_OWNED}",
            {"key": idempotency_key, **_owner(scope)},
        )
        return Action.from_dict(rows[0][0]) if rows else None

    def get_action(self, action_id: str, scope: Scope) -> Action | None:
        rows = self._rows(
            "SELECT a.data FROM actions a JOIN tasks t ON t.id = a.task_id"
            f" WHERE a.id = %(id)s{_OWNED}",
            {"id": action_id, **_owner(scope)},
        )
        return Action.from_dict(rows[0][0]) if rows else None

    def journal(self, task_id: str, scope: Scope, *, after_version: int = 0) -> list[JournalEntry]:
        rows = self._rows(
            "SELECT j.data FROM journal j JOIN tasks t ON t.id = j.task_id"
            f" WHERE j.task_id = %(id)s AND j.version > %(after)s{_OWNED} ORDER BY j.version",
            {"id": task_id, "after": after_version, **_owner(scope)},
        )
        return [JournalEntry.from_dict(r[0]) for r in rows]

    def baseline(self, task_id: str, scope: Scope) -> Snapshot | None:
        rows = self._rows(
            "SELECT b.data FROM baselines b JOIN tasks t ON t.id = b.task_id"
            f" WHERE b.task_id = %(id)s{_OWNED}",
            {"id": task_id, **_owner(scope)},
        )
        return Snapshot.from_dict(rows[0][0]) if rows else None

    def compact(self, snapshot: Snapshot) -> int:
        row = self._write(
            "WITH b AS ("
            " INSERT INTO baselines (task_id, version, at, data)"
            " VALUES (%(task_id)s, %(version)s, %(at)s, %(data)s)"
            " ON CONFLICT (task_id) DO UPDATE SET version = EXCLUDED.version,"
            " at = EXCLUDED.at, data = EXCLUDED.data WHERE baselines.version < EXCLUDED.version"
            "), d AS ("
            " DELETE FROM journal WHERE task_id = %(task_id)s AND version <= %(version)s"
            " RETURNING 1"
            ") SELECT count(*) FROM d",
            {
                "task_id": snapshot.task_id,
                "version": snapshot.version,
                "at": snapshot.at,
                "data": Jsonb(snapshot.to_dict()),
            },
        )
        return int(row[0])

    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        # A task's oldest entry is its first by version (the primary key): no time index.
        rows = self._rows(
            "SELECT id FROM tasks WHERE (SELECT at FROM journal WHERE task_id = tasks.id"
            ' ORDER BY version LIMIT 1) < %s ORDER BY id COLLATE "C" LIMIT %s',
            (cutoff, max(limit, 0)),
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
        # SKIP LOCKED: rows another recoverer is claiming right now are passed over instead
        # of waited for; ON CONFLICT keeps a live claim of another recoverer.
        if not task_ids:
            return []
        with self._conn() as conn:
            rows = conn.execute(
                "WITH wanted AS ("
                " SELECT id FROM tasks WHERE id = ANY(%(ids)s) ORDER BY id"
                " FOR UPDATE SKIP LOCKED"
                ") INSERT INTO recovery_claims (task_id, owner, until)"
                " SELECT id, %(owner)s, %(until)s FROM wanted"
                " ON CONFLICT (task_id) DO UPDATE SET owner = EXCLUDED.owner,"
                " until = EXCLUDED.until"
                " WHERE recovery_claims.until <= %(now)s"
                " OR recovery_claims.owner = EXCLUDED.owner"
                " OR recovery_claims.owner = ANY(%(gone)s)"
                " RETURNING task_id",
                {
                    "ids": list(task_ids),
                    "owner": owner,
                    "until": until,
                    "now": now,
                    "gone": sorted(gone),
                },
            ).fetchall()
        taken = {str(r[0]) for r in rows}
        return [t for t in task_ids if t in taken]

    def recovery_claimants(self, now: datetime) -> frozenset[str]:
        rows = self._rows("SELECT DISTINCT owner FROM recovery_claims WHERE until > %s", (now,))
        return frozenset(str(r[0]) for r in rows)

    def release_recovery(self, owner: str) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM recovery_claims WHERE owner = %s", (owner,))

    # -- API keys --------------------------------------------------------------------------
    def add_key(self, key: ApiKey) -> None:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO api_keys (id, user_id, name, admin, key_hash, created_at, revoked_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    key.id,
                    key.user_id,
                    key.name,
                    key.admin,
                    key.key_hash,
                    key.created_at,
                    key.revoked_at,
                ),
            )

    def get_key(self, key_id: str) -> ApiKey | None:
        rows = self._rows(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        return ApiKey(*rows[0]) if rows else None

    def list_keys(self, user_id: str | None = None) -> list[ApiKey]:
        rows = self._rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys"
            " WHERE %(user)s::text IS NULL OR user_id = %(user)s ORDER BY created_at, id",
            {"user": user_id},
        )
        return [ApiKey(*r) for r in rows]

    def revoke_keys(
        self, *, at: datetime, key_id: str | None = None, user_id: str | None = None
    ) -> int:
        if key_id is None and user_id is None:
            return 0
        with self._conn() as conn:
            cur = conn.execute(
                "UPDATE api_keys SET revoked_at = %(at)s WHERE revoked_at IS NULL"
                " AND (%(key)s::text IS NULL OR id = %(key)s)"
                " AND (%(user)s::text IS NULL OR user_id = %(user)s)",
                {"at": at, "key": key_id, "user": user_id},
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
        parts: list[str] = []
        params: dict[str, object] = {}
        gate = ""
        if session is not None:
            parts.append(_PUT_SESSION)
            params.update(session_id=session.id, session_user=session.user_id)
            params["session"] = Jsonb(session.next_stored())
            params["session_version"] = session.version
            gate = ", 1 / (SELECT count(*) FROM s)::integer"  # see _SESSION_GATE
        if messages:
            parts.append(_messages_cte(""))
            params["messages"] = _messages_json(messages, remember, None)
            if remember is not None:
                parts.append(remembered.items_part(remember, None, params))
        sql = (
            "WITH " + ",\n".join(parts) + "\nSELECT 1, " + (_NEW_IDS if messages else "NULL") + gate
        )
        try:
            row = self._write(sql, params)
        except pg_errors.UniqueViolation as exc:
            raise self._unique_violation(exc, None, session, messages) from None
        except pg_errors.DivisionByZero:
            assert session is not None
            raise SessionConflict(session.id, session.version) from None
        _number(messages, row[1])
        if session is not None:
            session.version += 1

    def get_session(self, session_id: str, scope: Scope) -> Session | None:
        rows = self._rows("SELECT user_id, data FROM sessions WHERE id = %s", (session_id,))
        if not rows or not scope.admits(rows[0][0]):
            return None
        return Session.from_dict(rows[0][1])

    def messages(
        self, session_id: str, scope: Scope, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        sql = f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = %s"
        args: list[object] = [session_id]
        if not scope.is_admin:
            sql += " AND user_id = %s"
            args.append(scope.user_id)
        if before is not None:
            sql += " AND id < %s"
            args.append(before)
        rows = self._rows(sql + " ORDER BY id DESC LIMIT %s", [*args, max(limit, 0)])
        return [_message(r) for r in reversed(rows)]

    def said(self, user_id: str, request_key: str) -> list[Message]:
        rows = self._rows(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id ="
            " (SELECT session_id FROM messages WHERE user_id = %(u)s AND request_key = %(k)s)"
            " AND m.id >= (SELECT id FROM messages WHERE user_id = %(u)s AND request_key = %(k)s)"
            " ORDER BY m.id LIMIT %(n)s",
            {"u": user_id, "k": request_key, "n": TURN_READ},
        )
        return one_turn([_message(r) for r in rows])

    # -- workers ---------------------------------------------------------------------
    def register_worker(self, worker: WorkerInfo) -> None:
        self._write(
            "WITH w AS ("
            " INSERT INTO workers (id, host, pid, build, started_at, stopped_at)"
            " VALUES (%(id)s, %(host)s, %(pid)s, %(build)s, %(started_at)s, NULL)"
            " ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, pid = EXCLUDED.pid,"
            " build = EXCLUDED.build, started_at = EXCLUDED.started_at, stopped_at = NULL"
            ") SELECT 1",
            {
                "id": worker.id,
                "host": worker.host,
                "pid": worker.pid,
                "build": worker.build,
                "started_at": worker.started_at,
            },
        )

    def deregister_worker(self, worker: WorkerInfo, at: datetime) -> None:
        self._write(
            "WITH w AS ("
            " INSERT INTO workers (id, host, pid, build, started_at, stopped_at)"
            " VALUES (%(id)s, %(host)s, %(pid)s, %(build)s, %(started_at)s, %(at)s)"
            " ON CONFLICT (id) DO UPDATE SET stopped_at = EXCLUDED.stopped_at"
            ") SELECT 1",
            {
                "id": worker.id,
                "host": worker.host,
                "pid": worker.pid,
                "build": worker.build,
                "started_at": worker.started_at,
                "at": at,
            },
        )

    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        ids = list(worker_ids)
        if not ids:
            return frozenset()
        rows = self._rows(
            "SELECT id FROM workers WHERE stopped_at IS NOT NULL AND id = ANY(%s)", (ids,)
        )
        return frozenset(str(r[0]) for r in rows)

    def heartbeat(self, worker: WorkerInfo, at: datetime, *, role: str = "worker") -> None:
        self._write(
            "WITH w AS ("
            " INSERT INTO workers (id, host, pid, build, started_at, role, heartbeat_at)"
            " VALUES (%(id)s, %(host)s, %(pid)s, %(build)s, %(started_at)s, %(role)s, %(at)s)"
            " ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,"
            " role = EXCLUDED.role"
            ") SELECT 1",
            {
                "id": worker.id,
                "host": worker.host,
                "pid": worker.pid,
                "build": worker.build,
                "started_at": worker.started_at,
                "role": role,
                "at": at,
            },
        )

    def database_time(self) -> datetime:
        """The server's ``clock_timestamp()``: one clock for every host of a fleet."""
        row = self._rows("SELECT clock_timestamp()")[0]
        stamp: datetime = row[0]
        return stamp

    def workers(self, *, include_stopped: bool = False) -> list[WorkerStatus]:
        rows = self._rows(
            "SELECT w.id, w.host, w.pid, w.build, w.started_at, w.role, w.heartbeat_at,"
            " w.stopped_at, (SELECT count(*) FROM work WHERE work.owner = w.id)"
            " FROM workers w"
            + ("" if include_stopped else " WHERE w.stopped_at IS NULL")
            + " ORDER BY w.started_at, w.id"
        )
        return [_worker_status(r) for r in rows]

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
        c = claimable(runnable, gone, "%s")
        if c is None:
            return []
        # SKIP LOCKED: concurrent claimers pass over the rows another is taking
        sql = (
            "WITH c AS (SELECT task_id FROM work WHERE (due_at <= %s" + c.gone_sql + ")"
            " AND (owner IS NULL OR lease_until <= %s" + c.gone_sql + ")"
            " AND (build IS NULL OR build = %s) AND (" + c.kinds_sql + ")"
            " ORDER BY due_at LIMIT %s FOR UPDATE SKIP LOCKED)"
            " UPDATE work SET owner = %s, lease_until = %s FROM c"
            f" WHERE work.task_id = c.task_id RETURNING {_WORK_RETURNING}"
        )
        args = [
            now,
            *c.gone_args,
            now,
            *c.gone_args,
            build,
            *c.kind_args,
            max(limit, 0),
            owner,
            until,
        ]
        with self._conn() as conn:
            rows = conn.execute(sql, args).fetchall()
        return sorted((work_item(r) for r in rows), key=lambda w: w.due_at)

    def enqueue_work(self, items: Sequence[WorkItem]) -> int:
        if not items:
            return 0
        rows = self._rows(
            "INSERT INTO work (task_id, user_id, type, template_version, build, due_at)"
            " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::int[], %s::text[],"
            " %s::timestamptz[]) ON CONFLICT (task_id) DO NOTHING RETURNING 1",
            (
                [w.task_id for w in items],
                [w.user_id for w in items],
                [w.type for w in items],
                [w.template_version for w in items],
                [w.build for w in items],
                [w.due_at for w in items],
            ),
        )
        return len(rows)

    def release_work(self, task_id: str, owner: str, *, due_at: datetime | None = None) -> None:
        self._rows(
            "UPDATE work SET owner = NULL, lease_until = NULL,"
            " due_at = coalesce(%s::timestamptz, due_at) WHERE task_id = %s AND owner = %s"
            " RETURNING 1",
            (due_at, task_id, owner),
        )

    def extend_work(self, owner: str, until: datetime) -> int:
        rows = self._rows(
            "UPDATE work SET lease_until = %s WHERE owner = %s RETURNING 1", (until, owner)
        )
        return len(rows)

    def work_holders(self, now: datetime) -> frozenset[str]:
        rows = self._rows(
            "SELECT DISTINCT owner FROM work WHERE owner IS NOT NULL AND lease_until > %s",
            (now,),
        )
        return frozenset(str(r[0]) for r in rows)

    def queued_work(self, *, limit: int = 1000) -> list[WorkItem]:
        rows = self._rows(
            f"SELECT {WORK_COLUMNS} FROM work ORDER BY due_at, task_id LIMIT %s",
            (max(limit, 0),),
        )
        return [work_item(r) for r in rows]

    @property
    def memories(self) -> PostgresMemories:
        """Long-term memory in this database (its own tables, the same connections)."""
        return PostgresMemories(self._conn)

    @property
    def working(self) -> PostgresWorkingMemory:
        """Working memory (facts, summaries) in this database."""
        return PostgresWorkingMemory(self._conn)

    def close(self) -> None:
        self._connections.close()


# -- the commit statement, in parts --------------------------------------------------------
# ``t`` is the task row written by this commit: one row, or none when the version (or the
# owner) did not match. Every other part writes only if ``t`` has its row.

_UPDATE_TASK = """t AS (
    UPDATE tasks SET type = %(type)s, status = %(status)s, version = %(version)s,
        updated_at = %(updated_at)s, data = %(data)s
    WHERE id = %(id)s AND version = %(expected)s AND user_id = %(user_id)s
    RETURNING id
)"""

_INSERT_TASK = """t AS (
    INSERT INTO tasks (id, user_id, type, status, version, updated_at, data)
    VALUES (%(id)s, %(user_id)s, %(type)s, %(status)s, %(version)s, %(updated_at)s, %(data)s)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
)"""

_WORK_RETURNING = ", ".join("work." + c.strip() for c in WORK_COLUMNS.split(","))

_ENQUEUE = """w AS (
    INSERT INTO work (task_id, user_id, type, template_version, build, due_at)
    SELECT id, %(work_user)s::text, %(work_type)s::text, %(work_version)s::integer,
        %(work_build)s::text,
        %(work_due)s::timestamptz FROM t
    ON CONFLICT (task_id) DO UPDATE SET user_id = EXCLUDED.user_id, type = EXCLUDED.type,
        template_version = EXCLUDED.template_version, build = EXCLUDED.build,
        due_at = EXCLUDED.due_at
)"""

_DEQUEUE = """w AS (DELETE FROM work WHERE task_id = (SELECT id FROM t))"""

_JOURNAL = """j AS (
    INSERT INTO journal (task_id, version, at, data)
    SELECT id, %(version)s::integer, %(entry_at)s::timestamptz, %(entry)s::jsonb FROM t
)"""

_ACTIONS = """a AS (
    INSERT INTO actions (id, task_id, seq, status, idempotency_key, lease_expires_at, data)
    SELECT d->>'id', d->>'task_id', (d->>'seq')::integer, d->>'status', d->>'idempotency_key',
        (d->>'lease_expires_at')::timestamptz, d
    FROM jsonb_array_elements(%(actions)s::jsonb) AS d
    WHERE EXISTS (SELECT FROM t)
    ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status,
        lease_expires_at = EXCLUDED.lease_expires_at, data = EXCLUDED.data
)"""

_SESSION = """s AS (
    INSERT INTO sessions (id, user_id, data)
    SELECT %(session_id)s::text, %(session_user)s::text, %(session)s::jsonb FROM t
    ON CONFLICT (id, user_id) DO UPDATE SET data = EXCLUDED.data
    WHERE coalesce((sessions.data->>'version')::integer, 0) = %(session_version)s
    RETURNING 1
)"""

_PUT_SESSION = """s AS (
    INSERT INTO sessions (id, user_id, data)
    VALUES (%(session_id)s::text, %(session_user)s::text, %(session)s::jsonb)
    ON CONFLICT (id, user_id) DO UPDATE SET data = EXCLUDED.data
    WHERE coalesce((sessions.data->>'version')::integer, 0) = %(session_version)s
    RETURNING 1
)"""

_SESSION_GATE = "1 / greatest((SELECT count(*) FROM s), 1 - (SELECT count(*) FROM t))::integer"
"""Divides by zero, so the whole statement (task, journal, messages) rolls back, when the
task row was written but the session was not: another turn wrote the session since it was
read (the upsert's WHERE sees the latest row). One statement stays one round trip."""

_SETTLE = """
SELECT j.data = %(entry)s::jsonb, (
    SELECT jsonb_agg(jsonb_build_array(m.session_id, m.id) ORDER BY m.session_id, m.id)
    FROM jsonb_array_elements(%(messages)s::jsonb) w
    JOIN messages m ON m.session_id = w->>0 AND m.created_at = (w->>1)::timestamptz
        AND m.role = w->>2 AND m.text = w->>3)
FROM journal j WHERE j.task_id = %(task)s AND j.version = %(version)s
"""
"""Whether the journal holds this very entry, and the numbers its messages were given."""

_NEW_IDS = "(SELECT jsonb_agg(jsonb_build_array(session_id, id) ORDER BY session_id, id) FROM mi)"
"""The numbers the messages CTE gave, to hand back to the caller."""

_LOAD = (
    "SELECT t.data, (SELECT coalesce(jsonb_agg(a.data ORDER BY a.seq), '[]')"
    " FROM actions a WHERE a.task_id = t.id) FROM tasks t"
)

_OWNED = " AND (%(admin)s OR t.user_id = %(user)s)"
"""The scope filter of a query that joins ``tasks t``: admin, or the task's owner."""

_READ_TURN = """SELECT s.data, (
    SELECT coalesce(jsonb_agg(jsonb_build_array(t.data, (
        SELECT coalesce(jsonb_agg(a.data ORDER BY a.seq), '[]')
        FROM actions a WHERE a.task_id = t.id))), '[]')
    FROM tasks t
    WHERE t.id IN (SELECT jsonb_array_elements_text(s.data -> 'active_task_ids'))
        AND t.user_id = s.user_id AND t.status = ANY(%(open)s)
) FROM sessions s WHERE s.id = %(id)s AND (%(admin)s OR s.user_id = %(user)s)"""


_KEY_COLUMNS = "id, user_id, name, admin, key_hash, created_at, revoked_at"


def _owner(scope: Scope) -> dict[str, object]:
    return {"admin": scope.is_admin, "user": scope.user_id}


def _state(task: dict[str, Any], actions: list[dict[str, Any]]) -> TaskState:
    return TaskState(Task.from_dict(task), [Action.from_dict(a) for a in actions])


def _number(messages: Sequence[Message], ids: list[list[Any]] | None) -> None:
    """Give each message the number its session's counter assigned, in order."""
    by_session: dict[str, list[int]] = {}
    for session_id, number in ids or []:
        by_session.setdefault(session_id, []).append(int(number))
    for m in messages:
        m.id = by_session[m.session_id].pop(0)


def _messages_cte(gate: str) -> str:
    """Append messages numbered per session: the counter row of each session is bumped by
    the batch size (an upsert sees the latest committed count and holds the row until the
    commit), then its messages take the numbers just below the new count, in order."""
    return f"""mb AS (
    SELECT d->>'session_id' AS session_id, d->>'user_id' AS user_id, d->>'role' AS role,
        d->>'text' AS text, d->>'task_id' AS task_id,
        (d->>'created_at')::timestamptz AS created_at, d->>'request_key' AS request_key, n,
        d->>'words' AS words, d->>'added_at' AS added_at, d->>'vector' AS vector
    FROM jsonb_array_elements(%(messages)s::jsonb) WITH ORDINALITY AS m (d, n)
    {gate}
),
mc AS (
    INSERT INTO message_counters AS c (session_id, last_id)
    SELECT session_id, count(*) FROM mb GROUP BY session_id ORDER BY session_id
    ON CONFLICT (session_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id
    RETURNING session_id, last_id
),
mn AS (
    SELECT mb.*, mc.last_id - count(*) OVER (PARTITION BY mb.session_id)
            + row_number() OVER (PARTITION BY mb.session_id ORDER BY mb.n) AS id
    FROM mb JOIN mc USING (session_id)
),
mi AS (
    INSERT INTO messages (session_id, id, user_id, role, text, task_id, created_at, request_key)
    SELECT session_id, id, user_id, role, text, task_id, created_at, request_key FROM mn
    RETURNING session_id, id
)"""


_OPEN_ACTIONS = (
    "SELECT data FROM actions WHERE status IN ({})"  # literal, so the partial index applies
    ' AND id COLLATE "C" > %s ORDER BY id COLLATE "C" LIMIT %s'
).format(", ".join(f"'{s}'" for s in OPEN_ACTION_STATUSES))


class _Schema:
    """The migration runner's view of one PostgreSQL connection (in autocommit mode)."""

    backend = "postgres"

    def __init__(self, conn: Conn, where: str) -> None:
        self._conn = conn
        self.where = where

    def applied_version(self) -> int:
        try:
            row = self._conn.execute(_READ_VERSION).fetchone()
        except pg_errors.UndefinedTable:
            return 0
        return 0 if row is None else int(row[0])

    @contextmanager
    def locked(self) -> Iterator[int]:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            row = self._conn.execute(_READ_VERSION).fetchone()
            yield 0 if row is None else int(row[0])

    def apply(self, step: schema.SchemaStep) -> None:
        self._conn.execute(step.sql)
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(step.version),),
        )


_READ_VERSION = "SELECT value FROM meta WHERE key = 'schema_version'"


_MESSAGE_COLUMNS = "id, session_id, user_id, role, text, task_id, created_at, request_key"


def _message(row: Sequence[Any]) -> Message:
    return Message(
        id=int(row[0]),
        session_id=row[1],
        user_id=row[2],
        role=row[3],
        text=row[4],
        task_id=row[5],
        created_at=row[6].astimezone(UTC),
        request_key=row[7],
    )


def _messages_json(
    messages: Sequence[Message], remember: Remember | None = None, at: datetime | None = None
) -> Jsonb:
    """Messages as the statements' JSON batch (with the request key, which views leave out;
    and, to be remembered, what their memory items need beyond them, ``at`` their time)."""
    rows = [{**m.to_dict(), "request_key": m.request_key} for m in messages]
    if remember is not None:
        extras = remembered.message_fields(messages, at, remember)
        for row, extra in zip(rows, extras, strict=True):
            row.update(extra)
    return Jsonb(rows)
