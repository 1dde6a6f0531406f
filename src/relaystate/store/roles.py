"""The store by role: small interfaces that a backend implements one by one.

=================  =====================================================================
``TaskStore``      Tasks, their Actions, the journal and baselines; ``commit`` is the one
                   write path (task + actions + journal + the turn's session and messages)
``SessionStore``   Sessions and their messages (Redis plays this role alone, as a cache)
``Coordination``   recovery claims, the worker registry and the work queue
``SchemaAdmin``    the database schema's version and its upgrades (SQL backends)
``Identities``     the HTTP API's keys (hashed), by user
``Memories``       long-term memory: items per user and namespace, their full-text index
                   and their vectors (one per embedder)
``WorkingMemory``  facts with validity intervals (a task's key entities, the memory graph)
                   and the summaries of a task's older turns
=================  =====================================================================

A backend subclasses the roles it plays; :class:`~relaystate.store.bundle.Stores` binds one
backend per role, and the conformance suite (:mod:`relaystate.testing`, one suite class per
role) runs each role's tests against every backend that plays it, a user's own included.
Finer differences are ``capabilities`` flags.

Reads of user data take a :class:`~relaystate.scope.Scope`: a user scope sees that user's
rows only, and another user's ids answer like ids that do not exist. Maintenance reads
(recovery scans, compaction) are for admin callers; the runtime checks that before it asks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..model import (
    OPEN_TASK_STATUSES,
    Action,
    ApiKey,
    Fact,
    JournalEntry,
    MemoryItem,
    Message,
    Session,
    Snapshot,
    Summary,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
    WorkerStatus,
    WorkItem,
)
from ..scope import Scope
from .schema import SchemaStatus, SchemaStep
from .turn_memory import Remember

DURABLE = "durable"
"""Committed data survives the process (not ``memory://``)."""
SHARED = "shared"
"""Several processes may use the same store at once."""
ONE_READ_TURN = "one_read_turn"
"""``read_turn`` fetches a session and its open tasks in one round trip."""
MEMORY_IN_COMMIT = "memory_in_commit"
"""``commit`` and ``write`` keep what a :class:`~relaystate.store.turn_memory.Remember` asks
(the turn's memory items with their keyword index, the task's facts) in their transaction;
without it, the bundle writes them right after the commit."""


@dataclass
class Commit:
    """One atomic change of one task, with what its turn said.

    ``state.task.version`` is the new version; ``expected_version`` the one the writer read
    (0 to create). ``actions`` are only those created or changed by this commit. The session
    and messages, when given, commit in the same transaction, after the task (invariant 2);
    the store numbers the messages and sets their ``id``.
    """

    state: TaskState
    expected_version: int
    actions: list[Action]
    entry: JournalEntry
    session: Session | None = None
    messages: list[Message] = field(default_factory=list)
    rows: dict[str, Any] | None = None
    """The state's dict form (``TaskState.to_dict()``) if the writer made it already."""
    requeue: bool = False
    """The task's row in the work queue changes with this commit: to ``work`` (None: the
    row goes, nothing automatic is due). A claim on the row is kept."""
    work: WorkItem | None = None
    remember: Remember | None = None
    """Keep the turn in memory, in this transaction: the messages as long-term items, the
    task's slots as its facts (only asked of a backend with ``MEMORY_IN_COMMIT``)."""

    @property
    def task(self) -> Task:
        return self.state.task

    def task_row(self) -> dict[str, Any]:
        """The task's dict form, as stored (made once per commit)."""
        return self.rows["task"] if self.rows is not None else self.task.to_dict()

    def action_row(self, action: Action) -> dict[str, Any]:
        if self.rows is not None:
            return dict(self.rows["actions"][str(action.seq)])
        return action.to_dict()


_EVERY = 2**62
"""A ``limit`` that means every row."""


class _Closable:
    url: str
    capabilities: frozenset[str] = frozenset()

    def close(self) -> None:
        """Release connections."""


class TaskStore(_Closable, ABC):
    """Durable home of Tasks, Actions, the journal and its baselines."""

    @abstractmethod
    def commit(self, commit: Commit) -> None:
        """Write one change atomically; VersionConflict if the task moved on (or belongs to
        another user), DuplicateKey if an action's idempotency key belongs to another action,
        NotFound if the session belongs to another user. Nothing is written on any error."""

    @abstractmethod
    def load(self, task_id: str, scope: Scope) -> TaskState | None:
        """A task with its actions: everything resuming needs, and nothing of its history."""

    @abstractmethod
    def load_many(
        self,
        task_ids: Sequence[str],
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
    ) -> list[TaskState]:
        """Those of these tasks that exist in scope (and have one of ``statuses``), with their
        actions, in one read; in the order of ``task_ids``."""

    @abstractmethod
    def list_tasks(
        self,
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """The scope's tasks (every user's for admin), most recently updated first."""

    def task_ids_starting(self, prefix: str, scope: Scope, *, limit: int = 2) -> list[str]:
        """The ids of the scope's tasks that start with ``prefix``, in id order, at most
        ``limit`` (two tell a unique prefix from an ambiguous one). This default reads every
        task of the scope; a backend answers it with one query."""
        every = self.list_tasks(scope, limit=_EVERY)
        return sorted(t.id for t in every if t.id.startswith(prefix))[: max(limit, 0)]

    def count_tasks(self, scope: Scope) -> dict[TaskStatus, int]:
        """How many of the scope's tasks are in each status (statuses with none left out).
        This default reads every task of the scope; a backend counts in one query."""
        counts: dict[TaskStatus, int] = {}
        for task in self.list_tasks(scope, limit=_EVERY):
            counts[task.status] = counts.get(task.status, 0) + 1
        return counts

    @abstractmethod
    def find_action(self, idempotency_key: str, scope: Scope) -> Action | None:
        """The action holding an idempotency key, if its task is in scope."""

    @abstractmethod
    def get_action(self, action_id: str, scope: Scope) -> Action | None:
        """An action by its id, if its task is in scope."""

    @abstractmethod
    def journal(self, task_id: str, scope: Scope, *, after_version: int = 0) -> list[JournalEntry]:
        """A task's journal entries after a version, in version order ([] out of scope)."""

    @abstractmethod
    def baseline(self, task_id: str, scope: Scope) -> Snapshot | None:
        """The task's latest baseline snapshot, if its history was ever compacted."""

    # -- maintenance: admin callers only -------------------------------------------------
    @abstractmethod
    def open_actions(self, *, limit: int = 1000, after: str | None = None) -> list[Action]:
        """Actions in pending, running or unknown state, by id, those after ``after`` (a page
        of the whole set: recovery walks it to the end however large it is)."""

    @abstractmethod
    def extend_leases(self, owner: str, until: datetime, *, now: datetime) -> int:
        """Push the lease of every running or unknown action ``owner`` holds out to
        ``until`` (never shorter): a live holder's heartbeat, so a slow action is not
        taken for abandoned. Not a change of the task (no version, no journal entry). A
        lease that ended by ``now`` stays ended: a late beat (a starved holder) must not
        revive a lease that another process may be taking over at this moment (that
        commit checks the task's version, which a beat does not move)."""

    @abstractmethod
    def compact(self, snapshot: Snapshot) -> int:
        """Store a baseline and drop the entries it folds in; returns how many were dropped."""

    @abstractmethod
    def tasks_with_entries_before(self, cutoff: datetime, *, limit: int = 1000) -> list[str]:
        """Ids of tasks that have journal entries older than ``cutoff`` (to compact)."""


class SessionStore(_Closable, ABC):
    """Sessions and their messages: display and routing context, never task state."""

    @abstractmethod
    def get_session(self, session_id: str, scope: Scope) -> Session | None:
        """A session, if it exists and is in scope."""

    @abstractmethod
    def write(
        self,
        session: Session | None,
        messages: Sequence[Message] = (),
        *,
        remember: Remember | None = None,
    ) -> None:
        """Create or replace a session and append messages, in one transaction (a turn that
        changed no task). NotFound if the session id belongs to another user. The store
        numbers the messages and sets their ``id``. ``remember`` (asked only of a backend
        with ``MEMORY_IN_COMMIT``): the messages' memory items in the same transaction."""

    @abstractmethod
    def messages(
        self, session_id: str, scope: Scope, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        """The last ``limit`` messages of a session (those numbered below ``before``, if
        given), oldest first."""

    def committed(self, session: Session | None, messages: Sequence[Message]) -> None:
        """Told after a task commit wrote this session and these messages durably: a cache
        copies them; a durable store has nothing left to do."""

    @abstractmethod
    def said(self, user_id: str, request_key: str) -> list[Message]:
        """The user's words stored with ``request_key`` and the replies that followed them
        (up to the user's next words), oldest first; [] when no turn was committed with it.
        Writing a second message with a key the user already used raises RepeatedRequest."""


def one_turn(messages: Sequence[Message]) -> list[Message]:
    """The first message (the user's words) and those after it up to the user's next."""
    turn = list(messages[:1])
    for message in messages[1:]:
        if message.role == "user":
            break
        turn.append(message)
    return turn


TURN_READ = 16
"""Messages read after a turn's words to find its replies (a turn writes one or two)."""


class Coordination(_Closable, ABC):
    """Who works on what: recovery claims and the workers that hold leases."""

    @abstractmethod
    def claim_for_recovery(
        self,
        task_ids: Sequence[str],
        owner: str,
        *,
        until: datetime,
        now: datetime,
        gone: Collection[str] = (),
    ) -> list[str]:
        """Take these (existing) tasks for one recovery pass; returns those taken.

        A task another recoverer holds (its claim not yet past ``until``) is skipped, so two
        processes recovering at once split the work instead of racing for every task;
        unless its holder is in ``gone`` (a recoverer known dead: its claims expire at once,
        as a dead process's action leases do). Claims are coordination only, not task
        state: the task itself is still changed through version-checked commits.
        """

    @abstractmethod
    def recovery_claimants(self, now: datetime) -> frozenset[str]:
        """Who holds live recovery claims (to tell which of them are dead processes)."""

    @abstractmethod
    def release_recovery(self, owner: str) -> None:
        """Drop the claims of one recoverer (at the end of its pass)."""

    @abstractmethod
    def register_worker(self, worker: WorkerInfo) -> None:
        """Record a process that will hold leases."""

    @abstractmethod
    def deregister_worker(self, worker: WorkerInfo, at: datetime) -> None:
        """Mark a worker stopped (recorded even if it never registered): its leases count as
        expired at once."""

    @abstractmethod
    def stopped_workers(self, worker_ids: Iterable[str]) -> frozenset[str]:
        """Which of these workers have deregistered."""

    @abstractmethod
    def heartbeat(self, worker: WorkerInfo, at: datetime, *, role: str = "worker") -> None:
        """Record that a process is alive (registering it, with its role, if it is new)."""

    def database_time(self) -> datetime | None:
        """The time by the clock every process sharing this store agrees on (the database
        server's), or None where the store has no clock of its own (one host, or one
        process): leases are then judged by the local clock. See ``runtime.shared_clock``."""
        return None

    @abstractmethod
    def workers(self, *, include_stopped: bool = False) -> list[WorkerStatus]:
        """Registered processes (those still running, unless ``include_stopped``), with the
        work items each holds, oldest first."""

    # -- the work queue ---------------------------------------------------------------
    @abstractmethod
    def claim_work(
        self,
        owner: str,
        *,
        build: str,
        runnable: Mapping[str, Collection[int]],
        now: datetime,
        until: datetime,
        limit: int = 1,
        gone: Collection[str] = (),
    ) -> list[WorkItem]:
        """Take up to ``limit`` items due by ``now``, earliest first, that nobody holds (or
        whose holder's lease ended, or who is in ``gone``: those are due at once) and that
        ``owner`` may run: not pinned to another build, of a type and version in
        ``runnable``. Concurrent claimers never take the same item."""

    @abstractmethod
    def enqueue_work(self, items: Sequence[WorkItem]) -> int:
        """Add rows for tasks that have none (written by a build before the queue existed);
        a task that has a row keeps it. How many were added."""

    @abstractmethod
    def release_work(self, task_id: str, owner: str, *, due_at: datetime | None = None) -> None:
        """Give an item back (if ``owner`` still holds it), due again at ``due_at`` if given."""

    @abstractmethod
    def extend_work(self, owner: str, until: datetime) -> int:
        """Extend the lease of every item ``owner`` holds; how many it holds."""

    @abstractmethod
    def work_holders(self, now: datetime) -> frozenset[str]:
        """Who holds live claims on work items (to tell which of them are dead processes)."""

    @abstractmethod
    def queued_work(self, *, limit: int = 1000) -> list[WorkItem]:
        """Items in the queue, earliest due first."""


class SchemaAdmin(_Closable, ABC):
    """A database whose schema is versioned (the SQL backends)."""

    @abstractmethod
    def schema_status(self) -> SchemaStatus:
        """The database schema's applied and latest versions. Opening a store normally
        upgrades it already."""

    @abstractmethod
    def upgrade_schema(self) -> list[SchemaStep]:
        """Apply pending schema migrations; returns the steps this call applied."""

    def durability_warnings(self) -> list[str]:
        """What in the database's settings could lose a commit already acknowledged (a
        server crash, a failover to a standby that lacks it): one sentence each."""
        return []


class Identities(_Closable, ABC):
    """Who may call the HTTP API: keys by id, each with its user and a hash of its secret."""

    @abstractmethod
    def add_key(self, key: ApiKey) -> None:
        """Store a new key (its id is new)."""

    @abstractmethod
    def get_key(self, key_id: str) -> ApiKey | None:
        """A key by id, revoked or not."""

    @abstractmethod
    def list_keys(self, user_id: str | None = None) -> list[ApiKey]:
        """Every key (of one user, if given), oldest first."""

    @abstractmethod
    def revoke_keys(
        self, *, at: datetime, key_id: str | None = None, user_id: str | None = None
    ) -> int:
        """Revoke one key, or every key of a user; how many were active."""


@dataclass(frozen=True)
class MemoryFilter:
    """Which items a search may return, beside its user and namespace: ``time`` in
    [since, until), one of ``sources``, one of ``task_ids``."""

    since: datetime | None = None
    until: datetime | None = None
    sources: tuple[str, ...] = ()
    task_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryChanges:
    """What changed in a namespace after a generation (:meth:`Memories.memory_changes`)."""

    generation: int
    """The namespace's generation these changes reach: the ``after`` of the next call."""
    items: list[MemoryItem]
    """Each item written after ``after`` up to ``generation`` (added, replaced, or given a
    vector), once, as it is now, in the order written: by generation, and the items of one
    write in the order given (on PostgreSQL a replaced item comes before the write's new ones)."""
    vectors: dict[str, bytes]
    """When an embedder was named: that embedder's vector of each of those items that has
    one, by item id (float32, little-endian)."""


class Memories(_Closable, ABC):
    """Long-term memory. Every call names its user: one user's items are invisible to
    another's calls, whatever the namespace."""

    @abstractmethod
    def put_memories(self, items: Sequence[MemoryItem], *, at: datetime) -> int:
        """Add or replace items (by user, namespace and id) in one transaction; a replaced
        item loses its vectors. Returns how many were written."""

    @abstractmethod
    def get_memories(self, user_id: str, namespace: str, ids: Sequence[str]) -> list[MemoryItem]:
        """The items of these ids that exist, in the order asked."""

    @abstractmethod
    def count_memories(self, user_id: str, namespace: str) -> int:
        """How many items the namespace holds."""

    @abstractmethod
    def latest_memories(
        self, user_id: str, namespace: str, *, task_id: str | None = None, limit: int
    ) -> list[MemoryItem]:
        """The ``limit`` latest items by time (of one task, if given), oldest first."""

    @abstractmethod
    def search_words(
        self,
        user_id: str,
        namespace: str,
        terms: Sequence[str],
        *,
        k: int,
        where: MemoryFilter | None = None,
    ) -> list[tuple[str, float]]:
        """The ``k`` items that match any of ``terms`` best (full-text rank, higher is
        better), as (id, score)."""

    @abstractmethod
    def put_vectors(
        self, user_id: str, namespace: str, embedder: str, vectors: Sequence[tuple[str, bytes]]
    ) -> None:
        """Store items' vectors (float32, little-endian) made by ``embedder``."""

    @abstractmethod
    def load_vectors(
        self, user_id: str, namespace: str, embedder: str, where: MemoryFilter | None = None
    ) -> list[tuple[str, bytes]]:
        """Every vector of the namespace made by ``embedder`` (of the items ``where``
        admits), as (id, float32 bytes)."""

    @abstractmethod
    def unembedded(
        self, user_id: str, namespace: str, embedder: str, *, limit: int
    ) -> list[MemoryItem]:
        """Items that have no vector of ``embedder`` yet, oldest first."""

    @abstractmethod
    def unembedded_owners(self, namespace: str, embedder: str, *, limit: int) -> list[str]:
        """The users (sorted) with items of ``namespace`` that have no vector of
        ``embedder`` yet: what a background pass catches up after a restart (a turn's items
        commit with it; their vectors come after, and a crash may fall in between)."""

    @abstractmethod
    def memory_generation(self, user_id: str, namespace: str) -> int:
        """A number that changes whenever the namespace's items or vectors do (what a
        process-local cache of its vectors is keyed on)."""

    @abstractmethod
    def memory_changes(
        self, user_id: str, namespace: str, after: int, *, embedder: str | None = None
    ) -> MemoryChanges:
        """What changed in the namespace after generation ``after``: items added or replaced,
        and items given a vector (they come again, with it when ``embedder`` is theirs). A
        replaced item comes as its new version, without the vectors it lost.

        How a process-local cache of a namespace follows it: read the generation, load the
        namespace once (``latest_memories``, ``load_vectors``), then call this with the
        generation read *before* that load, and again with each answer's ``generation``.
        Items written before the store kept this feed (an older schema) come only from the
        full load. Every write bumps the namespace's generation before it writes its rows
        and stamps them with it; the generation row's lock serialises one namespace's
        writers until they commit, so once a generation is visible every row stamped up to
        it is too, and later writes are left for the next call."""

    def reindex_words(self, *, batch: int = 500) -> int:
        """Rewrite the keyword index of every item indexed otherwise than today's
        :func:`~relaystate.store.terms.index_text` would (items written before Traditional
        Chinese was folded to Simplified); how many were. Idempotent, safe beside writers.
        A backend that keeps no index of its own has nothing to do."""
        return 0


class WorkingMemory(_Closable, ABC):
    """Facts and summaries; every call names its user and sees only that user's rows."""

    @abstractmethod
    def record_facts(self, facts: Sequence[Fact]) -> list[Fact]:
        """Record facts in one transaction, each against what is current then: a fact equal
        to the current one changes nothing; a new value of a ``single`` predicate closes the
        current one at its ``valid_from``; an object None only closes. Returns the facts
        recorded (with their ``seq``)."""

    @abstractmethod
    def current_facts(
        self,
        user_id: str,
        *,
        subjects: Sequence[str] | None = None,
        touching: Sequence[str] | None = None,
        at: datetime | None = None,
    ) -> list[Fact]:
        """Facts valid at ``at`` (default: still open): about these ``subjects``, or whose
        subject or text object is one of the ``touching`` nodes (case-insensitive), in the
        order they were recorded."""

    @abstractmethod
    def fact_history(self, user_id: str, subject: str, predicate: str | None = None) -> list[Fact]:
        """Every fact ever recorded about ``subject`` (and ``predicate``), oldest first."""

    @abstractmethod
    def add_summary(self, summary: Summary) -> None:
        """Store a new summary (its id is new for its user)."""

    @abstractmethod
    def merge_summaries(self, user_id: str, parts: Sequence[str], into: Summary) -> None:
        """Store ``into`` and mark ``parts`` merged into it, in one transaction; a part
        already merged (by a concurrent merge) is a VersionConflict and nothing changes."""

    @abstractmethod
    def summaries(self, user_id: str, task_id: str, *, live: bool = True) -> list[Summary]:
        """A task's summaries, oldest first; ``live``: only those not merged into another."""


class Backend(TaskStore, SessionStore, Coordination, Identities):
    """A database that plays the task, session, coordination and identity roles together,
    so that a turn's task change, session and messages commit in one transaction."""

    def read_turn(self, session_id: str, scope: Scope) -> tuple[Session | None, list[TaskState]]:
        """A session and those of the tasks it lists that are still open, in one read where
        the backend can (``ONE_READ_TURN``)."""
        session = self.get_session(session_id, scope)
        if session is None or not session.active_task_ids:
            return session, []
        return session, self.load_many(session.active_task_ids, scope, statuses=OPEN_TASK_STATUSES)
