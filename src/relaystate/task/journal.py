"""The change journal: deltas between states, replay from a baseline, and compaction.

A state is the JSON form of a TaskState: ``{"task": {...}, "actions": {"<seq>": {...}}}``.
A change is ``{"path": [...], "before": x, "after": y}``; a missing ``before`` means the
value did not exist, a missing ``after`` means it was removed. Dicts are diffed key by key,
so filling one slot journals that slot, not the whole task (invariant 8).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..errors import HistoryCompacted, NotFound
from ..model import JournalEntry, Snapshot, TaskState, clone

JSON = Any
_ABSENT = object()
_VOLATILE = {"updated_at", "version"}
"""Task fields every commit touches; the entry's own ``at`` and ``version`` carry them."""


def diff(before: JSON, after: JSON, path: list[str] | None = None) -> list[dict[str, JSON]]:
    """The changes that turn ``before`` into ``after``; dicts are walked key by key."""
    path = path or []
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[dict[str, JSON]] = []
        for key in list(before) + [k for k in after if k not in before]:
            if len(path) == 1 and key in _VOLATILE:
                continue
            b, a = before.get(key, _ABSENT), after.get(key, _ABSENT)
            if b is _ABSENT:
                changes.append({"path": [*path, key], "after": clone(a)})
            elif a is _ABSENT:
                changes.append({"path": [*path, key], "before": clone(b)})
            elif b != a:
                changes.extend(diff(b, a, [*path, key]))
        return changes
    if before == after:
        return []
    return [{"path": path, "before": clone(before), "after": clone(after)}]


def apply(state: dict[str, JSON], changes: list[dict[str, JSON]]) -> dict[str, JSON]:
    """Apply changes to a JSON state in place and return it."""
    for change in changes:
        *parents, last = change["path"]
        node = state
        for key in parents:
            node = node.setdefault(key, {})
        if "after" in change:
            node[last] = clone(change["after"])
        else:
            node.pop(last, None)
    return state


def entry_for(
    before: TaskState | dict[str, JSON] | None,
    after: TaskState | dict[str, JSON],
    *,
    at: datetime,
    actor: str,
    reason: str,
) -> JournalEntry:
    """The journal entry for one commit: the delta between two states (or their dicts)."""
    if isinstance(before, TaskState):
        before = before.to_dict()
    if isinstance(after, TaskState):
        after = after.to_dict()
    if before is not None:
        changes = diff(before["task"], after["task"], ["task"])
        for seq, action in after["actions"].items():
            prior = before["actions"].get(seq, _ABSENT)
            if prior is _ABSENT:
                changes.append({"path": ["actions", seq], "after": clone(action)})
            elif prior != action:
                changes.extend(diff(prior, action, ["actions", seq]))
    else:
        changes = [
            {"path": ["task"], "after": clone(after["task"])},
            {"path": ["actions"], "after": clone(after["actions"])},
        ]
    task = after["task"]
    return JournalEntry(task["id"], task["version"], at, actor, reason, changes)


def replay(
    entries: list[JournalEntry], baseline: Snapshot | None, upto: int | datetime | None = None
) -> TaskState:
    """Rebuild a task as it was at version ``upto`` (or at a time), from baseline + deltas."""
    if baseline is not None and _before_baseline(baseline, upto):
        raise HistoryCompacted(
            f"task {baseline.task_id}: history before version {baseline.version} "
            f"({baseline.at:%Y-%m-%d %H:%M}) was compacted into a baseline"
        )
    state: dict[str, JSON] = clone(baseline.state) if baseline is not None else {}
    version = baseline.version if baseline is not None else 0
    at: datetime | None = baseline.at if baseline is not None else None
    for entry in entries:
        if entry.version <= version:
            continue
        if isinstance(upto, int) and entry.version > upto:
            break
        if isinstance(upto, datetime) and entry.at > upto:
            break
        apply(state, entry.changes)
        version, at = entry.version, entry.at
    if not state:
        raise NotFound("no such point in the task's history")
    if isinstance(upto, int) and upto > version:
        raise NotFound(f"task {state['task']['id']} has no version {upto}; its latest is {version}")
    state["task"]["version"] = version
    state["task"]["updated_at"] = at.isoformat() if at is not None else state["task"]["created_at"]
    return TaskState.from_dict(state)


def _before_baseline(baseline: Snapshot, upto: int | datetime | None) -> bool:
    if isinstance(upto, int):
        return upto < baseline.version
    if isinstance(upto, datetime):
        return upto < baseline.at
    return False
