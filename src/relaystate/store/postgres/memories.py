"""Long-term memory in PostgreSQL: items with a ``tsvector`` of their words (GIN-indexed),
ranked by ``ts_rank``; vectors as float32 ``bytea``, searched in the process like SQLite's
(``relaystate.memory.longterm``), so no server extension is needed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ...model import MemoryItem
from ..keyword_rank import OwnerCounts, idf
from ..roles import Memories, MemoryChanges, MemoryFilter
from ..scripts import fold, has_han
from ..storable import refuse_unstorable, storable_items
from ..terms import index_text
from .connections import Conn

_COLUMNS = "id, user_id, namespace, text, at, source, task_id, data"
CONFIG = "english"
"""The text search configuration: English stemming and stop words; CJK bigrams pass as
they are."""

_PUT = f"""
INSERT INTO memories ({_COLUMNS}, words, changed)
VALUES (%(id)s, %(user_id)s, %(namespace)s, %(text)s, %(at)s, %(source)s, %(task_id)s,
        %(data)s, to_tsvector('{CONFIG}', %(words)s), %(changed)s)
ON CONFLICT (user_id, namespace, id) DO UPDATE SET
    text = EXCLUDED.text, at = EXCLUDED.at, source = EXCLUDED.source,
    task_id = EXCLUDED.task_id, data = EXCLUDED.data, words = EXCLUDED.words,
    embedded_by = NULL, changed = EXCLUDED.changed
"""
_BUMP = """
INSERT INTO memory_generations (user_id, namespace, generation) VALUES (%s, %s, 1)
ON CONFLICT (user_id, namespace) DO UPDATE SET generation = memory_generations.generation + 1
RETURNING generation
"""
"""A write's first statement in a namespace: the new generation, to stamp its rows with.
The row stays locked until the write commits, so one namespace's writers take their
generations, and commit, one after another (see :meth:`PostgresMemories.memory_changes`)."""

_STALE = f"""
SELECT m.n, m.user_id, m.namespace
FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS x (n, text, words)
JOIN memories m ON m.n = x.n AND m.text = x.text
WHERE m.words IS DISTINCT FROM to_tsvector('{CONFIG}', x.words)
"""
"""Which of a batch's items (n, text, words as indexed today) are indexed otherwise."""

_M_COLUMNS = ", ".join(f"m.{c}" for c in _COLUMNS.split(", "))
_CHANGED = f"""
SELECT g.generation, {_M_COLUMNS}, {{vector}}
FROM (SELECT coalesce((SELECT generation FROM memory_generations
        WHERE user_id = %(u)s AND namespace = %(ns)s), 0) AS generation) AS g
LEFT JOIN memories m ON m.user_id = %(u)s AND m.namespace = %(ns)s
    AND m.changed > %(after)s AND m.changed <= g.generation
{{join}}ORDER BY m.changed, m.n
"""
"""The namespace's generation (one row even when nothing changed), and the rows stamped
after a generation up to it, by stamp then by row (the order written), in one snapshot."""
_CHANGED_WITH_VECTORS = _CHANGED.format(
    vector="v.vector",
    join="LEFT JOIN memory_vectors v ON v.n = m.n AND v.embedder = %(e)s\n",
)
_CHANGED = _CHANGED.format(vector="NULL::bytea", join="")

_HOLDING = f"""
SELECT (SELECT generation FROM memory_generations WHERE user_id = %(u)s AND namespace = %(ns)s),
    x.t, (SELECT count(*) FROM memories m WHERE m.user_id = %(u)s AND m.namespace = %(ns)s
        AND m.words @@ plainto_tsquery('{CONFIG}', x.t))
FROM unnest(%(terms)s::text[]) AS x (t)
"""
"""The namespace's generation and, per term, how many of the owner's items hold it."""
_RANKED = """
SELECT m.id, sum(x.w) AS score
FROM unnest(%s::text[], %s::float8[]) AS x (t, w)
JOIN memories m ON m.words @@ plainto_tsquery('{config}', x.t)
WHERE m.user_id = %s AND m.namespace = %s{extra}
GROUP BY m.n, m.id ORDER BY score DESC, m.n LIMIT %s
"""
"""The owner's items holding any term, each scored by the idf of the terms it holds."""


