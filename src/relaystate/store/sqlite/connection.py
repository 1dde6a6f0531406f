"""What the SQLite store's roles share of one connection: how a role writes (``Tx``, one
``BEGIN IMMEDIATE`` transaction) and reads (``Read``), and a schema step's SQL cut into
statements. Kept apart so that the store and its memory roles each import it, not each other."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

Tx = Callable[[], AbstractContextManager[sqlite3.Connection]]
"""One write transaction on the role's connection, committed when the block ends."""
Read = Callable[[str, Sequence[object]], list[tuple[Any, ...]]]
"""One query on the role's connection: its rows."""


def statements(script: str) -> Iterator[str]:
    """A SQL script's statements one by one (``executescript`` would commit first)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            if _has_code(pending):
                yield pending
            pending = ""
    if _has_code(pending.removesuffix(";")):
        raise ValueError(f"incomplete SQL statement at the end of a migration: {pending!r}")


def _has_code(sql: str) -> bool:
    lines = (line.split("--", 1)[0] for line in sql.splitlines())
    return bool("".join(lines).strip(" \t;"))
