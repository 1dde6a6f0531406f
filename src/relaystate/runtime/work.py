"""When a task has automatic work due, derived from its settled state: what the queue holds.

The writer stores this with every commit (``Task.due_at`` and the queue's row, in the same
transaction), so a task whose next step needs no person is always in the queue: an action
to run (due now), a retry after its backoff (due then), an action running under a lease
(due when the lease ends, so a dead holder's work is reconciled by whoever takes it next).
"""

from __future__ import annotations

from datetime import datetime

from ..model import TaskState, WorkItem
from ..task.next_step import InProgress, NextStep, Reconcile, RunAction, WaitRetry


def due_at(state: TaskState, step: NextStep) -> datetime | None:
    """When someone should next work on the task without being asked; None: nobody."""
    task = state.task
    if isinstance(step, RunAction):
        if step.seq is not None:
            action = state.action(step.seq)
            return action.next_attempt_at or task.updated_at
        return task.updated_at
    if isinstance(step, WaitRetry):
        return step.at
    if isinstance(step, InProgress | Reconcile):
        action = state.action(step.seq)
        later = [t for t in (action.lease_expires_at, action.next_attempt_at) if t is not None]
        return max(later) if later else task.updated_at
    return None


def item_for(state: TaskState) -> WorkItem | None:
    """The queue's row for a task whose ``due_at`` the writer has set (None: no row)."""
    task = state.task
    if task.due_at is None:
        return None
    return WorkItem(
        task_id=task.id,
        user_id=task.user_id,
        type=task.type,
        template_version=task.template_version,
        build=task.created_by_build if task.pinned else None,
        due_at=task.due_at,
    )


def changed(old: dict[str, object] | None, new: dict[str, object]) -> bool:
    """Whether a commit must rewrite the task's queue row (task dicts before and after)."""
    if old is None:
        return new.get("due_at") is not None
    keys = ("due_at", "template_version", "pinned", "created_by_build")
    return any(old.get(k) != new.get(k) for k in keys)
