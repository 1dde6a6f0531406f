"""One conversational turn through the runtime: read once, decide, commit once.

``runtime.begin_turn(scope, session_id, text)`` reads the session and the open tasks it
lists in one read. The caller (the conversation engine, under the CLI and the HTTP API)
routes on that, may load a named task or the user's other open tasks, edits the session's
own state (language, a pending pick), and calls :meth:`PendingTurn.commit` with at most one
task edit and a function that phrases the reply from the state the turn leaves. The edit,
the claim of any action it makes due, the user's words, the session and the reply are one
write transaction when no action runs; each action that runs adds only the commit of its
result, and the reply rides on the last one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

from ..errors import ConfirmationChanged, InvalidSlot, RelaystateError, TaskLocked
from ..model import Action, Message, Session, Task, TaskState
from ..scope import Scope
from ..store.bundle import Stores
from ..store.turn_memory import Remember
from ..task.edits import Edit, Start
from ..task.next_step import AskConfirmation, NextStep
from ..task.templates import TaskTemplate
from .driver import Transcript
from .sessions import MAX_SESSION_TASKS, live_or_new, needs_write


class Applied(Protocol):
    """What an applied edit left: the task's state and its next step."""

    @property
    def state(self) -> TaskState: ...

    @property
    def step(self) -> NextStep: ...


class TurnHost(Protocol):
    """What a pending turn needs of the runtime that began it (a
    :class:`~relaystate.runtime.runtime.Runtime`): its store roles and clock, the tasks in
    scope as this build runs them, its templates, and its one way to commit an edit. Named
    here so that a turn depends on these and not on the whole front door."""

    @property
    def stores(self) -> Stores: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def templates(self) -> Mapping[str, TaskTemplate]: ...

    def task(self, scope: Scope, task_id: str) -> TaskState: ...

    def open_tasks(self, scope: Scope, *, limit: int = ...) -> list[Task]: ...

    def upgraded(self, scope: Scope, states: Iterable[TaskState]) -> list[TaskState]: ...

    def template_of(self, state: TaskState) -> TaskTemplate: ...

    def next_step(self, state: TaskState) -> NextStep: ...

    def apply(
        self,
        scope: Scope,
        edit: Edit,
        *,
        known: TaskState | None = ...,
        transcript: Transcript | None = ...,
        run: bool = ...,
    ) -> Applied: ...


@dataclass(frozen=True)
class ReplyContext:
    """What a reply is phrased from: the task as the turn left it, its next step, and the
    error that stopped the edit (an invalid value, a locked task), if any."""

    state: TaskState | None
    step: NextStep | None
    error: RelaystateError | None = None


Phrase = Callable[[ReplyContext], str]


@dataclass
class TurnResult:
    """What one committed turn did."""

    session: Session
    reply: str
    state: TaskState | None = None
    step: NextStep | None = None
    error: RelaystateError | None = None
    actions: list[Action] = field(default_factory=list)
    """Actions this turn created or changed."""
    messages: list[Message] = field(default_factory=list)
    """The user's words and the reply, as committed (numbered)."""


