"""A turn's memory in SQLite, written in the caller's transaction: the messages' long-term
items with their keyword index rows, and the task's slots against its open facts. The
embedded store calls it inside its commit; ``memory://`` inside its lock, on its private
database."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from ...model import Message, Task
from ..turn_memory import Remember, turn_rows
from .memories import put_in
from .working import record_in


def remember_in(
    db: sqlite3.Connection,
    remember: Remember,
    messages: Sequence[Message],
    task: Task | None,
    at: datetime | None,
) -> None:
    """Keep the turn (its numbered ``messages``; ``task`` as the commit left it, at ``at``)."""
    rows = turn_rows(remember, messages, task, at)
    put_in(db, rows.items, at=at, vectors=rows.vectors)
    if rows.facts:
        record_in(db, rows.facts)
