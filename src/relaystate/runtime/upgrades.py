"""What an operator needs during a rolling upgrade: the builds in service (their processes
and the open tasks pinned to each, so it is plain when an old build may go) and lifting
every stored task to the versions this build runs, in bulk."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..errors import (
    MigrationFailed,
    OtherBuild,
    RelaystateError,
    TemplateMismatch,
    VersionConflict,
)
from ..model import OPEN_TASK_STATUSES, TaskStatus, WorkerStatus
from ..scope import Scope
from ..store.bundle import Stores
from ..task.versions import TemplateVersions
from . import work
from .writer import TaskWriter

SILENT_AFTER = timedelta(seconds=90)
"""A registered process with no heartbeat for this long is shown as silent (likely dead)."""


@dataclass
class BuildStatus:
    """One build: its live processes by role, open tasks pinned to it, open tasks it
    started, and queued work only it may take."""

    build: str
    processes: dict[str, int] = field(default_factory=dict)
    pinned_open: int = 0
    open_started: int = 0
    queued_pinned: int = 0

    @property
    def can_retire(self) -> bool:
        """Nothing is pinned to it any more: its processes may stop."""
        return self.pinned_open == 0


def live(worker: WorkerStatus, now: datetime) -> bool:
    """Registered, not stopped, and heard from recently."""
    beat = worker.heartbeat_at or worker.info.started_at
    return worker.stopped_at is None and now - beat < SILENT_AFTER


def builds(stores: Stores, now: datetime) -> list[BuildStatus]:
    """Every build with a live process or an open task, oldest first by name."""
    found: dict[str, BuildStatus] = {}

    def status(build: str) -> BuildStatus:
        return found.setdefault(build, BuildStatus(build))

    for worker in stores.coordination.workers():
        if live(worker, now):
            counts = status(worker.info.build).processes
            counts[worker.role] = counts.get(worker.role, 0) + 1
    admin = Scope.admin("builds")
    for task in stores.tasks.list_tasks(admin, statuses=OPEN_TASK_STATUSES, limit=10**9):
        entry = status(task.created_by_build)
        entry.open_started += 1
        entry.pinned_open += task.pinned
    for item in stores.coordination.queued_work(limit=10**9):
        if item.build is not None:
            status(item.build).queued_pinned += 1
    return sorted(found.values(), key=lambda b: b.build)


def requeue(stores: Stores, writer: TaskWriter) -> int:
    """Queue the automatic work of running Tasks that have no row in the queue (written by
    a build from before the queue, or left by a failed write); returns how many."""
    admin = Scope.admin("requeue")
    queued = {w.task_id for w in stores.coordination.queued_work(limit=10**9)}
    running = stores.tasks.list_tasks(admin, statuses=[TaskStatus.RUNNING], limit=10**9)
    items = []
    for task in running:
        if task.id in queued:
            continue
        state = stores.tasks.load(task.id, admin)
        if state is None:
            continue
        try:
            due = work.due_at(state, writer.next_step(state))
        except RelaystateError:  # another build's (too new, pinned elsewhere): its own
            continue
        if due is not None:
            state.task.due_at = due
            item = work.item_for(state)
            if item is not None:
                items.append(item)
    return stores.coordination.enqueue_work(items)


@dataclass
class MigrationReport:
    """Counts per (type, version found): lifted, failed (with the first reason), skipped
    (pinned to their version, or with no migration path), deferred (an action in flight),
    and tasks already current."""

    lifted: Counter[tuple[str, int]] = field(default_factory=Counter)
    failed: Counter[tuple[str, int]] = field(default_factory=Counter)
    skipped: Counter[tuple[str, int]] = field(default_factory=Counter)
    deferred: Counter[tuple[str, int]] = field(default_factory=Counter)
    """An action of the task was in flight: it is lifted on its next read once settled."""
    current: int = 0
    reasons: dict[tuple[str, int], str] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def examined(self) -> int:
        return (
            self.current
            + sum(self.lifted.values())
            + sum(self.failed.values())
            + sum(self.skipped.values())
            + sum(self.deferred.values())
        )


def migrate_all(
    stores: Stores,
    writer: TaskWriter,
    versions: TemplateVersions,
    *,
    dry_run: bool = False,
    on_task: Callable[[str, str], None] | None = None,
) -> MigrationReport:
    """Lift every stored task that is behind (each in its own commit, journaled by
    ``migration``); with ``dry_run``, run the migrations in memory and write nothing."""
    admin = Scope.admin("migrate")
    report = MigrationReport(dry_run=dry_run)
    behind: dict[str, tuple[str, int]] = {}
    for task in stores.tasks.list_tasks(admin, limit=10**9):
        top = versions.newest.get(task.type)
        if top is None or task.template_version >= top.version:
            report.current += 1
        elif versions.needs_lift(task):
            behind[task.id] = (task.type, task.template_version)
        else:
            report.skipped[(task.type, task.template_version)] += 1
    by_key: dict[tuple[str, int], list[str]] = defaultdict(list)
    for task_id, key in behind.items():
        by_key[key].append(task_id)
    for key, ids in sorted(by_key.items()):
        for task_id in ids:
            outcome = _one(writer, versions, task_id, admin, dry_run)
            if outcome == "lifted":
                report.lifted[key] += 1
            elif outcome == "current":
                report.current += 1
            elif outcome == "deferred":  # an action in flight: lifted once it settles
                report.deferred[key] += 1
            else:
                report.failed[key] += 1
                report.reasons.setdefault(key, outcome)
            if on_task is not None:
                on_task(task_id, outcome)
    return report


def _one(
    writer: TaskWriter, versions: TemplateVersions, task_id: str, admin: Scope, dry_run: bool
) -> str:
    """``lifted``, ``current`` (someone lifted it meanwhile) or the failure's reason."""
    state = writer.stores.tasks.load(task_id, admin)
    if state is None or not versions.needs_lift(state.task):
        return "current"
    try:
        if dry_run:
            versions.lift(state, writer.clock())
            return "lifted"
        after = writer.upgraded(state, admin)
    except OtherBuild:
        return "deferred"
    except (MigrationFailed, TemplateMismatch, VersionConflict) as exc:
        return str(exc)
    return "deferred" if versions.needs_lift(after.task) else "lifted"
