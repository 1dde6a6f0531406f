"""Working memory in SQLite: facts with validity intervals and the summaries of a task's
older turns (schema step 7). Like long-term memory, the same class serves the store's file
and ``memory://`` (a private in-memory SQLite database)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...errors import VersionConflict
from ...model import Fact, Summary, from_iso, to_iso
from ..roles import WorkingMemory
from ..terms import node_key
from .connection import Read, Tx

_FACT = "seq, user_id, subject, predicate, object, valid_from, valid_to, source, task_id, single"
_SUMMARY = "id, user_id, task_id, level, text, data, created_at, merged_into"


def dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class SQLiteWorkingMemory(WorkingMemory):
    """The working-memory role over a SQLite connection whose schema has step 7."""

    def __init__(self, tx: Tx, read: Read) -> None:
        self._tx, self._read = tx, read

    def record_facts(self, facts: Sequence[Fact]) -> list[Fact]:
        with self._tx() as db:
            return record_in(db, facts)

    def current_facts(
        self,
        user_id: str,
        *,
        subjects: Sequence[str] | None = None,
        touching: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> list[Fact]:
        sql, args = f"SELECT {_FACT} FROM facts WHERE user_id = ?", list[object]([user_id])
        if at is None:
            sql += " AND valid_to IS NULL"
        else:
            moment = to_iso(at)
            sql += " AND valid_from <= ? AND (valid_to IS NULL OR valid_to > ?)"
            args += [moment, moment]
        if subjects is not None:
            keys = [node_key(s) or s for s in subjects]
            sql += f" AND subject_key IN ({_marks(keys)})"
            args += keys
        if touching is not None:
            keys = [k for k in (node_key(t) for t in touching) if k]
            sql += f" AND (subject_key IN ({_marks(keys)}) OR node IN ({_marks(keys)}))"
            args += keys + keys
        return [_fact(r) for r in self._read(sql + " ORDER BY seq", args)]

    def fact_history(self, user_id: str, subject: str, predicate: str | None = None) -> list[Fact]:
        sql = f"SELECT {_FACT} FROM facts WHERE user_id = ? AND subject_key = ?"
        args: list[object] = [user_id, node_key(subject) or subject]
        if predicate is not None:
            sql += " AND predicate = ?"
            args.append(predicate)
        return [_fact(r) for r in self._read(sql + " ORDER BY seq", args)]

    def add_summary(self, summary: Summary) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT INTO summaries ({_SUMMARY}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _row(summary)
            )

    def merge_summaries(self, user_id: str, parts: Sequence[str], into: Summary) -> None:
        with self._tx() as db:
            changed = 0
            for part in parts:
                changed += db.execute(
                    "UPDATE summaries SET merged_into = ? WHERE user_id = ? AND id = ?"
                    " AND merged_into IS NULL",
                    (into.id, user_id, part),
                ).rowcount
            if changed != len(set(parts)):
                raise VersionConflict(f"summaries of {into.task_id}", 0, None)  # rolls back
            db.execute(
                f"INSERT INTO summaries ({_SUMMARY}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _row(into)
            )

    def summaries(self, user_id: str, task_id: str, *, live: bool = True) -> list[Summary]:
        sql = f"SELECT {_SUMMARY} FROM summaries WHERE user_id = ? AND task_id = ?"
        if live:
            sql += " AND merged_into IS NULL"
        rows = self._read(sql + " ORDER BY created_at, level, id", (user_id, task_id))
        return [_summary(r) for r in rows]


def record_in(db: sqlite3.Connection, facts: Sequence[Fact]) -> list[Fact]:
    """Record facts against what is current, in the caller's transaction (the turn's
    commit, or :meth:`SQLiteWorkingMemory.record_facts`); the facts that changed memory.
    The open facts of each subject are read once (a task's slots are one subject)."""
    recorded: list[Fact] = []
    held: dict[tuple[str, str], dict[str, list[tuple[int, str, str]]]] = {}
    for fact in facts:
        key = node_key(fact.subject) or fact.subject
        value = None if fact.object is None else dumps(fact.object)
        if (fact.user_id, key) not in held:
            by_name: dict[str, list[tuple[int, str, str]]] = {}
            for seq, name, obj, since in db.execute(
                "SELECT seq, predicate, object, valid_from FROM facts WHERE user_id = ?"
                " AND subject_key = ? AND valid_to IS NULL ORDER BY seq",
                (fact.user_id, key),
            ):
                by_name.setdefault(name, []).append((seq, obj, since))
            held[(fact.user_id, key)] = by_name
        open_ = held[(fact.user_id, key)].setdefault(fact.predicate, [])
        if value is not None and any(row[1] == value for row in open_):
            continue  # already what memory holds
        if fact.single or value is None:
            for seq, _, since in open_:
                until = max(to_iso(fact.valid_from) or "", since)
                db.execute("UPDATE facts SET valid_to = ? WHERE seq = ?", (until, seq))
            open_.clear()
        if value is None:
            continue
        seq = db.execute(
            "INSERT INTO facts (user_id, subject, subject_key, predicate, object, node,"
            " valid_from, source, task_id, single) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                fact.user_id,
                fact.subject,
                key,
                fact.predicate,
                value,
                node_key(fact.object),
                to_iso(fact.valid_from),
                fact.source,
                fact.task_id,
                int(fact.single),
            ),
        ).lastrowid
        open_.append((int(seq or 0), value, to_iso(fact.valid_from) or ""))
        recorded.append(_with_seq(fact, int(seq or 0)))
    return recorded


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values)) or "NULL"


def _with_seq(fact: Fact, seq: int) -> Fact:
    return Fact(
        fact.user_id,
        fact.subject,
        fact.predicate,
        fact.object,
        fact.valid_from,
        None,
        fact.source,
        fact.task_id,
        fact.single,
        seq,
    )


def _fact(row: Sequence[Any]) -> Fact:
    seq, user, subject, predicate, value, since, until, source, task_id, single = row
    valid_from = from_iso(since)
    assert valid_from is not None
    return Fact(
        user,
        subject,
        predicate,
        None if value is None else json.loads(value),
        valid_from,
        from_iso(until),
        source,
        task_id,
        bool(single),
        int(seq),
    )


def _row(summary: Summary) -> tuple[object, ...]:
    data = {"cites": list(summary.cites), "parts": list(summary.parts)}
    return (
        summary.id,
        summary.user_id,
        summary.task_id,
        summary.level,
        summary.text,
        dumps(data),
        to_iso(summary.created_at),
        summary.merged_into,
    )


def _summary(row: Sequence[Any]) -> Summary:
    summary_id, user, task_id, level, text, data, created, merged = row
    parsed = json.loads(data)
    created_at = from_iso(created)
    assert created_at is not None
    return Summary(
        summary_id,
        user,
        task_id,
        int(level),
        text,
        tuple(parsed.get("cites", ())),
        created_at,
        tuple(parsed.get("parts", ())),
        merged,
    )
