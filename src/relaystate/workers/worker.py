"""A worker: takes its build's queued work from the store until told to stop, then drains.

Each work item is a task with automatic work due (see :mod:`relaystate.runtime.work`). The worker
claims a few under a lease kept alive by its heartbeat, and drives each task with
``advance``: the same path as a turn, so an action is recorded before its effect, and an
action whose holder died is reconciled with the downstream before anything else, never
re-run blindly. On stop (SIGTERM) it claims nothing more, finishes the task in hand (or
gives up after a grace period), releases what it holds and deregisters, so another worker
takes over at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..actions.leases import lease_expired
from ..errors import (
    MigrationFailed,
    NotFound,
    OtherBuild,
    StoreUnavailable,
    TaskTooNew,
    TemplateMismatch,
)
from ..model import TaskState, WorkItem
from ..runtime import work
from ..runtime.runtime import Runtime
from ..scope import Scope
from .presence import Presence

log = logging.getLogger("relaystate.worker")
ADMIN = Scope.admin("worker")
RETRY_AFTER_ERROR = timedelta(seconds=5)
"""How long an item whose drive raised waits before it is claimed again."""
LEFT_ALONE = timedelta(seconds=60)
"""How long an item this build may not run (yet) waits before anyone claims it again."""


@dataclass
class WorkerReport:
    """What a worker did: items driven, items given back, and how long each item had
    waited in the queue past its due time when it was claimed (seconds)."""

    done: int = 0
    errors: int = 0
    requeued: int = 0
    """Running Tasks found with no queue row when the worker started, and queued."""
    released: int = 0
    waits: list[float] = field(default_factory=list)


class Worker:
    """Runs queued work of ``runtime``'s build (its templates, its pinned tasks)."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        lease: timedelta = timedelta(seconds=30),
        poll: float = 0.2,
        batch: int = 1,
        concurrency: int = 4,
        on_item: Callable[[WorkItem, str], None] | None = None,
    ) -> None:
        if runtime.execute != "inline":
            raise ValueError("a worker runs actions itself: its runtime must execute inline")
        self.runtime = runtime
        self.lease = lease
        self.poll = poll
        self.batch = batch
        self.concurrency = concurrency
        """Claim loops run at once: an Action mostly waits on a downstream, and a Task
        claimed in a batch behind a slow one waits too (batch 1 keeps the wait short)."""
        self.on_item = on_item
        self.presence = Presence(runtime, role="worker", lease=lease)
        self.report = WorkerReport()
        self._lock = threading.Lock()
        self._unreleased: list[tuple[WorkItem, datetime | None]] = []

    @property
    def id(self) -> str:
        return self.presence.info.id

    def claim(self) -> list[WorkItem]:
        """Take up to ``batch`` due items this build may run (earliest due first)."""
        rt = self.runtime
        now = rt.clock()
        coordination = rt.stores.coordination
        holders = coordination.work_holders(now)
        stopped = coordination.stopped_workers(holders)
        gone = {
            h
            for h in holders
            if lease_expired(h, None, now, me=self.id, is_stopped=stopped.__contains__)
        }
        return coordination.claim_work(
            self.id,
            build=rt.build,
            runnable=rt.versions.runnable(),
            now=now,
            until=now + self.lease,
            limit=self.batch,
            gone=gone,
        )

    def work_on(self, item: WorkItem) -> str:
        """Drive one claimed task as far as it goes, then give the item back."""
        rt = self.runtime
        wait = max((rt.clock() - item.due_at).total_seconds(), 0.0)
        with self._lock:
            self.report.waits.append(wait)
        retry_at = None
        try:
            state = rt.advance(ADMIN, item.task_id)
            outcome = str(state.task.status)
            with self._lock:
                self.report.done += 1
            retry_at = self._next_due(state)
        except TaskTooNew as exc:  # lifted by a newer build meanwhile: its row says so now,
            outcome = f"left: {exc}"  # so it goes to that build's workers at once
        except OtherBuild as exc:  # pinned elsewhere, or an action running elsewhere
            outcome = f"left: {exc}"
            retry_at = exc.until or rt.clock() + LEFT_ALONE
        except (MigrationFailed, NotFound, TemplateMismatch) as exc:
            # marked for a person, gone, or made by another definition of its template
            outcome = f"left: {exc}"
            retry_at = rt.clock() + LEFT_ALONE
        except StoreUnavailable as exc:  # the database away (a failover): no traceback
            log.warning("task %s: the store is away: %s", item.task_id, exc)
            outcome = f"error: {type(exc).__name__}: {exc}"
            with self._lock:
                self.report.errors += 1
            retry_at = rt.clock() + RETRY_AFTER_ERROR
        except Exception as exc:
            log.exception("task %s: drive failed", item.task_id)
            outcome = f"error: {type(exc).__name__}: {exc}"
            with self._lock:
                self.report.errors += 1
            retry_at = rt.clock() + RETRY_AFTER_ERROR
        # (a process dying here keeps its claim: it is free once it is known gone)
        self._give_back(item, retry_at)
        if self.on_item is not None:
            self.on_item(item, outcome)
        return outcome

    def _next_due(self, state: TaskState) -> datetime | None:
        """When the task's work is next due, if later than now: an action still held by a
        live holder elsewhere waits for its (heartbeat-extended) lease, not in a hot loop."""
        if not self.runtime.runs_here(state) or not state.task.status.is_open:
            return None
        due = work.due_at(state, self.runtime.next_step(state))
        return due if due is not None and due > self.runtime.clock() else None

    def once(self) -> int:
        """Claim and drive one batch; how many items it held."""
        items = self.claim()
        for item in items:
            self.work_on(item)
        return len(items)

    def run(self, stop: threading.Event) -> WorkerReport:
        """Work until ``stop`` is set; then release what is left, deregister and return.
        First, work stored before the queue existed is queued."""
        self.presence.start()
        try:
            try:
                self.report.requeued = self.runtime.requeue(ADMIN)
            except Exception as exc:  # the store is away: the queue is what it is
                log.warning("requeueing stored work failed: %s", exc)
            loops = [
                threading.Thread(target=self._loop, args=(stop,), name=f"relaystate-work-{i}")
                for i in range(max(self.concurrency, 1))
            ]
            for loop in loops:
                loop.start()
            for loop in loops:
                loop.join()
            self._retry_give_backs()
        finally:
            self.presence.stop()
        return self.report

    def _loop(self, stop: threading.Event) -> None:
        """One claim loop: claim, drive, give back; on stop, give back what is unstarted.
        A store error never ends the loop: it waits and tries again."""
        while not stop.is_set():
            try:
                self._retry_give_backs()
                items = self.claim()
            except Exception as exc:  # the store is away: wait and try again
                log.warning("claiming work failed: %s", exc)
                stop.wait(self.poll * 5)
                continue
            if not items:
                stop.wait(self.poll)
                continue
            while items and not stop.is_set():
                self.work_on(items.pop(0))
            self._release(items)

    def _give_back(self, item: WorkItem, due_at: datetime | None) -> None:
        """Release a driven item; if the store refuses, keep it to release later (a claim
        the heartbeat keeps alive would otherwise hold the task for good)."""
        try:
            self.runtime.stores.coordination.release_work(item.task_id, self.id, due_at=due_at)
        except Exception as exc:
            log.warning("giving back %s failed, will retry: %s", item.task_id, exc)
            with self._lock:
                self._unreleased.append((item, due_at))

    def _retry_give_backs(self) -> None:
        with self._lock:
            pending, self._unreleased = self._unreleased, []
        for item, due_at in pending:
            self._give_back(item, due_at)

    def _release(self, items: list[WorkItem]) -> None:
        """Give back claimed items never started (the worker is stopping)."""
        for item in items:
            self._give_back(item, None)
            with self._lock:
                self.report.released += 1


def run_until_signalled(worker: Worker, *, grace: float = 30.0) -> tuple[WorkerReport, bool]:
    """Run ``worker`` until SIGTERM or SIGINT, then drain for at most ``grace`` seconds.
    Returns the report and whether it drained in time (if not, it deregistered anyway:
    the action in hand is reconciled by whoever takes the task next)."""
    import signal

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    thread = threading.Thread(target=worker.run, args=(stop,), name="relaystate-worker")
    thread.daemon = True
    thread.start()
    while thread.is_alive() and not stop.is_set():
        thread.join(0.2)
    deadline = time.monotonic() + grace
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.05)
    drained = not thread.is_alive()
    if not drained:
        worker.presence.stop()
    return worker.report, drained
