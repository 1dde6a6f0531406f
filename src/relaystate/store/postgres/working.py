"""Working memory in PostgreSQL: facts with validity intervals and the summaries of a
task's older turns (schema step 6), the same rules as SQLite's."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from ...errors import VersionConflict
from ...model import Fact, Summary
from ..roles import WorkingMemory
from ..terms import node_key
from .connections import Conn

_FACT = "seq, user_id, subject, predicate, object, valid_from, valid_to, source, task_id, single"
_SUMMARY = "id, user_id, task_id, level, text, data, created_at, merged_into"


class PostgresWorkingMemory(WorkingMemory):
    """The working-memory role over a PostgreSQL store's connections."""

    def __init__(self, connection: Callable[[], AbstractContextManager[Conn]]) -> None:
        self._connection = connection

    def _rows(self, sql: str, args: Sequence[object]) -> list[Any]:
        with self._connection() as conn:
            return conn.execute(sql, args).fetchall()

    def record_facts(self, facts: Sequence[Fact]) -> list[Fact]:
        recorded: list[Fact] = []
        with self._connection() as conn, conn.transaction():
            for fact in facts:
                key = node_key(fact.subject) or fact.subject
                # one writer per (user, subject, predicate) at a time: no two open values
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                    (json.dumps([fact.user_id, key, fact.predicate]),),
                )
                open_ = conn.execute(
                    "SELECT seq, object, valid_from FROM facts WHERE user_id = %s"
                    " AND subject_key = %s AND predicate = %s AND valid_to IS NULL ORDER BY seq",
                    (fact.user_id, key, fact.predicate),
                ).fetchall()
                if fact.object is not None and any(row[1] == fact.object for row in open_):
                    continue  # already what memory holds
                for seq, _, since in open_ if fact.single or fact.object is None else ():
                    conn.execute(
                        "UPDATE facts SET valid_to = %s WHERE seq = %s",
                        (max(fact.valid_from, since), seq),
                    )
                if fact.object is None:
                    continue
                row = conn.execute(
                    "INSERT INTO facts (user_id, subject, subject_key, predicate, object, node,"
                    " valid_from, source, task_id, single)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING seq",
                    (
                        fact.user_id,
                        fact.subject,
                        key,
                        fact.predicate,
                        Jsonb(fact.object),
                        node_key(fact.object),
                        fact.valid_from,
                        fact.source,
                        fact.task_id,
                        fact.single,
                    ),
                ).fetchone()
                assert row is not None
                recorded.append(
                    Fact(
                        fact.user_id,
                        fact.subject,
                        fact.predicate,
                        fact.object,
                        fact.valid_from,
                        None,
                        fact.source,
                        fact.task_id,
                        fact.single,
                        int(row[0]),
                    )
                )
        return recorded

    def current_facts(
        self,
        user_id: str,
        *,
        subjects: Sequence[str] | None = None,
        touching: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> list[Fact]:
        sql, args = f"SELECT {_FACT} FROM facts WHERE user_id = %s", list[object]([user_id])
        if at is None:
            sql += " AND valid_to IS NULL"
        else:
            sql += " AND valid_from <= %s AND (valid_to IS NULL OR valid_to > %s)"
            args += [at, at]
        if subjects is not None:
            sql += " AND subject_key = ANY(%s)"
            args.append([node_key(s) or s for s in subjects])
        if touching is not None:
            keys = [k for k in (node_key(t) for t in touching) if k]
            sql += " AND (subject_key = ANY(%s) OR node = ANY(%s))"
            args += [keys, keys]
        return [_fact(r) for r in self._rows(sql + " ORDER BY seq", args)]

    def fact_history(self, user_id: str, subject: str, predicate: str | None = None) -> list[Fact]:
        sql = f"SELECT {_FACT} FROM facts WHERE user_id = %s AND subject_key = %s"
        args: list[object] = [user_id, node_key(subject) or subject]
        if predicate is not None:
            sql += " AND predicate = %s"
            args.append(predicate)
        return [_fact(r) for r in self._rows(sql + " ORDER BY seq", args)]

    def add_summary(self, summary: Summary) -> None:
        with self._connection() as conn:
            conn.execute(_INSERT_SUMMARY, _params(summary))

    def merge_summaries(self, user_id: str, parts: Sequence[str], into: Summary) -> None:
        with self._connection() as conn, conn.transaction():
            changed = conn.execute(
                "UPDATE summaries SET merged_into = %s WHERE user_id = %s AND id = ANY(%s)"
                " AND merged_into IS NULL",
                (into.id, user_id, list(set(parts))),
            ).rowcount
            if changed != len(set(parts)):
                raise VersionConflict(f"summaries of {into.task_id}", 0, None)  # rolls back
            conn.execute(_INSERT_SUMMARY, _params(into))

    def summaries(self, user_id: str, task_id: str, *, live: bool = True) -> list[Summary]:
        sql = f"SELECT {_SUMMARY} FROM summaries WHERE user_id = %s AND task_id = %s"
        if live:
            sql += " AND merged_into IS NULL"
        rows = self._rows(sql + " ORDER BY created_at, level, id", (user_id, task_id))
        return [_summary(r) for r in rows]


_INSERT_SUMMARY = (
    f"INSERT INTO summaries ({_SUMMARY}) VALUES"
    " (%(id)s, %(user_id)s, %(task_id)s, %(level)s, %(text)s, %(data)s, %(created_at)s,"
    " %(merged_into)s)"
)


def _params(summary: Summary) -> dict[str, object]:
    return {
        "id": summary.id,
        "user_id": summary.user_id,
        "task_id": summary.task_id,
        "level": summary.level,
        "text": summary.text,
        "data": Jsonb({"cites": list(summary.cites), "parts": list(summary.parts)}),
        "created_at": summary.created_at,
        "merged_into": summary.merged_into,
    }


def _fact(row: Sequence[Any]) -> Fact:
    seq, user, subject, predicate, value, since, until, source, task_id, single = row
    return Fact(user, subject, predicate, value, since, until, source, task_id, single, int(seq))


def _summary(row: Sequence[Any]) -> Summary:
    summary_id, user, task_id, level, text, data, created, merged = row
    return Summary(
        summary_id,
        user,
        task_id,
        int(level),
        text,
        tuple(data.get("cites", ())),
        created,
        tuple(data.get("parts", ())),
        merged,
    )
