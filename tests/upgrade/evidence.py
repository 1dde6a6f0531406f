"""What a rolling upgrade left behind, read from the ledger file and the store's journal
(never through a runtime: reading a Task through a build's runtime would lift it)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from relaystate import Scope
from relaystate.model import JournalEntry, TaskState
from relaystate.store.bundle import Stores

ADMIN = Scope.admin("evidence")


def effects(ledger: Path) -> list[dict[str, Any]]:
    """Every effect the downstream made: its key, kind and payload (build, pid, task...)."""
    if not ledger.exists():
        return []
    db = sqlite3.connect(str(ledger))
    try:
        rows = db.execute(
            "SELECT idempotency_key, kind, effect FROM effects ORDER BY id"
        ).fetchall()
    finally:
        db.close()
    return [{"key": k, "kind": kind, **json.loads(e)} for k, kind, e in rows]


def duplicates(found: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Keys with more than one effect, and task actions with more than one effect."""
    by_key = Counter(e["key"] for e in found)
    by_action = Counter((e["task_id"], e["action"]) for e in found)
    return {
        "keys": [k for k, n in by_key.items() if n > 1],
        "actions": [a for a, n in by_action.items() if n > 1],
    }


def tasks(stores: Stores) -> list[TaskState]:
    found = stores.tasks.list_tasks(ADMIN, limit=10**9)
    return stores.tasks.load_many([t.id for t in found], ADMIN)


def journal(stores: Stores, task_id: str) -> list[JournalEntry]:
    return stores.tasks.journal(task_id, ADMIN)


@dataclass
class Wait:
    """How long a Task's action waited in the queue: from the commit that made it due to
    the commit of the worker that started it."""

    task_id: str
    due: datetime
    started: datetime
    actor: str

    @property
    def seconds(self) -> float:
        return max((self.started - self.due).total_seconds(), 0.0)


def queue_wait(entries: list[JournalEntry]) -> Wait | None:
    """The first wait in a Task's journal: the first commit that set ``due_at`` (its value),
    then the first later commit that put an action in the running state (its time)."""
    due: datetime | None = None
    for entry in entries:
        for change in entry.changes:
            path = change.get("path", [])
            if due is None and path == ["task", "due_at"] and change.get("after"):
                due = datetime.fromisoformat(str(change["after"]))
            elif due is not None and _starts_action(path, change.get("after")):
                return Wait(entry.task_id, due, entry.at, entry.actor)
        if due is None:  # a Task created already due (its first entry holds the whole task)
            for change in entry.changes:
                after = change.get("after")
                if change.get("path") == ["task"] and isinstance(after, dict) and after["due_at"]:
                    due = datetime.fromisoformat(str(after["due_at"]))
    return None


def _starts_action(path: list[Any], after: Any) -> bool:
    if len(path) == 3 and path[0] == "actions" and path[2] == "status":
        return after == "running"
    if len(path) == 2 and path[0] == "actions" and isinstance(after, dict):
        return after.get("status") == "running"
    return False


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(math.ceil(q / 100 * len(ordered)), 1)
    return ordered[rank - 1]