class PendingTurn:
    """A turn read but not yet committed; everything the engine routes on."""

    def __init__(
        self,
        runtime: TurnHost,
        scope: Scope,
        session: Session,
        fresh: bool,
        open_here: list[TaskState],
        text: str,
    ) -> None:
        self.runtime = runtime
        self.scope = scope
        self.session = session
        self.text = text
        self.open_here = sorted(open_here, key=lambda s: s.task.updated_at, reverse=True)
        """The session's open tasks, most recently changed first."""
        self._fresh = fresh
        self.request_key: str | None = None
        """The client's key for this request: stored with the user's words, in the commit."""
        self.memory: Remember | None = None
        """Keep the turn in memory (its words, its reply, the task's slots), in its commit."""
        self.stored_language: str | None = None
        """The language the session was last in (None for a new session)."""
        self._as_read = session.to_dict()
        self._loaded: dict[str, TaskState] = {s.task.id: s for s in open_here}

    @classmethod
    def read(
        cls,
        runtime: TurnHost,
        scope: Scope,
        session_id: str | None,
        text: str,
        language: str | None,
    ) -> PendingTurn:
        user = scope.owner("a turn")
        stored: Session | None = None
        states: list[TaskState] = []
        if session_id is not None:
            stored, states = runtime.stores.read_turn(session_id, scope)
            states = runtime.upgraded(scope, states)
        session = live_or_new(stored, session_id, user, runtime.clock())
        fresh = session is not stored
        if fresh:
            states = []  # an expired session's tasks are found by user id, not from here
        turn = cls(runtime, scope, session, fresh, states, text)
        turn.stored_language = stored.language if stored is not None else None
        if language:
            session.language = language
        return turn

    # -- what the engine may look at ---------------------------------------------------
    def task(self, task_id: str) -> TaskState:
        """A task by id, in scope (read once per turn)."""
        if task_id not in self._loaded:
            self._loaded[task_id] = self.runtime.task(self.scope, task_id)
        return self._loaded[task_id]

    def open_tasks(self, limit: int = 9) -> list[TaskState]:
        """The user's open tasks from any session or device, most recent first."""
        found = self.runtime.open_tasks(self.scope, limit=limit)
        missing = [t.id for t in found if t.id not in self._loaded]
        loaded = self.runtime.stores.tasks.load_many(missing, self.scope)
        for state in self.runtime.upgraded(self.scope, loaded):
            self._loaded[state.task.id] = state
        return [self._loaded[t.id] for t in found if t.id in self._loaded]

    def template_of(self, state: TaskState) -> TaskTemplate:
        return self.runtime.template_of(state)

    def next_step(self, state: TaskState) -> NextStep:
        return self.runtime.next_step(state)

    @property
    def templates(self) -> list[TaskTemplate]:
        return list(self.runtime.templates.values())

    def remember(self, task_id: str) -> None:
        """List the task in this session (so "continue" here finds it first)."""
        ids = self.session.active_task_ids
        if task_id not in ids:
            self.session.active_task_ids = [*ids, task_id][-MAX_SESSION_TASKS:]

    # -- committing ----------------------------------------------------------------------
    def commit(self, edit: Edit | None, phrase: Phrase) -> TurnResult:
        """Apply ``edit`` (None: the turn changes no task), then commit the session, the
        user's words and the reply phrased from the resulting state, in one transaction
        where no action runs."""
        rt, now = self.runtime, self.runtime.clock()
        if isinstance(edit, Start) and edit.task_id is None:
            edit = replace(edit, task_id=uuid.uuid4().hex)
        task_id = edit.task_id if edit is not None else None
        if task_id is not None:
            self.remember(task_id)
        user = self.session.user_id
        said = Message(
            self.session.id, user, "user", self.text, task_id, now, request_key=self.request_key
        )
        replies: list[Message] = []
        noted: list[bool] = [False]

        def reply(ctx: ReplyContext) -> list[Message]:
            text = phrase(ctx)
            replies[:] = [Message(self.session.id, user, "assistant", text, task_id, rt.clock())]
            noted[0] = self._note_shown(ctx)
            return list(replies)

        def shown() -> Session | None:
            return self._touched() if noted[0] else None

        if edit is None:
            words = [said, *reply(ReplyContext(None, None))]
            rt.stores.write_session(self._session_to_write(), words, remember=self.memory)
            return self._result(ReplyContext(None, None), said, replies, {})
        before = self._loaded.get(task_id) if task_id is not None else None
        known = {str(a.seq): a.to_dict() for a in before.actions} if before else {}
        transcript = Transcript(
            session=self._session_to_write(),
            said=[said],
            reply=lambda s, step: reply(ReplyContext(s, step)),
            shown=shown,
            remember=self.memory,
        )
        try:
            done = rt.apply(self.scope, edit, known=before, transcript=transcript)
        except (InvalidSlot, TaskLocked, ConfirmationChanged) as exc:
            step = rt.next_step(before) if before is not None else None
            ctx = ReplyContext(before, step, exc)
            words = [said, *reply(ctx)]
            rt.stores.write_session(self._session_to_write(), words, remember=self.memory)
            return self._result(ctx, said, replies, known)
        return self._result(ReplyContext(done.state, done.step), said, replies, known)

    def _note_shown(self, ctx: ReplyContext) -> bool:
        """Remember in the session which version of a task's summary this reply showed (a
        confirmation question), so that a later yes here confirms that one and no other;
        True if the session changed."""
        state = ctx.state
        if state is None:
            return False
        shown = dict(self.seen())
        if isinstance(ctx.step, AskConfirmation):
            shown[state.task.id] = state.task.version
        else:
            shown.pop(state.task.id, None)
        if shown == self.seen():
            return False
        if shown:
            self.session.context["shown"] = shown
        else:
            self.session.context.pop("shown", None)
        return True

    def seen(self) -> dict[str, int]:
        """Task id -> the version of its summary this session was last shown."""
        found = self.session.context.get("shown")
        return {str(k): int(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def _touched(self) -> Session:
        self.session.touch(self.runtime.clock())
        return self.session

    def _session_to_write(self) -> Session | None:
        """The session, touched, if the turn changed it or it was last written a while ago
        (sliding its expiry); else None, sparing the turn a row write."""
        now = self.runtime.clock()
        if not needs_write(self.session, None if self._fresh else self._as_read, now):
            return None
        self.session.touch(now)
        return self.session

    def _result(
        self,
        ctx: ReplyContext,
        said: Message,
        replies: list[Message],
        before: dict[str, dict[str, Any]],
    ) -> TurnResult:
        state = ctx.state
        moved = (
            []
            if state is None
            else [a for a in state.actions if before.get(str(a.seq)) != a.to_dict()]
        )
        return TurnResult(
            session=self.session,
            reply=replies[-1].text if replies else "",
            state=state,
            step=ctx.step,
            error=ctx.error,
            actions=moved,
            messages=[said, *replies[-1:]],
        )
