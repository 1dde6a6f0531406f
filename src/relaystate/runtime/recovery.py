"""Recovery at start-up: find actions whose holder is gone and tasks stopped between steps,
claim them so concurrent recoverers split the work, and drive each one on.

A lease held by a dead process on this host, or by a deregistered worker, counts as expired
at once, so recovery right after a crash does not wait a lease out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from ..actions.leases import lease_expired
from ..model import TaskState, TaskStatus
from ..scope import Scope
from ..store.bundle import DAMAGED, Stores

BATCH = 100
"""Tasks claimed at a time: a concurrent recoverer takes other batches meanwhile."""


@dataclass
class RecoveryReport:
    """What one ``recover`` pass found and did."""

    examined: int = 0
    resumed: list[str] = field(default_factory=list)
    skipped: int = 0
    """Open actions left alone because their lease is alive."""
    claimed_elsewhere: int = 0
    """Tasks another recoverer was already working on."""
    errors: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)


class Advance(Protocol):
    def __call__(self, task_id: str) -> TaskState: ...


def recover(
    stores: Stores,
    scope: Scope,
    advance: Advance,
    *,
    owner: str,
    lease: timedelta,
    clock: Callable[[], datetime],
    limit: int | None = None,
    page: int = 1000,
    on_task: Callable[[str, str], None] | None = None,
) -> RecoveryReport:
    """Reconcile and continue interrupted tasks: all of them, or at most ``limit``."""
    report = RecoveryReport()
    scope.require_admin("recovery")
    ids = _candidates(stores, scope, report, owner=owner, now=clock(), page=page)[:limit]
    gone = _dead_recoverers(stores, owner, clock())
    try:
        for start in range(0, len(ids), BATCH):
            batch = stores.coordination.claim_for_recovery(
                ids[start : start + BATCH], owner, until=clock() + lease, now=clock(), gone=gone
            )
            report.claimed_elsewhere += min(BATCH, len(ids) - start) - len(batch)
            for task_id in batch:
                _recover_one(task_id, advance, report, on_task)
    finally:
        stores.coordination.release_recovery(owner)
    return report


def _dead_recoverers(stores: Stores, owner: str, now: datetime) -> frozenset[str]:
    """Holders of live recovery claims that can no longer be alive (a killed ``recover`` on
    this host, a deregistered worker): their claims are taken over at once, not waited out."""
    holders = stores.coordination.recovery_claimants(now)
    stopped = stores.coordination.stopped_workers(holders)
    return frozenset(
        h for h in holders if lease_expired(h, None, now, me=owner, is_stopped=stopped.__contains__)
    )


def _candidates(
    stores: Stores, scope: Scope, report: RecoveryReport, *, owner: str, now: datetime, page: int
) -> list[str]:
    """Tasks with an open action nobody alive holds, then running tasks with none open."""
    candidates: dict[str, None] = {}
    held: set[str] = set()
    after: str | None = None
    while True:  # every open action, a page at a time
        actions = stores.tasks.open_actions(limit=page, after=after)
        if not actions:
            break
        after = actions[-1].id
        # One look per holder, not per action: thousands of actions share a few holders.
        holders = {a.lease_owner for a in actions if a.lease_owner is not None}
        stopped = stores.coordination.stopped_workers(holders)
        gone = functools.cache(
            lambda holder, stopped=stopped: lease_expired(
                holder, None, now, me=owner, is_stopped=stopped.__contains__
            )
        )
        for action in actions:
            report.examined += 1
            timed_out = action.lease_expires_at is not None and action.lease_expires_at <= now
            if action.lease_owner is None or timed_out or gone(action.lease_owner):
                candidates[action.task_id] = None
            else:
                report.skipped += 1
                held.add(action.task_id)
    # A task can also stop between two actions (after one committed, before the next was
    # recorded): it is running with no open action.
    running = stores.tasks.list_tasks(scope, statuses=[TaskStatus.RUNNING], limit=10**9)
    for task in running:
        if task.id not in held:
            candidates.setdefault(task.id, None)
    return list(candidates)


def _recover_one(
    task_id: str,
    advance: Advance,
    report: RecoveryReport,
    on_task: Callable[[str, str], None] | None,
) -> None:
    try:
        state = advance(task_id)
    except DAMAGED:
        raise  # a damaged store: no other task fares better, and it is not this task's error
    except Exception as exc:
        report.errors[task_id] = f"{type(exc).__name__}: {exc}"
        outcome = "error"
    else:
        report.resumed.append(task_id)
        outcome = str(state.task.status)
        report.outcomes[task_id] = outcome
    if on_task is not None:
        on_task(task_id, outcome)
