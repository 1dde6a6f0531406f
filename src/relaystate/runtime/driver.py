"""Drive a task: commit a change, then run what the machine says is due, until it waits.

Each commit carries one change (the user's edit, or the result of the last attempt) and,
when the settled state makes an action due, the claim of that action: so a turn that runs
no action is one commit, and each action adds exactly the commit that records its result.
The turn's session and the user's words go with the first commit; the reply, built from
the state the last commit leaves, goes with that last commit (:class:`Transcript`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from .. import failpoints
from ..actions.runner import ActionRunner, Claim, describe_result
from ..model import Message, Session, TaskState
from ..scope import Scope
from ..store.turn_memory import Remember
from ..task.machine import settle
from ..task.next_step import NextStep, WaitRetry
from .writer import Attached, Change, TaskWriter, Written

MAX_STEPS = 200
"""Commits one drive may make before it stops (a guard, far above any template's needs)."""

Reply = Callable[[TaskState, NextStep], list[Message]]


@dataclass
class Transcript:
    """What a turn says, committed with the task changes it describes (invariant 2)."""

    session: Session | None = None
    said: list[Message] = field(default_factory=list)
    reply: Reply | None = None
    shown: Callable[[], Session | None] | None = None
    """Asked once the reply is phrased: the session, if phrasing it changed the session (it
    records which version of a summary this session was shown), to write with the reply."""
    remember: Remember | None = None
    """Memory keeps the turn in each of its commits (its words, its reply, the task's
    slots)."""
    _opened: bool = False
    _closed: bool = False

    def attach(self, state: TaskState, step: NextStep, final: bool) -> Attached:
        session = None if self._opened else self.session
        messages = [] if self._opened else list(self.said)
        if final and self.reply is not None and not self._closed:
            messages += self.reply(state, step)
            session = self._after_reply(session)
        return Attached(session, messages, self.remember)

    def _after_reply(self, session: Session | None) -> Session | None:
        late = self.shown() if self.shown is not None else None
        return late if late is not None else session

    def landed(self, final: bool) -> None:
        self._opened = True
        self._closed = self._closed or final

    def rest(
        self, state: TaskState | None, step: NextStep | None
    ) -> tuple[Session | None, list[Message]]:
        """What no commit carried (the last commit changed nothing): written on its own."""
        session = None if self._opened else self.session
        messages = [] if self._opened else list(self.said)
        if self.reply is not None and not self._closed and state is not None and step is not None:
            messages += self.reply(state, step)
            session = self._after_reply(session)
        return session, messages


class Driver:
    def __init__(
        self,
        writer: TaskWriter,
        actions: ActionRunner,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        max_inline_wait: float,
        on_claim: Callable[[], None],
        runs_here: Callable[[TaskState], bool] = lambda state: True,
    ) -> None:
        self.writer = writer
        self.actions = actions
        self.clock = clock
        self.sleep = sleep
        self.max_inline_wait = max_inline_wait
        self.on_claim = on_claim
        self.runs_here = runs_here

    def drive(
        self,
        task_id: str,
        scope: Scope,
        edit: Change | None,
        *,
        actor: str,
        reason: str,
        known: TaskState | None = None,
        new: TaskState | None = None,
        run: bool = True,
        transcript: Transcript | None = None,
    ) -> Written:
        """Apply ``edit`` (None: no change) to the task, or create ``new``, and then, if
        ``run``, take every action that comes due inline."""
        commit = _Commit(self, task_id, scope, run, transcript)
        change: Change | None = edit
        by: str = actor if edit is not None or new is not None else self.actions.actor
        why: str | Callable[[TaskState], str] = reason
        state, written = known, False
        last: Claim | None = None
        for _ in range(MAX_STEPS):
            done, claim = commit.once(change, by, why, state, new)
            new = None
            state, written = done.state, written or done.written
            if last is not None:
                failpoints.hit("after_commit", last.name)
                last = None
            if claim is None:
                wait = self._inline_wait(done.step) if run and self.runs_here(state) else None
                if wait is None:
                    return Written(state, done.step, written)
                self.sleep(wait)
                change, by, why = None, self.actions.actor, "retry due"
                continue
            last = claim
            self.on_claim()
            if claim.recorded:
                failpoints.hit("after_record", claim.name)
            change, by, why = self._result_of(state, claim)
        assert state is not None
        return Written(state, self.writer.next_step(state), written)

    def _result_of(
        self, state: TaskState, claim: Claim
    ) -> tuple[Change, str, Callable[[TaskState], str]]:
        """Run the claimed attempt or check (outside any transaction); the change that
        writes its result, who makes it, and why."""
        result = self.actions.execute(state, claim)

        def change(draft: TaskState) -> bool:
            return self.actions.apply(draft, claim, result, self.clock())

        return change, self.actions.actor, lambda draft: describe_result(draft, claim, result)

    def _inline_wait(self, step: NextStep) -> float | None:
        """Seconds to sleep before the next attempt, if the wait is short enough to stay."""
        if not isinstance(step, WaitRetry):
            return None
        wait = (step.at - self.clock()).total_seconds()
        return max(wait, 0.0) if wait <= self.max_inline_wait else None

    def _final(self, claim: Claim | None, step: NextStep, run: bool) -> bool:
        """Whether this commit is the drive's last: nothing claimed, nothing to wait for."""
        return claim is None and not (run and self._inline_wait(step) is not None)


class _Commit:
    """One commit of a drive: the change, then the claim of whatever it makes due."""

    def __init__(
        self, driver: Driver, task_id: str, scope: Scope, run: bool, transcript: Transcript | None
    ) -> None:
        self.driver, self.task_id, self.scope = driver, task_id, scope
        self.run, self.transcript = run, transcript
        self.claim: Claim | None = None
        self.final = True

    def once(
        self,
        change: Change | None,
        by: str,
        why: str | Callable[[TaskState], str],
        known: TaskState | None,
        new: TaskState | None,
    ) -> tuple[Written, Claim | None]:
        writer = self.driver.writer

        def apply(draft: TaskState) -> bool | None:
            self.claim = None
            outcome = change(draft) if change is not None else None
            if outcome is False or not self.run or not self.driver.runs_here(draft):
                return outcome
            now = self.driver.clock()
            step = settle(writer.template(draft), draft, now)
            self.claim = self.driver.actions.claim(draft, step, now)
            return True if self.claim is not None else outcome

        def attach(draft: TaskState, step: NextStep) -> Attached:
            self.final = self.driver._final(
                self.claim, step, self.run and self.driver.runs_here(draft)
            )
            if self.transcript is None:
                return Attached()
            return self.transcript.attach(draft, step, final=self.final)

        def describe(draft: TaskState) -> str:
            text = why(draft) if callable(why) else why
            if self.claim is None:
                return text
            taken = self.claim.describe(draft)
            return taken if change is None else f"{text}; {taken}"

        if new is not None:
            done = writer.create(new, apply, actor=by, reason=describe, attach=attach)
        else:
            done = writer.mutate(
                self.task_id,
                self.scope,
                apply,
                actor=by,
                reason=describe,
                known=known,
                attach=attach,
            )
        if done.written and self.transcript is not None:
            self.transcript.landed(final=self.final)
        return done, self.claim if done.written else None
