"""The front door: sessions, tasks and turns; resume, recover, audit.

A :class:`Runtime` binds the store roles to the task templates this build knows. Every
method takes a :class:`~relaystate.scope.Scope` first: the user it acts for, or an admin.
Every change goes through the writer (optimistic locking, journal, task and messages in one
commit) and every action through the action protocol. Nothing here reads chat history to
decide what to do next. Callers above (conversation, CLI, HTTP API) use these methods and
never the store or the writer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import inputs
from ..actions.leases import Owner, hostname
from ..actions.runner import ActionRunner
from ..errors import (
    InvalidInput,
    MigrationFailed,
    NotFound,
    StoreURLError,
    TemplateError,
    TemplateMismatch,
)
from ..model import (
    OPEN_TASK_STATUSES,
    Action,
    ApiKey,
    JournalEntry,
    Message,
    Session,
    Snapshot,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
    WorkerStatus,
)
from ..scope import Scope, checked
from ..store.bundle import Stores
from ..store.roles import Backend, Identities
from ..store.schema import SchemaStatus, SchemaStep
from ..task import journal
from ..task.edits import (
    Cancel,
    Confirm,
    Fill,
    Rerun,
    Resolve,
    Resume,
    Start,
    TaskEdit,
    change_for,
    check_edit,
    reason_for,
    validated,
)
from ..task.labels import Labels
from ..task.machine import first_stage
from ..task.next_step import NextStep
from ..task.templates import TaskTemplate
from ..task.versions import TemplateVersions
from . import recovery, upgrades
from .driver import Driver, Transcript
from .recovery import RecoveryReport as RecoveryReport
from .sessions import MAX_SESSION_TASKS, live_or_new, needs_write
from .shared_clock import SharedClock
from .turns import PendingTurn
from .upgrades import BuildStatus, MigrationReport
from .writer import TaskWriter, Written

JSON = Any
MessageLike = Message | tuple[str, str]

DEFAULT_RETENTION = timedelta(days=7)
EXECUTE_MODES = ("inline", "queue")
MIN_PREFIX = 4
"""The fewest characters of a Task id that :meth:`Runtime.task_id` takes as a prefix."""
MAX_SHOWN = 5
"""How many matching ids an ambiguous prefix's error names."""
log = logging.getLogger("relaystate.runtime")


@dataclass
class Resumption:
    """Where a task stands after resuming it, computed from stored state alone."""

    state: TaskState
    step: NextStep

    @property
    def task(self) -> Task:
        return self.state.task


