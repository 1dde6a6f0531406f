"""What every side of ``make bench-compare`` shares (stdlib only: it is imported by the
relaystate, LangGraph and DBOS sides alike, each in its own environment)."""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
from pathlib import Path
from typing import Any


def payload(i: int) -> tuple[str, str, str]:
    """Turn ``i``'s user line, reply and slot value: realistic sizes, new every turn (the
    same as ``bench/turns.py``)."""
    user = f"[{i}] Could you make it an early flight, ideally before nine, with a window seat?"
    reply = (
        f"[{i}] Noted: early departure before 09:00 and a window seat. I still need one more "
        "detail before I can look for flights; which airport would you like to leave from, "
        "and are your dates flexible by a day or two?"
    )
    note = f"turn {i}: the user would like a window seat and an early departure"
    return user, reply, note


def io_written() -> int:
    """Bytes this process has handed to write(2) so far (``wchar``: the WAL, the database,
    the journal; page cache or not), from /proc/self/io."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pg(store: str, sql: str) -> tuple[Any, ...]:
    import psycopg

    with psycopg.connect(store, autocommit=True) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return tuple(row)


def written(store: str) -> int:
    """Bytes written so far: for SQLite those this process hands to write(2) (its syncs are
    counted by strace, outside); for PostgreSQL the WAL's position (``pg_current_wal_lsn()``:
    exact, cluster-wide). PostgreSQL's syncs are not counted: its counter (``pg_stat_wal``)
    is flushed lazily by the writing backend, and a commit makes one WAL flush (fewer under
    group commit)."""
    if store.startswith("postgres"):
        (lsn,) = _pg(store, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
        return int(lsn)
    return io_written()


def sizes(store: str) -> int:
    """Bytes the store takes: a SQLite store's files (database + WAL); a PostgreSQL
    database's size."""
    if store.startswith("postgres"):
        return int(_pg(store, "SELECT pg_database_size(current_database())")[0])
    path = Path(store.removeprefix("sqlite:///"))
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def mark_line(mark: int, times: list[float], before: int, store: str) -> str:
    """One history mark's figures, as a JSON line; ``before``: ``written()`` at its start."""
    return json.dumps(
        {
            "history": mark,
            "turn_ms": statistics.median(times) * 1e3,
            "turn_p95_ms": sorted(times)[int(0.95 * (len(times) - 1))] * 1e3,
            "bytes_per_turn": (written(store) - before) / max(len(times), 1),
            "db_bytes": sizes(store),
        }
    )


def ledger_append(path: Path, order: str, kind: str) -> None:
    """The downstream's durable effect: one row per call, no deduplication (a payment
    provider that charges again when asked again)."""
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS effects (n INTEGER PRIMARY KEY, ref TEXT, kind TEXT)"
        )
        db.execute("INSERT INTO effects (ref, kind) VALUES (?, ?)", (order, kind))


def ledger_count(path: Path, kind: str = "payment") -> dict[str, Any]:
    if not path.exists():
        return {}
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT ref, count(*) FROM effects WHERE kind = ? GROUP BY ref", (kind,)
        ).fetchall()
    return {str(ref): int(n) for ref, n in rows}


def env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}
