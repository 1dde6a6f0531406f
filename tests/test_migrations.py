"""Versioned schema migrations on SQLite and PostgreSQL: fresh, older, newer, concurrent, CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from relaystate import Scope
from relaystate.demo.ledger import Ledger
from relaystate.errors import SchemaTooNew, StoreURLError
from relaystate.model import MemoryItem
from relaystate.store import Backend, SQLiteStore
from relaystate.store import open_backend as open_store
from relaystate.store import schema as migrations
from relaystate.store.schema import SchemaStep

BACKENDS = ["sqlite", "postgres"]
SHIPPED_STEPS = migrations.steps

# What relaystate 0.1 created, before migrations existed (copied from its sqlite.py).
LEGACY_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    type TEXT NOT NULL,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_by_user ON tasks (user_id, status);
CREATE TABLE IF NOT EXISTS actions (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks (id),
    seq INTEGER NOT NULL,
    status TEXT NOT NULL,
    idempotency_key TEXT NOT NULL UNIQUE,
    lease_expires_at TEXT,
    data TEXT NOT NULL,
    UNIQUE (task_id, seq)
);
CREATE INDEX IF NOT EXISTS open_actions ON actions (lease_expires_at)
    WHERE status IN ('pending', 'running', 'unknown');
CREATE TABLE IF NOT EXISTS journal (
    task_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (task_id, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS baselines (
    task_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    id INTEGER NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    task_id TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS workers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    build TEXT NOT NULL,
    started_at TEXT NOT NULL,
    stopped_at TEXT
);
"""

# A second step that records each time it runs: it must run exactly once.
COUNTING_STEP_SQL = (
    "CREATE TABLE IF NOT EXISTS step_runs (pid INTEGER NOT NULL);\n"
    "INSERT INTO step_runs (pid) VALUES ({pid});\n"
)


def backend_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgres"


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Read the database directly, not through a store."""
    if url.startswith("sqlite:"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def execute(url: str, sql: str) -> None:
    if url.startswith("sqlite:"):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        db.execute(sql)
        db.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql)


def recorded_version(url: str) -> int:
    rows = query(url, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert len(rows) == 1
    return int(rows[0][0])


def extra_step(monkeypatch: pytest.MonkeyPatch, backend: str, sql: str) -> int:
    """Pretend this build ships one more step than it does; returns that step's version."""
    real = SHIPPED_STEPS
    version = len(real(backend)) + 1

    def steps(name: str) -> tuple[SchemaStep, ...]:
        known = real(name)
        return (*known, SchemaStep(len(known) + 1, "extra", sql))

    monkeypatch.setattr(migrations, "steps", steps)
    return version


@pytest.fixture
def opened() -> Iterator[list[Backend]]:
    stores: list[Backend] = []
    yield stores
    for store in stores:
        store.close()


# -- the steps themselves --------------------------------------------------------------------
def test_steps_are_numbered_from_one_and_shipped_for_both_backends() -> None:
    for backend in BACKENDS:
        found = migrations.steps(backend)
        assert [s.version for s in found] == list(range(1, len(found) + 1))
        assert found[0].label == "0001_initial" and "CREATE TABLE tasks" in found[0].sql


# -- fresh, older, newer -------------------------------------------------------------------
def test_a_fresh_database_gets_the_latest_schema(sql_store_url: str, opened: list[Backend]) -> None:
    store = open_store(sql_store_url)
    opened.append(store)
    status = store.schema_status()
    latest = migrations.latest(backend_of(sql_store_url))
    assert status is not None and (status.current, status.latest) == (latest, latest)
    assert status.up_to_date and status.pending == ()
    assert recorded_version(sql_store_url) == latest
    assert store.upgrade_schema() == []  # nothing left to do
    assert store.list_tasks(Scope.user("alice")) == []


def test_opening_without_migrating_leaves_the_database_alone(
    sql_store_url: str, opened: list[Backend]
) -> None:
    store = open_store(sql_store_url, migrate=False)
    opened.append(store)
    status = store.schema_status()
    assert status is not None and status.current == 0
    assert [s.version for s in status.pending] == [
        s.version for s in migrations.steps(status.backend)
    ]
    assert [s.label for s in store.upgrade_schema()] == [s.label for s in status.pending]
    after = store.schema_status()
    assert after is not None and after.up_to_date


