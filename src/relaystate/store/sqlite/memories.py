"""Long-term memory in SQLite: items, an FTS5 index of their words, their vectors.

The same class serves the embedded store (the store's own file and connection) and
``memory://`` (a private in-memory SQLite database), so the two rank alike: one full-text
engine, not a second one written by hand. Vectors are float32 blobs; the search over them
happens in the process (``relaystate.memory.longterm``), which at 100,000 items is a few
milliseconds of numpy and needs no extension that the stdlib ``sqlite3`` cannot load.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

from ...model import MemoryItem, from_iso, to_iso
from ..keyword_rank import OwnerCounts, idf
from ..roles import Memories, MemoryChanges, MemoryFilter
from ..scripts import fold, has_han
from ..storable import refuse_unstorable, storable_items
from ..terms import fts5_query, index_text
from .connection import Read, Tx, statements

_COLUMNS = "id, user_id, namespace, text, at, source, task_id, data"
MEMORY_STEPS = (6, 7, 12)
"""The SQLite schema steps of long-term and working memory (and of memory's change feed)."""


def owner_token(user_id: str, namespace: str) -> str:
    """One index token per (user, namespace): letters only, so no tokenizer splits it."""
    digest = hashlib.sha256(f"{user_id}\0{namespace}".encode()).digest()[:12]
    return "ns" + "".join(chr(ord("a") + b % 26) for b in digest)


class SQLiteMemories(Memories):
    """The memory role over a SQLite connection whose schema has steps 6 and 12."""

    def __init__(self, tx: Tx, read: Read) -> None:
        self._tx, self._read = tx, read
        self._counts = OwnerCounts()

    def put_memories(self, items: Sequence[MemoryItem], *, at: datetime) -> int:
        storable_items(items)
        with self._tx() as db:
            put_in(db, items, at=at)
        return len(items)

    def get_memories(self, user_id: str, namespace: str, ids: Sequence[str]) -> list[MemoryItem]:
        refuse_unstorable("ids", ids)
        found: dict[str, MemoryItem] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ", ".join("?" * len(part))
            for row in self._read(
                f"SELECT {_COLUMNS} FROM memories"
                f" WHERE user_id = ? AND namespace = ? AND id IN ({marks})",
                (user_id, namespace, *part),
            ):
                item = _item(row)
                found[item.id] = item
        return [found[i] for i in unique if i in found]

    def count_memories(self, user_id: str, namespace: str) -> int:
        rows = self._read(
            "SELECT count(*) FROM memories WHERE user_id = ? AND namespace = ?",
            (user_id, namespace),
        )
        return int(rows[0][0])

    def latest_memories(
        self, user_id: str, namespace: str, *, task_id: str | None = None, limit: int
    ) -> list[MemoryItem]:
        refuse_unstorable("task_id", (task_id,))
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND namespace = ?"
        args: list[object] = [user_id, namespace]
        if task_id is not None:
            sql += " AND task_id = ?"
            args.append(task_id)
        rows = self._read(sql + " ORDER BY at DESC, n DESC LIMIT ?", [*args, limit])
        return [_item(r) for r in reversed(rows)]

    def search_words(
        self,
        user_id: str,
        namespace: str,
        terms: Sequence[str],
        *,
        k: int,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """Ranked by the owner's own statistics (:mod:`..keyword_rank`): FTS5 counts each
        term's matches in the owner's items (its ``owner`` token AND the term), then one
        statement sums the idf of the terms each match holds."""
        refuse_unstorable("terms", terms)
        if not terms or k < 1:
            return []
        owner = owner_token(user_id, namespace)
        matches = [
            f'owner : "{owner}" AND words : ({fts5_query([t])})'
            for t in dict.fromkeys(fold(t) for t in terms)
        ]
        counted = " UNION ALL ".join(
            "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?" for _ in matches
        )
        holding = [int(r[0]) for r in self._read(counted, matches)]
        asked = [(m, h) for m, h in zip(matches, holding, strict=True) if h]
        if not asked:
            return []
        items = self._counts.get(
            user_id,
            namespace,
            self.memory_generation(user_id, namespace),
            lambda: self.count_memories(user_id, namespace),
        )
        arms = " UNION ALL ".join(
            "SELECT rowid AS n, ? AS w FROM memories_fts WHERE memories_fts MATCH ?" for _ in asked
        )
        weighed = [a for m, h in asked for a in (idf(items, h), m)]
        extra, args = _filter(where or MemoryFilter())
        if not extra:
            # ranked and cut before the join: only the k best are read (the join's check
            # stays, in case two owners share a token)
            rows = self._read(
                "SELECT m.id, best.score FROM (SELECT n, sum(w) AS score"
                f" FROM ({arms}) GROUP BY n ORDER BY score DESC, n LIMIT ?) AS best"
                " JOIN memories m ON m.n = best.n WHERE m.user_id = ? AND m.namespace = ?"
                " ORDER BY best.score DESC, m.n",
                (*weighed, k, user_id, namespace),
            )
        else:
            rows = self._read(
                f"SELECT m.id, sum(x.w) AS score FROM ({arms}) AS x JOIN memories m ON m.n = x.n"
                f" WHERE m.user_id = ? AND m.namespace = ?{extra}"
                " GROUP BY x.n ORDER BY score DESC, x.n LIMIT ?",
                (*weighed, user_id, namespace, *args, k),
            )
        return [(str(i), float(s)) for i, s in rows]

    def put_vectors(
        self, user_id: str, namespace: str, embedder: str, vectors: Sequence[tuple[str, bytes]]
    ) -> None:
        with self._tx() as db:
            generation = _bump(db, {(user_id, namespace)})[user_id, namespace]
            for item_id, blob in vectors:
                db.execute(
                    "INSERT OR REPLACE INTO memory_vectors (n, embedder, vector)"
                    " SELECT n, ?, ? FROM memories"
                    " WHERE user_id = ? AND namespace = ? AND id = ?",
                    (embedder, blob, user_id, namespace, item_id),
                )
                db.execute(
                    "UPDATE memories SET embedded_by = ?, changed = ?"
                    " WHERE user_id = ? AND namespace = ? AND id = ?",
                    (embedder, generation, user_id, namespace, item_id),
                )

    def load_vectors(
        self, user_id: str, namespace: str, embedder: str, where: MemoryFilter | None = None
    ) -> list[tuple[str, bytes]]:
        extra, args = _filter(where or MemoryFilter())
        rows = self._read(
            "SELECT m.id, v.vector FROM memory_vectors v JOIN memories m ON m.n = v.n"
            f" WHERE v.embedder = ? AND m.user_id = ? AND m.namespace = ?{extra} ORDER BY m.n",
            (embedder, user_id, namespace, *args),
        )
        return [(str(i), bytes(b)) for i, b in rows]

    def unembedded(
        self, user_id: str, namespace: str, embedder: str, *, limit: int
    ) -> list[MemoryItem]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND namespace = ?"
            " AND (embedded_by IS NULL OR embedded_by < ? OR embedded_by > ?)"
            " ORDER BY n LIMIT ?",
            (user_id, namespace, embedder, embedder, limit),
        )
        return [_item(r) for r in rows]

    def unembedded_owners(self, namespace: str, embedder: str, *, limit: int) -> list[str]:
        rows = self._read(
            "SELECT DISTINCT user_id FROM memories WHERE namespace = ?"
            " AND (embedded_by IS NULL OR embedded_by < ? OR embedded_by > ?)"
            " ORDER BY user_id LIMIT ?",
            (namespace, embedder, embedder, limit),
        )
        return [str(r[0]) for r in rows]

    def reindex_words(self, *, batch: int = 500) -> int:
        done, after = 0, 0
        while True:
            rows = self._read(
                "SELECT m.n, m.user_id, m.namespace, m.text, f.words FROM memories m"
                " JOIN memories_fts f ON f.rowid = m.n WHERE m.n > ? ORDER BY m.n LIMIT ?",
                (after, batch),
            )
            if not rows:
                return done
            after = rows[-1][0]
            stale = [r for r in rows if has_han(r[3]) and index_text(r[3]) != r[4]]
            touched: set[tuple[str, str]] = set()
            with self._tx() as db:
                for n, user_id, namespace, text, _ in stale:
                    if db.execute(  # unless a writer replaced the item meanwhile
                        "SELECT 1 FROM memories WHERE n = ? AND text = ?", (n, text)
                    ).fetchone():
                        db.execute(
                            "UPDATE memories_fts SET words = ? WHERE rowid = ?",
                            (index_text(text), n),
                        )
                        touched.add((user_id, namespace))
                        done += 1
                _bump(db, touched)

    def memory_generation(self, user_id: str, namespace: str) -> int:
        rows = self._read(
            "SELECT generation FROM memory_generations WHERE user_id = ? AND namespace = ?",
            (user_id, namespace),
        )
        return int(rows[0][0]) if rows else 0

    def memory_changes(
        self, user_id: str, namespace: str, after: int, *, embedder: str | None = None
    ) -> MemoryChanges:
        """One statement, so the generation and the rows come from one snapshot (writers
        are serialised by the database's write lock, and each stamps its rows with the
        generation it bumped to first: every stamp up to the one read is committed)."""
        sql = _CHANGED_WITH_VECTORS if embedder is not None else _CHANGED
        rows = self._read(sql, (user_id, namespace, embedder, after))
        generation = int(rows[0][0])
        items = [_item(r[1:]) for r in rows if r[1] is not None]
        vectors = {str(r[1]): bytes(r[-1]) for r in rows if r[-1] is not None}
        return MemoryChanges(generation, items, vectors)


_CHANGED = """
SELECT g.generation, {columns}, {vector}
FROM (SELECT coalesce((SELECT generation FROM memory_generations
        WHERE user_id = ?1 AND namespace = ?2), 0) AS generation, ?3 AS embedder) AS g
LEFT JOIN memories m ON m.user_id = ?1 AND m.namespace = ?2
    AND m.changed > ?4 AND m.changed <= g.generation
{join}ORDER BY m.changed, m.n
"""
"""The namespace's generation (one row even when nothing changed), and the rows stamped
after a generation up to it, by stamp then by row (the order written): by the index on
``(user_id, namespace, changed)``."""
_M_COLUMNS = ", ".join(f"m.{c}" for c in _COLUMNS.split(", "))
_CHANGED_WITH_VECTORS = _CHANGED.format(
    columns=_M_COLUMNS,
    vector="v.vector",
    join="LEFT JOIN memory_vectors v ON v.n = m.n AND v.embedder = g.embedder\n",
)
_CHANGED = _CHANGED.format(columns=_M_COLUMNS, vector="NULL", join="")


def private_database() -> tuple[Tx, Read, Callable[[], None]]:
    """A private in-memory SQLite database with the memory tables (schema steps 6, 7, 12),
    for ``memory://`` stores: how to write, how to read, how to close it."""
    from .. import schema

    db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    lock = threading.RLock()
    for step in schema.steps("sqlite"):
        if step.version in MEMORY_STEPS:
            for statement in statements(step.sql):
                db.execute(statement)

    def tx() -> AbstractContextManager[sqlite3.Connection]:
        return _locked_tx(db, lock)

    def read(sql: str, args: Sequence[object]) -> list[tuple[Any, ...]]:
        with lock:
            return db.execute(sql, args).fetchall()

    return tx, read, db.close


@contextmanager
def _locked_tx(db: sqlite3.Connection, lock: threading.RLock) -> Iterator[sqlite3.Connection]:
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


def put_in(
    db: sqlite3.Connection,
    items: Sequence[MemoryItem],
    *,
    at: datetime | None,
    vectors: tuple[str, Sequence[bytes]] | None = None,
) -> None:
    """Add or replace items and their keyword index rows in the caller's transaction (the
    turn's commit, or :meth:`SQLiteMemories.put_memories`); ``at`` None: each item's time.
    ``vectors``: an embedder's name and one blob per item, written with them. Each
    namespace's generation is bumped first, and its rows are stamped with the new one."""
    generations = _bump(db, {(item.user_id, item.namespace) for item in items})
    blobs = vectors[1] if vectors is not None else [None] * len(items)
    for item, blob in zip(items, blobs, strict=True):
        old = db.execute(
            "SELECT n FROM memories WHERE user_id = ? AND namespace = ? AND id = ?",
            (item.user_id, item.namespace, item.id),
        ).fetchone()
        if old is not None:
            db.execute("DELETE FROM memories_fts WHERE rowid = ?", old)
            db.execute("DELETE FROM memory_vectors WHERE n = ?", old)
            db.execute("DELETE FROM memories WHERE n = ?", old)
        n = db.execute(
            f"INSERT INTO memories ({_COLUMNS}, embedded_by, changed)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                *_row(item, at if at is not None else item.time),
                vectors and vectors[0],
                generations[item.user_id, item.namespace],
            ),
        ).lastrowid
        db.execute(
            "INSERT INTO memories_fts (rowid, owner, words) VALUES (?, ?, ?)",
            (n, owner_token(item.user_id, item.namespace), index_text(item.text)),
        )
        if vectors is not None:
            db.execute(
                "INSERT INTO memory_vectors (n, embedder, vector) VALUES (?, ?, ?)",
                (n, vectors[0], blob),
            )


