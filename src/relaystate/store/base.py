"""The one store interface every backend implements (memory, SQLite, PostgreSQL; a Redis cache).

The write path is a single method, :meth:`Store.commit`: the task (conditional on its
version), the actions it touched, its journal entry, then the session and messages, all in
one transaction where the backend has one (invariants 2, 3 and 7). Every read of user data
takes ``user_id``; ``None`` is the explicit admin scope used by recovery and operators.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ..model import (
    Action,
    JournalEntry,
    Message,
    Session,
    Snapshot,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
)
from .schema import SchemaStatus, SchemaStep


@dataclass
class Commit:
    """One atomic change of one task.

    ``state.task.version`` is the new version; ``expected_version`` the one the writer read
    (0 to create). ``actions`` are only those created or changed by this commit.
    """

    state: TaskState
    expected_version: int
    actions: list[Action]
    entry: JournalEntry
    session: Session | None = None
    messages: list[Message] = field(default_factory=list)

    @property
    def task(self) -> Task:
        return self.state.task


class Store(ABC):
    """Durable home of Sessions, Tasks, Actions, the journal and its baselines."""

    url: str

    # -- tasks, actions, journal -------------------------------------------------------
    @abstractmethod
    def commit(self, commit: Commit) -> None:
        """Write one change atomically; VersionConflict if the task moved on, DuplicateKey
        if an action's idempotency key belongs to another action."""

    @abstractmethod
    def get_task(self, task_id: str, *, user_id: str | None) -> Task | None:
        """The task's current row, if it exists and (unless admin) belongs to ``user_id``."""

    @abstractmethod
    def get_actions(self, task_id: str) -> list[Action]:
        """All actions of one task in seq order (bounded by its template, not its history)."""

    def load(self, task_id: str, *, user_id: str | None) -> TaskState | None:
        """A task with its actions: everything resuming needs, and nothing of its history."""
        task = self.get_task(task_id, user_id=user_id)
        if task is None:
            return None
        return TaskState(task, self.get_actions(task_id))

    @abstractmethod
    def list_tasks(
        self,
        user_id: str | None,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """A user's tasks (all users' for admin), most recently updated first."""

    @abstractmethod
    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        """Actions in pending, running or unknown state, by id, those after ``after`` (a page
        of the whole set: recovery walks it to the end however large it is)."""

    @abstractmethod
    def find_action(self, idempotency_key: str) -> Action | None:
        """The action holding an idempotency key."""

    @abstractmethod
    def journal(self, task_id: str, *, after_version: int = 0) -> list[JournalEntry]:
        """A task's journal entries after a version, in version order."""

    @abstractmethod
    def baseline(self, task_id: str) -> Snapshot | None:
        """The task's latest baseline snapshot, if its history was ever compacted."""

    @abstractmethod
    def compact(self, snapshot: Snapshot) -> int:
        """Store a baseline and drop the entries it folds in; returns how many were dropped."""

    @abstractmethod
    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        """Ids of tasks that have journal entries older than ``cutoff`` (to compact)."""

    @abstractmethod
    def claim_for_recovery(
        self, task_ids: Sequence[str], owner: str, *, until: datetime, now: datetime
    ) -> list[str]:
        """Take these tasks for one recovery pass; returns those taken.

        A task another recoverer holds (its claim not yet past ``until``) is skipped, so two
        processes recovering at once split the work instead of racing for every task.
        Claims are coordination only, not task state: the task itself is still changed
        through version-checked commits.
        """

    @abstractmethod
    def release_recovery(self, owner: str) -> None:
        """Drop the claims of one recoverer (at the end of its pass)."""

    # -- sessions and messages ---------------------------------------------------------
    @abstractmethod
    def put_session(self, session: Session) -> None:
        """Create or replace a session."""

    @abstractmethod
    def get_session(self, session_id: str, *, user_id: str | None) -> Session | None:
        """A session, if it exists and belongs to ``user_id``."""

    @abstractmethod
    def append_messages(self, messages: Iterable[Message]) -> None:
        """Append messages to their sessions (after the task they describe was committed)."""

    @abstractmethod
    def messages(self, session_id: str, *, user_id: str | None, limit: int = 50) -> list[Message]:
        """The last ``limit`` messages of a session, oldest first."""

    # -- workers ---------------------------------------------------------------------
    @abstractmethod
    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a process that will hold leases."""

    @abstractmethod
    def deregister_worker(self, worker_id: str, at: datetime) -> None:
        """Mark a worker stopped: its leases count as expired at once."""

    @abstractmethod
    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        """Which of these workers have deregistered."""

    # -- schema ---------------------------------------------------------------------
    def schema_status(self) -> SchemaStatus | None:
        """The database schema's applied and latest versions; None for a backend without
        versioned migrations (memory). Opening a store normally upgrades it already."""
        return None

    def upgrade_schema(self) -> list[SchemaStep]:
        """Apply pending schema migrations; returns the steps this call applied."""
        return []

    def close(self) -> None:  # noqa: B027 - optional for backends without resources
        """Release connections."""
