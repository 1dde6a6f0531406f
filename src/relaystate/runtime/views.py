"""The JSON shapes of Tasks, Actions, journal entries and Turns, shared by every surface.

The CLI's ``--json``, a Turn's ``to_dict`` and the HTTP API all answer with these, so a
script written against one reads the others. Field names are the code's own words.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..model import Action, JournalEntry, Snapshot, Task, TaskState, WorkerStatus, to_iso
from ..task.labels import Labels
from .narrate import narrate
from .upgrades import BuildStatus

JSON = dict[str, Any]


def to_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as strict JSON text, the one serialiser of what the surfaces print.

    A NaN or infinity (in data stored before the front door refused them) becomes null, as
    JavaScript's JSON.stringify does: ``NaN`` and ``Infinity`` are not JSON, and a strict
    parser rejects the whole document for one of them. Other objects print as text.
    """
    return json.dumps(
        _finite(value), ensure_ascii=False, indent=indent, default=str, allow_nan=False
    )


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def task_view(task: Task) -> JSON:
    """A task's stored fields: stage, status, slots, progress, version, owner..."""
    return task.to_dict()


def action_view(action: Action) -> JSON:
    """One action as people and scripts look at it (its lease only while it holds one)."""
    return {
        "id": action.id,
        "task_id": action.task_id,
        "seq": action.seq,
        "name": action.name,
        "kind": str(action.kind),
        "stage": action.stage,
        "status": str(action.status),
        "idempotency_key": action.idempotency_key,
        "attempts": action.attempts,
        "checks": action.checks,
        "compensates": action.compensates,
        "input": action.input,
        "output": action.output,
        "error": action.error,
        "error_kind": action.error_kind,
        "lease_owner": action.lease_owner,
        "lease_expires_at": to_iso(action.lease_expires_at),
        "next_attempt_at": to_iso(action.next_attempt_at),
        "created_at": to_iso(action.created_at),
        "updated_at": to_iso(action.updated_at),
    }


def state_view(state: TaskState) -> JSON:
    """A task with its actions in seq order."""
    return {**task_view(state.task), "actions": [action_view(a) for a in state.actions]}


def worker_view(worker: WorkerStatus, now: datetime) -> JSON:
    """A registered process as ``relaystate workers`` and ``/v1/workers`` show it."""
    beat = worker.heartbeat_at
    return {
        "id": worker.info.id,
        "role": worker.role,
        "build": worker.info.build,
        "host": worker.info.host,
        "pid": worker.info.pid,
        "claimed": worker.claimed,
        "heartbeat_age_s": None if beat is None else round((now - beat).total_seconds(), 1),
        "started_at": to_iso(worker.info.started_at),
        "stopped_at": to_iso(worker.stopped_at),
    }


def build_view(build: BuildStatus) -> JSON:
    """A build in service as ``relaystate builds`` and ``/v1/builds`` show it."""
    return {
        "build": build.build,
        "processes": dict(sorted(build.processes.items())),
        "pinned_open_tasks": build.pinned_open,
        "open_tasks_started": build.open_started,
        "queued_pinned_work": build.queued_pinned,
        "can_retire": build.can_retire,
    }


def history_view(
    baseline: Snapshot | None, entries: Sequence[JournalEntry], labels: Labels | None = None
) -> JSON:
    """A task's journal: the baseline it was compacted into (if any) and the entries after,
    each with what it changed in people's words (``said``, named by ``labels``) and the
    bookkeeping it changed too, beside the full ``changes``."""
    told = narrate(baseline, entries, labels)
    return {
        "baseline": None if baseline is None else baseline.to_dict(),
        "entries": [
            {**e.to_dict(), "said": t.said, "bookkeeping": t.bookkeeping}
            for e, t in zip(entries, told, strict=True)
        ],
    }


def turn_view(
    *,
    session_id: str,
    reply: str,
    language: str,
    state: TaskState | None,
    actions: Sequence[Action],
    why: str = "",
) -> JSON:
    """One conversational turn: the reply, the task it touched, the actions that moved, and
    why the message went to that task."""
    return {
        "session_id": session_id,
        "reply": reply,
        "language": language,
        "task": None if state is None else task_view(state.task),
        "actions": [action_view(a) for a in actions],
        "why": why,
    }