class Runtime:
    """Durable Sessions, Tasks and Actions over one set of store roles."""

    max_text: int | None = None
    """The most characters a text may have; None: ``RELAYSTATE_MAX_TEXT``, else 10,000."""

    def __init__(
        self,
        stores: Stores | Backend,
        templates: Iterable[TaskTemplate],
        *,
        build: str = "dev",
        clock: Callable[[], datetime] | None = None,
        lease: timedelta = timedelta(seconds=60),
        retention: timedelta = DEFAULT_RETENTION,
        max_inline_wait: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        execute: str = "inline",
        dual_write: bool = False,
    ) -> None:
        if execute not in EXECUTE_MODES:
            raise ValueError(f"execute must be one of {EXECUTE_MODES}, not {execute!r}")
        self.stores = stores if isinstance(stores, Stores) else Stores.of(stores)
        self.build = build
        if clock is None:  # the database server's clock where the store is shared by hosts
            clock = SharedClock(self.stores.coordination.database_time)
        self.clock: Callable[[], datetime] = clock
        """Now, for every stored time: by default the clock of the database server where
        several hosts share the store (``runtime.shared_clock``), else this host's."""
        self.retention = retention
        self.execute = execute
        """"inline": this process runs the actions a change makes due (the embedded
        default); "queue": it commits the change and leaves them to workers."""
        self.versions = TemplateVersions(dual_write=dual_write)
        self.templates: dict[str, TaskTemplate] = self.versions.starting
        """The version of each task type new tasks start on: the newest this build knows
        (the oldest in dual-write, so that an older build beside it reads them)."""
        for template in templates:
            self.register(template)
        self.owner = Owner.current().id
        self.lease = lease
        self._stopped: set[str] = set()
        self._took_lease = False
        self._writer = TaskWriter(self.stores, self.versions, clock, build=build)
        self._actions = ActionRunner(
            self._writer.template, owner=self.owner, lease=lease, is_stopped=self._is_stopped
        )
        self._driver = Driver(
            self._writer,
            self._actions,
            clock=clock,
            sleep=sleep,
            max_inline_wait=max_inline_wait,
            on_claim=self._leased,
            runs_here=self.runs_here,
        )

    @property
    def max_inline_wait(self) -> float:
        """Seconds a call waits for a retry's backoff instead of returning (default 5)."""
        return self._driver.max_inline_wait

    @max_inline_wait.setter
    def max_inline_wait(self, seconds: float) -> None:
        self._driver.max_inline_wait = seconds

    # -- set-up --------------------------------------------------------------------------
    def register(self, template: TaskTemplate) -> None:
        """Make a task type (one version of it) known to this runtime (checked for
        undeclared actions); a build may carry several versions of a type."""
        template.validate()
        self.versions.register(template)

    def runs_here(self, state: TaskState) -> bool:
        """Whether this process runs the task's actions itself: in inline mode, unless the
        task is pinned to another build (its work waits in the queue for that build)."""
        task = state.task
        return self.execute == "inline" and (not task.pinned or task.created_by_build == self.build)

    def upgraded(self, scope: Scope, states: Iterable[TaskState]) -> list[TaskState]:
        """These tasks as this build runs them (older ones lifted and the lift committed);
        a task whose migration fails is left out (it is marked as needing attention), and
        so is one another definition of its version made (TemplateMismatch: not lifted)."""
        scope = checked(scope)
        out = []
        for state in states:
            try:
                out.append(self._writer.upgraded(state, scope))
            except (MigrationFailed, TemplateMismatch) as exc:
                log.warning("task %s left out: %s", state.task.id, exc)
        return out

    def _is_stopped(self, owner_id: str) -> bool:
        # A worker that deregistered never comes back: remember it, ask once.
        if owner_id in self._stopped:
            return True
        if owner_id in self.stores.coordination.stopped_workers([owner_id]):
            self._stopped.add(owner_id)
            return True
        return False

    def _leased(self) -> None:
        self._took_lease = True

    def worker_info(self) -> WorkerInfo:
        """This process as the store's workers table records it (id: its lease owner)."""
        return self._worker()

    def _worker(self) -> WorkerInfo:
        owner = Owner.parse(self.owner)
        pid = owner.pid if owner is not None else os.getpid()
        return WorkerInfo(self.owner, hostname(), pid, self.build, self.clock())

    def close(self) -> None:
        """Close the store. A runtime that held leases first marks itself stopped, so a lease
        a failure left behind counts as expired for every other process at once."""
        if self._took_lease:
            with contextlib.suppress(Exception):
                self.stores.coordination.deregister_worker(self._worker(), self.clock())
        self.stores.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def template_of(self, state: TaskState) -> TaskTemplate:
        """The template a stored task runs on (refused if it is newer than this build)."""
        return self._writer.template(state)

    def next_step(self, state: TaskState) -> NextStep:
        """What the machine says comes next for this state, as of now (nothing written)."""
        return self._writer.next_step(state)

    # -- sessions ------------------------------------------------------------------------
    def open_session(
        self,
        scope: Scope,
        session_id: str | None = None,
        *,
        language: str | None = None,
        timezone: str | None = None,
        ttl: timedelta | None = None,
    ) -> Session:
        """Reopen a session (a new one if it is unknown or expired; tasks are unaffected)."""
        inputs.check(
            scope,
            session_id=session_id,
            language=language or None,
            timezone=timezone or None,
            ttl=ttl,
        )
        user = checked(scope).owner("a session")
        session = self.live_session(scope, session_id)
        if language:
            session.language = language
        if timezone:
            session.timezone = timezone
        if ttl is not None:
            session.ttl_seconds = max(int(ttl.total_seconds()), 1)
        session.touch(self.clock())
        self.stores.write_session(session, [])
        assert session.user_id == user
        return session

    def session(self, scope: Scope, session_id: str) -> Session:
        """A stored session in scope (expired ones too: they keep their messages)."""
        inputs.check(scope, session_id=session_id)
        found = self.stores.sessions.get_session(session_id, checked(scope))
        if found is None:
            raise NotFound(f"no session {session_id}")
        return found

    def live_session(self, scope: Scope, session_id: str | None) -> Session:
        """The stored session if it is still alive, else a new empty one with that id."""
        inputs.check(scope, session_id=session_id)
        stored = None
        if session_id is not None:
            stored = self.stores.sessions.get_session(session_id, checked(scope))
        return live_or_new(stored, session_id, checked(scope).owner("a session"), self.clock())

    def messages(
        self, scope: Scope, session_id: str, *, limit: int = 50, before: int | None = None
    ) -> list[Message]:
        """A session's last ``limit`` messages (below ``before``, if given), oldest first."""
        inputs.check(scope, session_id=session_id, limit=limit, before=before)
        return self.stores.sessions.messages(session_id, checked(scope), limit=limit, before=before)

    def said(self, scope: Scope, request_key: str) -> list[Message]:
        """The turn the scope's user committed with ``request_key`` (their words and the
        replies that followed), or [] if none did: how a retried request is answered."""
        user = inputs.check(scope).owner("a turn")
        return self.stores.said(user, inputs.request_key(request_key))

    def begin_turn(
        self, scope: Scope, session_id: str | None, text: str, *, language: str | None = None
    ) -> PendingTurn:
        """Read what one turn needs (the session and its open tasks) in one read; the
        caller decides, then commits everything the turn did with ``PendingTurn.commit``."""
        inputs.check(
            scope,
            max_text=self.max_text,
            session_id=session_id,
            text=text,
            language=language or None,
        )
        return PendingTurn.read(self, checked(scope), session_id, text, language)

    # -- tasks ---------------------------------------------------------------------------
    def start(
        self,
        scope: Scope,
        type: str,
        *,
        session_id: str | None = None,
        slots: Mapping[str, JSON] | None = None,
        goal: str | None = None,
        context: Mapping[str, JSON] | None = None,
        task_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
    ) -> TaskState:
        """Start a task of a registered type for the scope's user; runs what it can at once."""
        inputs.check(
            scope,
            max_text=self.max_text,
            type=type,
            session_id=session_id,
            slots=slots or {},
            goal=goal,
            context=context,
            new_task_id=task_id,
            messages=messages,
            run=run,
        )
        task_id = task_id or uuid.uuid4().hex
        edit = Start(type, dict(slots or {}), goal, dict(context or {}), task_id, session_id)
        transcript, _ = self._transcript(scope, session_id, messages, task_id)
        return self.apply(scope, edit, transcript=transcript, run=run).state

    def fill(
        self,
        scope: Scope,
        task_id: str,
        slots: Mapping[str, JSON],
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
    ) -> TaskState:
        """Set slot values (latest wins; the journal keeps the old ones) and go on.

        A changed value sends the task back to its first stage, so it is confirmed again,
        and read-only actions that already ran (a look-up) run again on the new values.
        Once a side effect has been recorded the slots are locked.
        """
        inputs.check(
            scope,
            max_text=self.max_text,
            task_id=task_id,
            slots=slots,
            session_id=session_id,
            messages=messages,
            run=run,
        )
        transcript, known = self._transcript(scope, session_id, messages, task_id)
        return self.apply(
            scope, Fill(task_id, slots), known=known, transcript=transcript, run=run
        ).state

    def confirm(
        self,
        scope: Scope,
        task_id: str,
        yes: bool = True,
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
        run: bool = True,
        seen: int | None = None,
    ) -> TaskState:
        """Record the user's yes (go on) or no (back to collecting) on the collected slots.
        ``seen``: the task version whose summary the user answered; a yes to an older one is
        refused with ConfirmationChanged (a change made meanwhile is never confirmed unseen)."""
        inputs.check(
            scope,
            task_id=task_id,
            yes=yes,
            session_id=session_id,
            messages=messages,
            run=run,
            seen=seen,
            max_text=self.max_text,
        )
        transcript, known = self._transcript(scope, session_id, messages, task_id)
        return self.apply(
            scope, Confirm(task_id, yes, seen), known=known, transcript=transcript, run=run
        ).state

    def cancel(
        self,
        scope: Scope,
        task_id: str,
        *,
        session_id: str | None = None,
        messages: Sequence[MessageLike] = (),
    ) -> TaskState:
        """Cancel an open task, unless an action is in flight or a side effect already landed."""
        inputs.check(
            scope, task_id=task_id, session_id=session_id, messages=messages, max_text=self.max_text
        )
        transcript, known = self._transcript(scope, session_id, messages, task_id)
        return self.apply(scope, Cancel(task_id), known=known, transcript=transcript).state

    def resolve(
        self, scope: Scope, task_id: str, seq: int, *, succeeded: bool, output: JSON = None
    ) -> TaskState:
        """An operator settles an action that needs attention: it did or did not take effect."""
        inputs.check(
            scope,
            task_id=task_id,
            seq=seq,
            succeeded=succeeded,
            output=output,
            max_text=self.max_text,
        )
        checked(scope).require_admin("resolving an action")
        return self.apply(scope, Resolve(task_id, seq, succeeded, output)).state

    def rerun(self, scope: Scope, task_id: str, seq: int) -> TaskState:
        """An operator runs an action again once the error in its own code is fixed (one
        with a side effect is reconciled with the downstream first, through its check)."""
        inputs.check(scope, task_id=task_id, seq=seq, max_text=self.max_text)
        checked(scope).require_admin("rerunning an action")
        return self.apply(scope, Rerun(task_id, seq)).state

    def unpin(self, scope: Scope, task_id: str, *, reason: str) -> TaskState:
        """An operator lets any build continue a pinned task whose build is gone for good
        (journaled with ``reason``); this build then lifts it as it would an ``auto`` one."""
        inputs.check(scope, task_id=task_id, text=reason, max_text=self.max_text)
        scope = checked(scope)
        scope.require_admin("unpinning a task")
        return self._writer.unpin(task_id, scope, by=scope.actor, why=reason)

    def advance(self, scope: Scope, task_id: str) -> TaskState:
        """Run what the machine says until the task waits for someone or something."""
        inputs.check(scope, task_id=task_id)
        return self.apply(scope, Resume(task_id)).state

    def resume(self, scope: Scope, task_id: str, *, run: bool = True) -> Resumption:
        """Pick a task up where it stopped: reconcile and run what is due, then say what's next."""
        inputs.check(scope, task_id=task_id, run=run)
        if not run:
            state = self.task(scope, task_id)
            return Resumption(state, self.next_step(state))
        done = self.apply(scope, Resume(task_id))
        return Resumption(done.state, done.step)

    def apply(
        self,
        scope: Scope,
        edit: Start | TaskEdit,
        *,
        known: TaskState | None = None,
        transcript: Transcript | None = None,
        run: bool = True,
    ) -> Resumption:
        """Commit one edit (with what its turn said) and run the actions it makes due.

        ``known`` is the task as the caller just read it (saves a read). Errors of the edit
        itself (InvalidSlot, TaskLocked, NotFound) leave everything as it was.
        """
        check_edit(scope, edit, max_text=self.max_text)
        scope = checked(scope)
        if isinstance(edit, Start):
            done = self._start(scope, edit, transcript, run)
        else:
            done = self._driver.drive(
                edit.task_id,
                scope,
                change_for(edit, self._writer.template, scope.actor, operator=scope.is_admin),
                actor=scope.actor,
                reason=reason_for(edit),
                known=known,
                run=run,
                transcript=transcript,
            )
        if transcript is not None:
            session, said = transcript.rest(done.state, done.step)
            self.stores.write_session(session, said, remember=transcript.remember)
        return Resumption(done.state, done.step)

    def _start(
        self, scope: Scope, edit: Start, transcript: Transcript | None, run: bool
    ) -> Written:
        user = checked(scope).owner("a task")
        template = self.versions.for_new(edit.type)
        if template is None:
            known = ", ".join(sorted(self.templates)) or "none"
            raise TemplateError(f"unknown task type {edit.type!r} (known: {known})")
        task = Task(
            id=edit.task_id or uuid.uuid4().hex,
            type=edit.type,
            user_id=user,
            stage=template.stages[0].name,
            origin_session_id=edit.session_id,
            goal=edit.goal if edit.goal is not None else template.goal,
            context=dict(edit.context),
            template_version=template.version,
            created_by_build=self.build,
            pinned=template.upgrade == "pinned",
        )
        state = TaskState(task)
        state.task.slots = validated(template, edit.slots)
        state.task.stage = first_stage(template, state)
        return self._driver.drive(
            task.id,
            scope,
            None,
            actor=scope.actor,
            reason=reason_for(edit),
            new=state,
            run=run,
            transcript=transcript,
        )

    def _transcript(
        self,
        scope: Scope,
        session_id: str | None,
        messages: Sequence[MessageLike],
        task_id: str,
    ) -> tuple[Transcript | None, TaskState | None]:
        """The session (listing the task) and messages a direct call commits with its change,
        and the task as that same read found it (so the change need not read it again)."""
        if session_id is None:
            if messages:
                raise ValueError("messages need a session_id")
            return None, None
        now = self.clock()
        stored, states = self.stores.read_turn(session_id, checked(scope))
        session = live_or_new(stored, session_id, scope.owner("a session"), now)
        as_read = session.to_dict() if session is stored else None
        if task_id not in session.active_task_ids:
            session.active_task_ids = [*session.active_task_ids, task_id][-MAX_SESSION_TASKS:]
        write = needs_write(session, as_read, now)
        if write:
            session.touch(now)
        said = [
            m if isinstance(m, Message) else Message(session.id, session.user_id, *m, task_id, now)
            for m in messages
        ]
        known = next((st for st in states if st.task.id == task_id), None)
        return Transcript(session=session if write else None, said=said), known

    def action(self, scope: Scope, action_id: str) -> Action:
        """An action by its id, if its task is in scope."""
        inputs.check(scope, task_id=action_id)
        found = self.stores.tasks.get_action(action_id, checked(scope))
        if found is None:
            raise NotFound(f"no action {action_id}")
        return found

    # -- API keys (the HTTP server's callers) ------------------------------------------------
    def add_api_key(self, scope: Scope, key: ApiKey) -> None:
        """Store a new API key; an operator's act (admin scope)."""
        inputs.check(scope, task_id=key.id, type=key.user_id, goal=key.name)
        checked(scope).require_admin("creating API keys")
        self._identities().add_key(key)

    def api_key(self, key_id: str) -> ApiKey | None:
        """A key by id (revoked or not), to check a caller's key: before any scope exists."""
        return self._identities().get_key(key_id)

    def api_keys(self, scope: Scope, user_id: str | None = None) -> list[ApiKey]:
        """Every key (of one user), oldest first; admin scope."""
        checked(scope).require_admin("listing API keys")
        return self._identities().list_keys(user_id)

    def revoke_api_keys(
        self, scope: Scope, *, user_id: str | None = None, key_id: str | None = None
    ) -> int:
        """Revoke one key or every key of a user; NotFound when nothing active was."""
        checked(scope).require_admin("revoking API keys")
        count = self._identities().revoke_keys(at=self.clock(), user_id=user_id, key_id=key_id)
        if not count:
            raise NotFound(f"no active API key for {'key ' + key_id if key_id else user_id}")
        return count

    def _identities(self) -> Identities:
        if self.stores.identities is None:
            raise StoreURLError(f"the store {self.stores.url} keeps no API keys")
        return self.stores.identities

    def task(self, scope: Scope, task_id: str) -> TaskState:
        """A task and its actions, if it is in scope, lifted to this build's version of its
        type (the lift committed) unless its migration fails: then as stored. A task another
        definition of its version made is shown as stored too (reading it is always safe)."""
        inputs.check(scope, task_id=task_id)
        stored = self._writer.load(task_id, checked(scope))
        try:
            return self._writer.upgraded(stored, checked(scope))
        except TemplateMismatch:
            return stored  # nothing was written
        except MigrationFailed:
            return self._writer.load(task_id, checked(scope))  # as stored, marked with why

    def task_id(self, scope: Scope, id_or_prefix: str) -> str:
        """The full id of the Task that ``id_or_prefix`` names: its id, or the start of it
        (at least :data:`MIN_PREFIX` characters; the CLI and the dashboard show 8) when one
        Task in scope starts so. NotFound when none does; InvalidInput when several do."""
        inputs.check(scope, task_id=id_or_prefix)
        scope = checked(scope)
        found = self.stores.tasks.task_ids_starting(id_or_prefix, scope, limit=MAX_SHOWN + 1)
        if id_or_prefix in found:
            return id_or_prefix
        if not found:
            raise NotFound(f"no task {id_or_prefix}")
        if len(id_or_prefix) < MIN_PREFIX:
            raise NotFound(f"no task {id_or_prefix} (a prefix takes {MIN_PREFIX} characters)")
        if len(found) > 1:
            shown = ", ".join(found[:MAX_SHOWN]) + (", ..." if len(found) > MAX_SHOWN else "")
            raise InvalidInput(
                "task_id", f"{id_or_prefix!r} starts several tasks ({shown}): give more of it"
            )
        return found[0]

    def task_counts(self, scope: Scope) -> dict[TaskStatus, int]:
        """How many of the scope's tasks are in each status (every user's for admin)."""
        inputs.check(scope)
        return self.stores.tasks.count_tasks(checked(scope))

    def tasks(
        self,
        scope: Scope,
        *,
        statuses: Sequence[TaskStatus] | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """The scope's tasks (every user's for admin), most recently updated first."""
        inputs.check(scope, statuses=statuses, limit=limit)
        return self.stores.tasks.list_tasks(checked(scope), statuses=statuses, limit=limit)

    def open_tasks(self, scope: Scope, *, limit: int = 100) -> list[Task]:
        """A user's unfinished tasks, from any session or device, most recent first."""
        inputs.check(scope, limit=limit)
        return self.tasks(scope, statuses=OPEN_TASK_STATUSES, limit=limit)

    def recover(
        self,
        scope: Scope,
        *,
        limit: int | None = None,
        page: int = 1000,
        on_task: Callable[[str, str], None] | None = None,
    ) -> RecoveryReport:
        """Reconcile actions whose lease expired and continue interrupted tasks: all of them,
        or at most ``limit`` tasks. Run at start-up (admin scope)."""
        inputs.check(scope, limit=limit, page=page)
        scope = checked(scope)
        return recovery.recover(
            self.stores,
            scope,
            lambda task_id: self.advance(scope, task_id),
            owner=self.owner,
            lease=self.lease,
            clock=self.clock,
            limit=limit,
            page=page,
            on_task=on_task,
        )

    # -- rolling upgrades (operators) -----------------------------------------------------
    def migrate(
        self,
        scope: Scope,
        *,
        dry_run: bool = False,
        on_task: Callable[[str, str], None] | None = None,
    ) -> MigrationReport:
        """Lift every stored task that is behind this build's template versions (admin)."""
        inputs.check(scope)
        checked(scope).require_admin("migrating tasks")
        return upgrades.migrate_all(
            self.stores, self._writer, self.versions, dry_run=dry_run, on_task=on_task
        )

    def requeue(self, scope: Scope) -> int:
        """Queue the work of running Tasks that have no queue row (stored by a build from
        before the queue); a worker does this when it starts (admin)."""
        inputs.check(scope)
        checked(scope).require_admin("requeueing work")
        return upgrades.requeue(self.stores, self._writer)

    def builds(self, scope: Scope) -> list[BuildStatus]:
        """Builds in service and the open tasks pinned to each (admin)."""
        inputs.check(scope)
        checked(scope).require_admin("listing builds")
        return upgrades.builds(self.stores, self.clock())

    def workers(self, scope: Scope, *, include_stopped: bool = False) -> list[WorkerStatus]:
        """Registered processes: build, role, heartbeat, work items held (admin)."""
        inputs.check(scope)
        checked(scope).require_admin("listing workers")
        return self.stores.coordination.workers(include_stopped=include_stopped)

    # -- the database schema (operators) ---------------------------------------------------
    def schema_status(self, scope: Scope) -> SchemaStatus | None:
        """The SQL schema's applied and latest versions (None: the store keeps no schema)."""
        inputs.check(scope)
        checked(scope).require_admin("the database schema")
        return None if self.stores.schema is None else self.stores.schema.schema_status()

    def upgrade_schema(self, scope: Scope) -> list[SchemaStep]:
        """Apply pending schema migrations, each in its own transaction; the steps applied."""
        inputs.check(scope)
        checked(scope).require_admin("the database schema")
        return [] if self.stores.schema is None else self.stores.schema.upgrade_schema()

    def durability_warnings(self, scope: Scope) -> list[str]:
        """What in the database's settings could lose turns already acknowledged (a crash,
        a failover to an asynchronous standby): one sentence each, none when it is safe."""
        inputs.check(scope)
        checked(scope).require_admin("the database settings")
        return [] if self.stores.schema is None else self.stores.schema.durability_warnings()

    # -- journal -------------------------------------------------------------------------
    def history(self, scope: Scope, task_id: str) -> tuple[Snapshot | None, list[JournalEntry]]:
        """A task's baseline (if compacted) and the journal entries after it."""
        inputs.check(scope, task_id=task_id)
        self.task(scope, task_id)  # NotFound out of scope
        baseline = self.stores.tasks.baseline(task_id, scope)
        after = baseline.version if baseline else 0
        return baseline, self.stores.tasks.journal(task_id, scope, after_version=after)

    def labels(self, task_type: str | None, language: str = "en") -> Labels:
        """What to call a Task type's slots, stages and statuses in ``language`` (its
        template's words if this build runs that type)."""
        return Labels(language, self.templates.get(task_type or ""))

    def replay(self, scope: Scope, task_id: str, upto: int | datetime | None = None) -> TaskState:
        """The task and its actions as they were at version (or time) ``upto``."""
        upto = inputs.history_point(upto)
        baseline, entries = self.history(scope, task_id)
        return journal.replay(entries, baseline, upto)

    def compact(
        self, scope: Scope, *, now: datetime | None = None, retention: timedelta | None = None
    ) -> int:
        """Fold journal entries older than the retention into baselines; returns entries folded."""
        inputs.check(scope, now=now, retention=retention)
        now = inputs.utc(now)
        checked(scope).require_admin("compaction")
        cutoff = (now or self.clock()) - (retention if retention is not None else self.retention)
        folded = 0
        for task_id in self.stores.tasks.tasks_with_entries_before(cutoff):
            baseline, entries = self.history(scope, task_id)
            old = [e for e in entries if e.at < cutoff]
            if not old:
                continue
            state = journal.replay(entries, baseline, old[-1].version)
            snapshot = Snapshot(task_id, old[-1].version, old[-1].at, state.to_dict())
            folded += self.stores.tasks.compact(snapshot)
        return folded