def _bump(db: sqlite3.Connection, touched: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """Move each namespace's generation on; the new ones, to stamp the rows written next."""
    generations = {}
    for user_id, namespace in sorted(touched):
        [(generation,)] = db.execute(
            "INSERT INTO memory_generations (user_id, namespace, generation) VALUES (?, ?, 1)"
            " ON CONFLICT (user_id, namespace) DO UPDATE SET generation = generation + 1"
            " RETURNING generation",
            (user_id, namespace),
        ).fetchall()
        generations[user_id, namespace] = int(generation)
    return generations


def _filter(where: MemoryFilter) -> tuple[str, list[object]]:
    refuse_unstorable("where.sources", where.sources)
    refuse_unstorable("where.task_ids", where.task_ids)
    sql, args = "", list[object]()
    if where.since is not None:
        sql += " AND m.at >= ?"
        args.append(to_iso(where.since))
    if where.until is not None:
        sql += " AND m.at < ?"
        args.append(to_iso(where.until))
    for column, values in (("source", where.sources), ("task_id", where.task_ids)):
        if values:
            sql += f" AND m.{column} IN ({', '.join('?' * len(values))})"
            args.extend(values)
    return sql, args


def _row(item: MemoryItem, at: datetime | None) -> tuple[object, ...]:
    data = {"metadata": item.metadata, "cites": list(item.cites), "added_at": to_iso(at)}
    return (
        item.id,
        item.user_id,
        item.namespace,
        item.text,
        to_iso(item.time),
        item.source,
        item.task_id,
        json.dumps(data, separators=(",", ":"), ensure_ascii=False),
    )


def _item(row: Sequence[Any]) -> MemoryItem:
    data = json.loads(row[7])
    return MemoryItem(
        id=row[0],
        user_id=row[1],
        namespace=row[2],
        text=row[3],
        time=from_iso(row[4]),
        source=row[5],
        task_id=row[6],
        metadata=data.get("metadata") or {},
        cites=tuple(data.get("cites") or ()),
        added_at=from_iso(data.get("added_at")),
    )
