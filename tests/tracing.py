"""The statements a SQLite store sends, seen from outside the runtime: the connection's
trace callback, grouped into the write transactions they ran in."""

from __future__ import annotations

import re

from relaystate.store import SQLiteStore


class Traced:
    """The statements a SQLite store sends, grouped into the transactions they ran in."""

    def __init__(self, store: SQLiteStore) -> None:
        self.statements: list[str] = []
        store._db.set_trace_callback(self._sent)

    def _sent(self, sql: str) -> None:
        """Keep what the store sent. The full-text index's own statements (nested ones,
        traced as ``-- ...``, and its reads of its tables, ``'main'.'memories_fts_...'``)
        run inside the store's statements and transaction: they are not the store's."""
        if not sql.startswith("-- ") and "'main'." not in sql:
            self.statements.append(sql)

    def clear(self) -> None:
        self.statements.clear()

    def writes(self) -> list[list[str]]:
        """Each write transaction (BEGIN IMMEDIATE .. COMMIT) as its statements."""
        out: list[list[str]] = []
        current: list[str] | None = None
        for sql in self.statements:
            if sql.startswith("BEGIN IMMEDIATE"):
                current = []
            elif sql == "COMMIT" and current is not None:
                out.append(current)
                current = None
            elif current is not None:
                current.append(sql)
        return out

    @staticmethod
    def kind(sql: str) -> str:
        """``INSERT tasks``, ``UPDATE tasks``, ``SELECT facts``...: what a statement does
        to which table."""
        found = re.match(r"(INSERT INTO|UPDATE|DELETE FROM) (\w+)", sql) or re.match(
            r"(SELECT)\b.*?\bFROM (\w+)", sql, re.S
        )
        assert found is not None, sql
        return f"{found[1].split()[0]} {found[2]}"

    def reads(self) -> list[str]:
        """Statements outside write transactions (what the turn read, and how)."""
        inside, out = False, []
        for sql in self.statements:
            if sql.startswith("BEGIN IMMEDIATE"):
                inside = True
            elif sql == "COMMIT" and inside:
                inside = False
            elif not inside:
                out.append(sql)
        return out