def test_an_older_database_is_upgraded_on_open(
    sql_store_url: str, opened: list[Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    open_store(sql_store_url).close()  # at the version this build ships
    version = extra_step(monkeypatch, backend_of(sql_store_url), COUNTING_STEP_SQL.format(pid=1))
    store = open_store(sql_store_url, migrate=False)
    opened.append(store)
    status = store.schema_status()
    assert status is not None and (status.current, status.latest) == (version - 1, version)
    assert [s.label for s in status.pending] == [f"{version:04d}_extra"]
    again = open_store(sql_store_url)  # opening upgrades
    opened.append(again)
    assert recorded_version(sql_store_url) == version
    assert query(sql_store_url, "SELECT count(*) FROM step_runs") == [(1,)]
    assert again.upgrade_schema() == []


def test_a_failing_step_rolls_back_alone_and_can_be_retried(
    sql_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = backend_of(sql_store_url)
    version = extra_step(monkeypatch, backend, "CREATE TABLE broken (x INTEGER); SELECT nope;")
    with pytest.raises(Exception, match="nope"):
        open_store(sql_store_url)
    assert (
        recorded_version(sql_store_url) == version - 1
    )  # the earlier steps committed on their own
    tables = (
        "SELECT name FROM sqlite_master WHERE name = 'broken'"
        if backend == "sqlite"
        else "SELECT 1 WHERE to_regclass('broken') IS NOT NULL"
    )
    assert query(sql_store_url, tables) == []  # the failed step left nothing behind
    extra_step(monkeypatch, backend, "CREATE TABLE fixed (x INTEGER);")
    open_store(sql_store_url).close()
    assert recorded_version(sql_store_url) == version


def test_a_newer_database_is_refused(sql_store_url: str) -> None:
    open_store(sql_store_url).close()
    execute(sql_store_url, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(SchemaTooNew, match=r"database schema 999, newer than this relaystate"):
        open_store(sql_store_url)
    store = open_store(sql_store_url, migrate=False)
    try:
        status = store.schema_status()
        assert status is not None and status.too_new and not status.up_to_date
        with pytest.raises(SchemaTooNew):
            store.upgrade_schema()
    finally:
        store.close()
    assert recorded_version(sql_store_url) == 999


# -- SQLite files made before migrations existed ---------------------------------------------
def sqlite_schema(path: Path) -> set[tuple[str, str, str, str | None]]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    return {(r[0], r[1], r[2], r[3]) for r in rows}


def test_a_pre_migration_sqlite_file_is_version_1_with_the_same_schema(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.db"
    db = sqlite3.connect(legacy, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    for statement in LEGACY_SQLITE_SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
    db.execute("COMMIT")
    db.close()
    before = sqlite_schema(legacy)

    store = SQLiteStore(legacy, migrate=False)
    status = store.schema_status()
    store.close()
    assert (status.current, status.latest) == (1, migrations.latest("sqlite"))
    assert sqlite_schema(legacy) == before  # recognised as version 1, not touched

    fresh = tmp_path / "fresh.db"
    SQLiteStore(fresh).close()
    legacy_upgraded = SQLiteStore(legacy)
    legacy_upgraded.close()
    assert sqlite_schema(fresh) == sqlite_schema(legacy)  # the steps build the same schema


# -- many processes at once -------------------------------------------------------------------
OPENER = """
import sys, time
from relaystate.store import schema as migrations, open_backend as open_store
from relaystate.store.schema import SchemaStep

real = migrations.steps

def steps(backend):
    known = real(backend)
    return (*known, SchemaStep(len(known) + 1, "extra", sys.argv[3]))

migrations.steps = steps
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
store = open_store(sys.argv[1])
store.close()
"""


@pytest.mark.parametrize("processes", [8])
def test_processes_opening_a_fresh_database_at_once_migrate_it_exactly_once(
    sql_store_url: str, processes: int
) -> None:
    backend = backend_of(sql_store_url)
    start = time.time() + 1.5  # all of them open the store in the same instant
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                OPENER,
                sql_store_url,
                str(start),
                COUNTING_STEP_SQL.format(pid=i),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        if p.stdout:
            p.stdout.close()
        if p.stderr:
            p.stderr.close()
    assert [code for code, _ in results] == [0] * processes, [e for _, e in results if e]
    assert query(sql_store_url, "SELECT count(*) FROM step_runs") == [(1,)]
    assert recorded_version(sql_store_url) == migrations.latest(backend) + 1
    with pytest.raises(SchemaTooNew):  # and this build, one step behind, now refuses it
        open_store(sql_store_url)


# -- the command line -------------------------------------------------------------------------
def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relaystate.cli", *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_db_status_and_upgrade_from_the_command_line(sql_store_url: str, tmp_path: Path) -> None:
    backend = backend_of(sql_store_url)
    latest = migrations.latest(backend)
    every = [{"version": s.version, "name": s.name} for s in migrations.steps(backend)]

    if backend == "sqlite":  # a status never creates the file it was asked about
        missing = cli("db", "status", "--store", sql_store_url, "--json", cwd=tmp_path)
        assert missing.returncode == 2 and missing.stderr.startswith("error: ")
        path = Path(sql_store_url.removeprefix("sqlite:///"))
        assert str(path) in missing.stderr and not path.exists()
    else:
        status = as_json(cli("db", "status", "--store", sql_store_url, "--json", cwd=tmp_path))
        assert status == {
            "backend": backend,
            "current": 0,
            "latest": latest,
            "up_to_date": False,
            "too_new": False,
            "pending": every,
        }
    upgraded = as_json(cli("db", "upgrade", "--store", sql_store_url, "--json", cwd=tmp_path))
    assert upgraded == {
        "backend": backend,
        "from": 0,
        "to": latest,
        "latest": latest,
        "applied": every,
    }
    again = as_json(cli("db", "upgrade", "--store", sql_store_url, "--json", cwd=tmp_path))
    assert again["applied"] == [] and again["to"] == latest
    status = as_json(cli("db", "status", "--store", sql_store_url, "--json", cwd=tmp_path))
    assert status["up_to_date"] is True and status["pending"] == []

    text = cli("db", "status", "--store", sql_store_url, cwd=tmp_path)
    assert text.returncode == 0 and f"Schema version {latest}: up to date." in text.stdout

    execute(sql_store_url, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    refused = cli("db", "upgrade", "--store", sql_store_url, cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("error: ") and "newer than this relaystate" in refused.stderr
    assert "Traceback" not in refused.stderr
    status = as_json(cli("db", "status", "--store", sql_store_url, "--json", cwd=tmp_path))
    assert status["too_new"] is True and status["current"] == 999


def test_db_commands_reject_bad_input_in_one_line(tmp_path: Path) -> None:
    for args, message in [
        (["db", "status", "--store", "memory://"], "keeps no database schema"),
        (["db", "upgrade", "--store", "nosuch://x"], "unknown store URL"),
        (["db", "status", "--store", "postgresql://u:secret@127.0.0.1:1/x"], "cannot connect"),
    ]:
        proc = cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: ") and message in proc.stderr
        assert "secret" not in proc.stderr and "Traceback" not in proc.stderr


# -- PostgreSQL URL options and a missing driver -----------------------------------------------
def test_postgres_pool_size_is_ours_and_checked(postgres_url: str) -> None:
    from relaystate.store.postgres.store import PostgresStore

    store = open_store(postgres_url + "?pool_size=3&application_name=relaystate-test")
    try:
        assert isinstance(store, PostgresStore)
        assert store._connections._pool.max_size == 3
        with store._conn() as conn:  # libpq's own options still reach the server
            row = conn.execute("SELECT current_setting('application_name')").fetchone()
        assert row == ("relaystate-test",)
    finally:
        store.close()
    with pytest.raises(StoreURLError, match="pool_size"):
        open_store(postgres_url + "?pool_size=none")


def test_a_missing_psycopg_is_a_clear_url_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in [m for m in sys.modules if m.startswith("relaystate.store.postgres.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(StoreURLError, match=r"pip install 'relaystate\[postgres\]'"):
        open_store("postgresql://localhost/relaystate")


def test_the_journal_moves_to_a_rowid_table_with_every_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 4 (SQLite) rebuilds the journal; a store written at step 3 keeps its history."""
    from relaystate import Runtime
    from relaystate.store import Stores

    from .support import Clock, Script, order_template

    real = SHIPPED_STEPS
    monkeypatch.setattr(migrations, "steps", lambda name: real(name)[:3])
    path = tmp_path / "at3.db"
    alice = Scope.user("alice")
    with Runtime(
        Stores.of(SQLiteStore(path)),
        [order_template(Ledger(tmp_path / "l.db"), Script())],
        clock=Clock(),
    ) as rt:
        tid = rt.start(alice, "order", slots={"item": "tea"}).task.id
        rt.fill(alice, tid, {"size": "M"})
        rt.fill(alice, tid, {"note": "x" * 3000})  # a delta that overflowed a WITHOUT ROWID page
        _, before = rt.history(alice, tid)
        state = rt.task(alice, tid).to_dict()
    assert (
        "WITHOUT ROWID"
        in query(f"sqlite:///{path}", "SELECT sql FROM sqlite_master WHERE name = 'journal'")[0][0]
    )
    monkeypatch.setattr(migrations, "steps", real)

    with Runtime(
        Stores.of(SQLiteStore(path)), [order_template(Ledger(tmp_path / "l.db"), Script())]
    ) as rt:
        assert rt.schema_status(Scope.admin("test")).current == migrations.latest("sqlite")  # type: ignore[union-attr]
        _, after = rt.history(alice, tid)
        assert [e.to_dict() for e in after] == [e.to_dict() for e in before]
        assert rt.replay(alice, tid).to_dict() == state
    (sql,) = query(f"sqlite:///{path}", "SELECT sql FROM sqlite_master WHERE name = 'journal'")[0]
    assert "WITHOUT ROWID" not in sql
    indexes = query(
        f"sqlite:///{path}",
        "SELECT name FROM sqlite_master WHERE tbl_name = 'journal' AND type = 'index'",
    )
    assert [r[0] for r in indexes] == ["journal_by_task"]


def test_items_written_before_the_change_feed_are_loaded_in_full_then_followed(
    sql_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step that adds ``memories.changed`` keeps an existing database's items (stamped
    0: not in the feed, only in a full load) and its generations; writes after it are."""
    backend = backend_of(sql_store_url)
    feed = next(s.version for s in SHIPPED_STEPS(backend) if s.name == "memory_changes")
    monkeypatch.setattr(migrations, "steps", lambda name: SHIPPED_STEPS(name)[: feed - 1])
    open_store(sql_store_url).close()
    old = "'alice', 'chat', 'old', 'kept from before', '{}'"
    execute(
        sql_store_url,
        f"INSERT INTO memories (user_id, namespace, id, text, data) VALUES ({old})"
        if backend == "sqlite"
        else "INSERT INTO memories (user_id, namespace, id, text, data, words)"
        f" VALUES ({old}, to_tsvector('english', 'kept from before'))",
    )
    execute(
        sql_store_url,
        "INSERT INTO memory_generations (user_id, namespace, generation)"
        " VALUES ('alice', 'chat', 3)",
    )
    monkeypatch.setattr(migrations, "steps", SHIPPED_STEPS)

    store = open_store(sql_store_url)
    try:
        assert recorded_version(sql_store_url) == migrations.latest(backend)
        assert query(sql_store_url, "SELECT id, changed FROM memories") == [("old", 0)]
        memories = store.memories  # type: ignore[attr-defined]
        assert memories.memory_generation("alice", "chat") == 3
        assert [m.text for m in memories.latest_memories("alice", "chat", limit=9)] == [
            "kept from before"
        ]
        none = memories.memory_changes("alice", "chat", 0)
        assert (none.generation, none.items) == (3, [])  # the full load has it
        at = datetime(2026, 1, 1, tzinfo=UTC)
        memories.put_memories([MemoryItem("new", "alice", "chat", "written after", at)], at=at)
        memories.put_memories([MemoryItem("old", "alice", "chat", "replaced after", at)], at=at)
        changes = memories.memory_changes("alice", "chat", 3)
        assert changes.generation == 5
        assert [(m.id, m.text) for m in changes.items] == [
            ("new", "written after"),
            ("old", "replaced after"),
        ]
    finally:
        store.close()
