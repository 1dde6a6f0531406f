"""A stand-in downstream service in its own SQLite file, for the demo and the crash tests.

Like a real payment or order API it receives requests carrying idempotency keys. It counts
every request per key and keeps the effects it made; an idempotent endpoint returns the
first effect again for a repeated key, a non-idempotent one makes a new effect each time,
so a test can see whether relaystate ever caused a duplicate.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..store.sqlite.files import check_path, check_tables, connect, rollback, translated

_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    idempotency_key TEXT PRIMARY KEY, kind TEXT NOT NULL, count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL, kind TEXT NOT NULL,
    effect TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS effects_by_key ON effects (idempotency_key);
"""


_TABLES = ("requests", "effects")


class Ledger:
    """The downstream's file. It is created by the first request it receives, so that only
    looking (``status``, ``entries``, a read-only command) never leaves a file behind;
    ``create=False`` refuses a missing or empty file instead. A path that cannot be a ledger
    (a directory, a text file, the relaystate store itself...) is refused at once, naming it.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self._ready = False
        check_path(self.path, create=create, what="ledger")
        if self.path.is_file() and self.path.stat().st_size:
            with translated(self.path, what="ledger"):
                db = self._connect()
                try:
                    check_tables(db, self.path, expected=_TABLES, what="ledger")
                finally:
                    db.close()

    def _connect(self) -> sqlite3.Connection:
        db = connect(self.path, timeout=60, isolation_level=None)
        db.execute("PRAGMA synchronous = FULL")
        return db

    def _ensure(self, db: sqlite3.Connection) -> None:
        """WAL mode and the tables, once per object. Processes creating the file at once race
        to switch it to WAL, which answers "locked" at once rather than waiting: retry."""
        if self._ready:
            return
        deadline = time.monotonic() + 60
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        db.executescript(_SCHEMA)
        self._ready = True

    def _rows(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        """A query's rows; none while no request has arrived (no file, or no tables yet)."""
        if not self.path.exists():
            return []
        with translated(self.path, what="ledger"):
            db = self._connect()
            try:
                if not db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'effects'"
                ).fetchone():
                    return []
                return db.execute(sql, args).fetchall()
            finally:
                db.close()

    def apply(
        self, key: str, kind: str, payload: dict[str, Any], *, deduplicate: bool = True
    ) -> dict[str, Any]:
        """Receive one request; returns the effect (the first one again when deduplicating)."""
        with translated(self.path, what="ledger"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = self._connect()
            try:
                self._ensure(db)
                return self._apply(db, key, kind, payload, deduplicate=deduplicate)
            finally:
                db.close()

    @staticmethod
    def _apply(
        db: sqlite3.Connection, key: str, kind: str, payload: dict[str, Any], *, deduplicate: bool
    ) -> dict[str, Any]:
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "INSERT INTO requests (idempotency_key, kind, count) VALUES (?, ?, 1)"
                " ON CONFLICT (idempotency_key) DO UPDATE SET count = count + 1",
                (key, kind),
            )
            row = db.execute(
                "SELECT id, effect FROM effects WHERE idempotency_key = ? ORDER BY id LIMIT 1",
                (key,),
            ).fetchone()
            if row is not None and deduplicate:
                db.execute("COMMIT")
                return dict(json.loads(row[1]))
            count = db.execute("SELECT COUNT(*) FROM effects").fetchone()[0]
            effect = {"id": f"{kind.upper()[:3]}-{count + 1:05d}", **payload}
            db.execute(
                "INSERT INTO effects (idempotency_key, kind, effect) VALUES (?, ?, ?)",
                (key, kind, json.dumps(effect, ensure_ascii=False)),
            )
            db.execute("COMMIT")
            return effect
        except BaseException:
            rollback(db)
            raise

    def status(self, key: str) -> dict[str, Any] | None:
        """The effect made for a key, if any (what a downstream status endpoint answers)."""
        rows = self._rows(
            "SELECT effect FROM effects WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,)
        )
        return dict(json.loads(rows[0][0])) if rows else None

    def entries(self) -> list[dict[str, Any]]:
        """Every key seen: its kind, how many requests arrived, how many effects were made."""
        rows = self._rows(
            "SELECT r.idempotency_key, r.kind, r.count,"
            " (SELECT COUNT(*) FROM effects e WHERE e.idempotency_key = r.idempotency_key),"
            " (SELECT effect FROM effects e WHERE e.idempotency_key = r.idempotency_key"
            "  ORDER BY id LIMIT 1)"
            " FROM requests r ORDER BY r.rowid"
        )
        return [
            {
                "idempotency_key": key,
                "kind": kind,
                "requests": count,
                "effects": effects,
                "effect": None if effect is None else json.loads(effect),
            }
            for key, kind, count, effects, effect in rows
        ]
