"""A stand-in downstream service in its own SQLite file, for the demo and the crash tests.

Like a real payment or order API it receives requests carrying idempotency keys. It counts
every request per key and keeps the effects it made; an idempotent endpoint returns the
first effect again for a repeated key, a non-idempotent one makes a new effect each time,
so a test can see whether relaystate ever caused a duplicate.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

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


class Ledger:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode = WAL")
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), timeout=60, isolation_level=None)
        db.execute("PRAGMA synchronous = FULL")
        return db

    def apply(
        self, key: str, kind: str, payload: dict[str, Any], *, deduplicate: bool = True
    ) -> dict[str, Any]:
        """Receive one request; returns the effect (the first one again when deduplicating)."""
        db = self._connect()
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
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        finally:
            db.close()

    def status(self, key: str) -> dict[str, Any] | None:
        """The effect made for a key, if any (what a downstream status endpoint answers)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT effect FROM effects WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def entries(self) -> list[dict[str, Any]]:
        """Every key seen: its kind, how many requests arrived, how many effects were made."""
        with self._connect() as db:
            rows = db.execute(
                "SELECT r.idempotency_key, r.kind, r.count,"
                " (SELECT COUNT(*) FROM effects e WHERE e.idempotency_key = r.idempotency_key),"
                " (SELECT effect FROM effects e WHERE e.idempotency_key = r.idempotency_key"
                "  ORDER BY id LIMIT 1)"
                " FROM requests r ORDER BY r.rowid"
            ).fetchall()
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