class PostgresMemories(Memories):
    """The memory role over a PostgreSQL store's connections (schema steps 5 and 11)."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Conn]]) -> None:
        self._connection = connection
        self._counts = OwnerCounts()

    def _rows(self, sql: str, args: Sequence[object] | Mapping[str, object]) -> list[Any]:
        with self._connection() as conn:
            return conn.execute(sql, args).fetchall()

    def put_memories(self, items: Sequence[MemoryItem], *, at: datetime) -> int:
        storable_items(items)
        touched = sorted({(i.user_id, i.namespace) for i in items})
        with self._connection() as conn, conn.transaction():
            generations = {key: _bump(conn, *key) for key in touched}  # first, in one order
            for item in items:
                old = conn.execute(
                    "SELECT n FROM memories WHERE user_id = %s AND namespace = %s AND id = %s",
                    (item.user_id, item.namespace, item.id),
                ).fetchone()
                if old is not None:  # a replaced item loses its vectors
                    conn.execute("DELETE FROM memory_vectors WHERE n = %s", old)
                stamp = generations[item.user_id, item.namespace]
                conn.execute(_PUT, {**_params(item, at), "changed": stamp})
        return len(items)

    def get_memories(self, user_id: str, namespace: str, ids: Sequence[str]) -> list[MemoryItem]:
        refuse_unstorable("ids", ids)
        unique = list(dict.fromkeys(ids))
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM memories"
            " WHERE user_id = %s AND namespace = %s AND id = ANY(%s)",
            (user_id, namespace, unique),
        )
        found = {r[0]: _item(r) for r in rows}
        return [found[i] for i in unique if i in found]

    def count_memories(self, user_id: str, namespace: str) -> int:
        rows = self._rows(
            "SELECT count(*) FROM memories WHERE user_id = %s AND namespace = %s",
            (user_id, namespace),
        )
        return int(rows[0][0])

    def latest_memories(
        self, user_id: str, namespace: str, *, task_id: str | None = None, limit: int
    ) -> list[MemoryItem]:
        refuse_unstorable("task_id", (task_id,))
        sql = f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND namespace = %s"
        args: list[object] = [user_id, namespace]
        if task_id is not None:
            sql += " AND task_id = %s"
            args.append(task_id)
        rows = self._rows(sql + " ORDER BY at DESC NULLS LAST, n DESC LIMIT %s", [*args, limit])
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
        """Ranked by the owner's own statistics (:mod:`..keyword_rank`): the GIN index counts
        the owner's items holding each term, then one statement sums the idf of the terms
        each of them holds."""
        refuse_unstorable("terms", terms)
        if not terms or k < 1:
            return []
        asked = list(dict.fromkeys(fold(t) for t in terms))
        with self._connection() as conn:
            first = conn.execute(
                _HOLDING, {"u": user_id, "ns": namespace, "terms": asked}
            ).fetchall()
            generation = int(first[0][0] or 0) if first else 0
            holding = {str(t): int(h) for _, t, h in first if h}
            if not holding:
                return []
            items = self._counts.get(
                user_id,
                namespace,
                generation,
                lambda: _count(conn, user_id, namespace),
            )
            found = [t for t in asked if t in holding]
            weights = [idf(items, holding[t]) for t in found]
            extra, args = _filter(where or MemoryFilter())
            rows = conn.execute(
                _RANKED.format(config=CONFIG, extra=extra),
                (found, weights, user_id, namespace, *args, k),
            ).fetchall()
        return [(str(i), float(s)) for i, s in rows]

    def put_vectors(
        self, user_id: str, namespace: str, embedder: str, vectors: Sequence[tuple[str, bytes]]
    ) -> None:
        with self._connection() as conn, conn.transaction():
            generation = _bump(conn, user_id, namespace)
            for item_id, blob in vectors:
                conn.execute(
                    "INSERT INTO memory_vectors (n, embedder, vector)"
                    " SELECT n, %s, %s FROM memories"
                    " WHERE user_id = %s AND namespace = %s AND id = %s"
                    " ON CONFLICT (n, embedder) DO UPDATE SET vector = EXCLUDED.vector",
                    (embedder, blob, user_id, namespace, item_id),
                )
                conn.execute(
                    "UPDATE memories SET embedded_by = %s, changed = %s"
                    " WHERE user_id = %s AND namespace = %s AND id = %s",
                    (embedder, generation, user_id, namespace, item_id),
                )

    def load_vectors(
        self, user_id: str, namespace: str, embedder: str, where: MemoryFilter | None = None
    ) -> list[tuple[str, bytes]]:
        extra, args = _filter(where or MemoryFilter())
        rows = self._rows(
            "SELECT m.id, v.vector FROM memory_vectors v JOIN memories m ON m.n = v.n"
            f" WHERE v.embedder = %s AND m.user_id = %s AND m.namespace = %s{extra}"
            " ORDER BY m.n",
            (embedder, user_id, namespace, *args),
        )
        return [(str(i), bytes(b)) for i, b in rows]

    def unembedded(
        self, user_id: str, namespace: str, embedder: str, *, limit: int
    ) -> list[MemoryItem]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM memories WHERE user_id = %s AND namespace = %s"
            " AND (embedded_by IS NULL OR embedded_by < %s OR embedded_by > %s)"
            " ORDER BY n LIMIT %s",
            (user_id, namespace, embedder, embedder, limit),
        )
        return [_item(r) for r in rows]

    def unembedded_owners(self, namespace: str, embedder: str, *, limit: int) -> list[str]:
        rows = self._rows(
            "SELECT DISTINCT user_id FROM memories WHERE namespace = %s"
            " AND (embedded_by IS NULL OR embedded_by < %s OR embedded_by > %s)"
            " ORDER BY user_id LIMIT %s",
            (namespace, embedder, embedder, limit),
        )
        return [str(r[0]) for r in rows]

    def reindex_words(self, *, batch: int = 500) -> int:
        done, after = 0, 0
        while True:
            rows = self._rows(
                "SELECT n, user_id, namespace, text FROM memories WHERE n > %s ORDER BY n LIMIT %s",
                (after, batch),
            )
            if not rows:
                return done
            after = rows[-1][0]
            han = {n: (text, index_text(text)) for n, _, _, text in rows if has_han(text)}
            if not han:
                continue
            with self._connection() as conn, conn.transaction():
                # the stale rows, read without locking them: their generations are bumped
                # first, as every writer does, so that no writer waits for this one in a circle
                texts, words = zip(*han.values(), strict=True)
                stale = conn.execute(_STALE, (list(han), list(texts), list(words))).fetchall()
                for user_id, namespace in sorted({(u, ns) for _, u, ns in stale}):
                    _bump(conn, user_id, namespace)  # the items stay as they were: no stamp
                for n, _, _ in stale:
                    text, indexed = han[n]
                    done += conn.execute(  # unless a writer replaced the item meanwhile
                        f"UPDATE memories SET words = to_tsvector('{CONFIG}', %s)"
                        " WHERE n = %s AND text = %s"
                        f" AND words IS DISTINCT FROM to_tsvector('{CONFIG}', %s)",
                        (indexed, n, text, indexed),
                    ).rowcount

    def memory_generation(self, user_id: str, namespace: str) -> int:
        rows = self._rows(
            "SELECT generation FROM memory_generations WHERE user_id = %s AND namespace = %s",
            (user_id, namespace),
        )
        return int(rows[0][0]) if rows else 0

    def memory_changes(
        self, user_id: str, namespace: str, after: int, *, embedder: str | None = None
    ) -> MemoryChanges:
        """One statement, one snapshot: its generation G, and the rows stamped in
        (``after``, G]. Why none is missing under concurrent writers: each writer bumps the
        generation first (an upsert that locks the namespace's row until it commits, and
        reads the latest committed value once it has the lock) and stamps its rows with the
        value it got. So the writer of G could only bump after the writer of G - 1 had
        committed, and so on down: a snapshot that sees G sees every row stamped up to G.
        A writer still running has a stamp above G, left for the next call (whose
        ``after`` is G); a row stamped up to G and replaced since comes then, as it is."""
        sql = _CHANGED_WITH_VECTORS if embedder is not None else _CHANGED
        rows = self._rows(sql, {"u": user_id, "ns": namespace, "after": after, "e": embedder})
        items = [_item(r[1:]) for r in rows if r[1] is not None]
        vectors = {str(r[1]): bytes(r[-1]) for r in rows if r[-1] is not None}
        return MemoryChanges(int(rows[0][0]), items, vectors)


def _bump(conn: Conn, user_id: str, namespace: str) -> int:
    row = conn.execute(_BUMP, (user_id, namespace)).fetchone()
    assert row is not None
    return int(row[0])


def _count(conn: Conn, user_id: str, namespace: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM memories WHERE user_id = %s AND namespace = %s",
        (user_id, namespace),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _filter(where: MemoryFilter) -> tuple[str, list[object]]:
    refuse_unstorable("where.sources", where.sources)
    refuse_unstorable("where.task_ids", where.task_ids)
    sql, args = "", list[object]()
    if where.since is not None:
        sql += " AND m.at >= %s"
        args.append(where.since)
    if where.until is not None:
        sql += " AND m.at < %s"
        args.append(where.until)
    for column, values in (("source", where.sources), ("task_id", where.task_ids)):
        if values:
            sql += f" AND m.{column} = ANY(%s)"
            args.append(list(values))
    return sql, args


def _params(item: MemoryItem, at: datetime) -> dict[str, object]:
    data = {"metadata": item.metadata, "cites": list(item.cites), "added_at": at.isoformat()}
    return {
        "id": item.id,
        "user_id": item.user_id,
        "namespace": item.namespace,
        "text": item.text,
        "at": item.time,
        "source": item.source,
        "task_id": item.task_id,
        "data": Jsonb(data),
        "words": index_text(item.text),
    }


def _item(row: Sequence[Any]) -> MemoryItem:
    data = row[7]
    added = data.get("added_at")
    return MemoryItem(
        id=row[0],
        user_id=row[1],
        namespace=row[2],
        text=row[3],
        time=row[4],
        source=row[5],
        task_id=row[6],
        metadata=data.get("metadata") or {},
        cites=tuple(data.get("cites") or ()),
        added_at=datetime.fromisoformat(added) if added else None,
    )
