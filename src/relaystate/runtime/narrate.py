"""A journal entry in people's words: what changed in the user's terms first (slots, stage,
status, confirmation, Actions and their outcomes), and apart from it the bookkeeping it also
changed (leases, due times, derived text), which audits and ``--json`` still have in full.

Action changes name the Action (the journal's paths only hold its seq): the names come
from the baseline and from the entries that recorded each Action, read in order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model import JournalEntry, Snapshot

BOOKKEEPING_TASK = frozenset(
    {
        "updated_at",
        "due_at",
        "status_text",
        "missing_slots",
        "progress",
        "version",
        "schema_version",
        "created_by_build",
    }
)
"""Task fields that follow from the others, or are the runtime's own."""
BOOKKEEPING_ACTION = frozenset(
    {"attempts", "checks", "lease_owner", "lease_expires_at", "next_attempt_at", "updated_at"}
)
"""Action fields that are the action protocol's bookkeeping."""
SHOWN = 60
"""The most characters of a value shown in a sentence."""


@dataclass(frozen=True)
class Told:
    """One entry in words: ``said`` what changed for people, ``bookkeeping`` the rest."""

    said: list[str]
    bookkeeping: list[str]


def narrate(baseline: Snapshot | None, entries: Sequence[JournalEntry]) -> list[Told]:
    """Each entry of a history (after ``baseline``), in words, in order."""
    names: dict[int, str] = {}
    if baseline is not None:
        for seq, action in (baseline.state.get("actions") or {}).items():
            if isinstance(action, dict):
                names[int(seq)] = str(action.get("name", f"action {seq}"))
    return [_entry(e, names) for e in entries]


def _entry(entry: JournalEntry, names: dict[int, str]) -> Told:
    said: list[str] = []
    kept: list[str] = []
    for change in entry.changes:
        path = list(change.get("path", []))
        if path[:1] == ["task"]:
            _task(path[1:], change, said, kept)
        elif path[:1] == ["actions"]:
            _action(path[1:], change, names, said, kept)
    return Told(said, kept)


def _task(path: list[Any], change: dict[str, Any], said: list[str], kept: list[str]) -> None:
    if not path:  # the whole Task: it was started
        task = change.get("after") or {}
        slots = ", ".join(f"{k}={_short(v)}" for k, v in (task.get("slots") or {}).items())
        said.append(f"started in stage {task.get('stage')}" + (f" with {slots}" if slots else ""))
        return
    field = str(path[0])
    if field in BOOKKEEPING_TASK:
        kept.append(field)
    elif field == "slots" and len(path) > 1:
        said.append(_moved(f"slot {path[1]}", change))
    elif field == "slots":
        said.append("slots: " + _moved("", change).lstrip(": "))
    elif field == "confirmed":
        said.append("confirmed by the user" if change.get("after") else "confirmation withdrawn")
    elif field == "context" and path[1:2] == ["rejected"]:
        refused = change.get("after")
        if isinstance(refused, dict):
            said.append(f"the downstream refused {refused.get('slot')}: {refused.get('reason')}")
        else:
            said.append("the refused value was replaced")
    elif field == "template_version":
        said.append(f"lifted to template version {change.get('after')}")
    else:
        said.append(_moved(".".join(str(p) for p in path), change))


def _action(
    path: list[Any],
    change: dict[str, Any],
    names: dict[int, str],
    said: list[str],
    kept: list[str],
) -> None:
    if not path:
        return  # the Task's empty list of Actions, when it was started
    seq = int(path[0])
    if len(path) == 1:
        action = change.get("after")
        if isinstance(action, dict):
            names[seq] = str(action.get("name", f"action {seq}"))
            what = "compensation" if action.get("kind") == "compensation" else "Action"
            said.append(f"{what} {names[seq]} recorded ({action.get('status')})")
        else:
            said.append(f"{names.get(seq, f'action {seq}')} removed")
        return
    name, field = names.get(seq, f"action {seq}"), str(path[1])
    if field in BOOKKEEPING_ACTION:
        kept.append(f"{name}.{field}")
    elif field == "status":
        said.append(f"{name}: {change.get('before')} → {change.get('after')}")
    elif field == "output" and change.get("after") is not None:
        said.append(f"{name} returned {_short(change.get('after'))}")
    elif field == "error" and change.get("after"):
        said.append(f"{name}: {change.get('after')}")
    elif field in ("output", "error", "error_kind") and not change.get("after"):
        kept.append(f"{name}.{field}")
    else:
        said.append(_moved(f"{name} {field}", change))


def _moved(what: str, change: dict[str, Any]) -> str:
    if "before" not in change:
        return f"{what} set to {_short(change.get('after'))}"
    if "after" not in change:
        return f"{what} cleared (was {_short(change['before'])})"
    return f"{what}: {_short(change['before'])} → {_short(change['after'])}"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
