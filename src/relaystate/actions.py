"""The action protocol: record, lease, execute, reconcile, retry, compensate.

1. Record: the action row (``pending``, stable idempotency key) commits before any effect.
2. Claim: ``running`` with a lease (owner + expiry), attempts + 1, in its own commit.
3. Execute the function; a timeout or :class:`OutcomeUnknown` makes the outcome ``unknown``,
   never ``failed``.
4. Commit the result: ``success`` with its output, a retry with backoff, or ``failed``.
5. Reconcile an ``unknown`` action (or one whose lease expired) before anything else: ask the
   downstream through ``check``; repeat with the same key only when that is safe; otherwise
   the task needs a person. Never a blind re-run of a side effect.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from . import failpoints
from .keys import idempotency_key
from .leases import lease_expired
from .machine import settle
from .model import Action, ActionKind, ActionStatus, TaskState
from .next_step import RunAction
from .spec import ActionContext, ActionSpec, Outcome, OutcomeUnknown, PermanentError
from .writer import TaskWriter

JSON = Any


class _Result:
    """What one execution attempt came to."""

    def __init__(self, kind: str, output: JSON = None, error: str | None = None) -> None:
        self.kind = kind  # "success" | "unknown" | "retryable" | "permanent"
        self.output = output
        self.error = error


class ActionRunner:
    """Runs one action at a time for the runtime, following the protocol above."""

    def __init__(
        self,
        writer: TaskWriter,
        *,
        owner: str,
        lease: timedelta,
        is_stopped: Callable[[str], bool],
    ) -> None:
        self.writer = writer
        self.owner = owner
        self.lease = lease
        self.is_stopped = is_stopped

    @property
    def actor(self) -> str:
        return f"worker:{self.owner}"

    # -- helpers -----------------------------------------------------------------------
    def spec_for(self, state: TaskState, name: str, kind: ActionKind) -> ActionSpec:
        template = self.writer.template(state)
        if kind == ActionKind.COMPENSATION:
            return template.spec(name.removesuffix(".compensate")).compensation()
        return template.spec(name)

    def expired(self, action: Action, now: datetime) -> bool:
        return lease_expired(
            action.lease_owner,
            action.lease_expires_at,
            now,
            me=self.owner,
            is_stopped=self.is_stopped,
        )

    def _lease_for(self, spec: ActionSpec, now: datetime) -> datetime:
        return now + max(self.lease, timedelta(seconds=(spec.timeout or 0) * 2))

    # -- run ---------------------------------------------------------------------------
    def run(self, state: TaskState, step: RunAction) -> bool:
        """Record (if new), claim and execute one action; False if another process has it."""
        spec = self.spec_for(state, step.name, step.kind)
        seq = step.seq
        if seq is None:
            failpoints.hit("before_record", step.name)
            recorded = self._record(state, step, spec)
            failpoints.hit("after_record", step.name)
            if recorded is None:
                return True  # the task moved on meanwhile: look again at what is due now
            seq = recorded
        claimed = self._claim(state.task.id, seq)
        if claimed is None:
            return False
        fresh, action = claimed
        failpoints.hit("before_effect", action.name)
        result = self._execute(spec, self._context(fresh, action))
        failpoints.hit("after_effect", action.name)
        self._finish(fresh.task.id, seq, spec, result)
        failpoints.hit("after_commit", action.name)
        return True

    def _record(self, state: TaskState, step: RunAction, spec: ActionSpec) -> int | None:
        """Record the action as pending; None if, on fresh state, it is no longer due."""
        recorded: list[int] = []

        def change(draft: TaskState) -> bool:
            recorded.clear()  # a retry after a version conflict starts over
            existing = next(
                (
                    a
                    for a in draft.actions
                    if a.stage == step.stage
                    and a.name == step.name
                    and a.kind == step.kind
                    and a.compensates == step.compensates
                ),
                None,
            )
            if existing is not None:  # another process recorded it first
                recorded.append(existing.seq)
                return False
            now = self.writer.clock()
            # ``step`` was computed from state read before this write; if the task changed
            # since (declined, slots changed, cancelled), the action may no longer be due.
            due = settle(self.writer.template(draft), draft.copy(), now)
            if due != RunAction(step.stage, step.name, step.kind, step.compensates):
                return False
            seq = draft.next_seq()
            outputs = _outputs(draft)
            if step.compensates is not None:
                original = draft.action(step.compensates)
                data = dict(original.input)
                key = f"{original.idempotency_key}:compensate"
            else:
                data = spec.input_for(draft.task, outputs)
                key = idempotency_key(draft.task.id, seq, step.name, data)
            draft.actions.append(
                Action(
                    id=uuid.uuid4().hex,
                    task_id=draft.task.id,
                    seq=seq,
                    name=step.name,
                    stage=step.stage,
                    kind=step.kind,
                    idempotency_key=key,
                    input=json.loads(json.dumps(data, default=str)),
                    compensates=step.compensates,
                    lease_owner=self.owner,
                    lease_expires_at=self._lease_for(spec, now),
                    created_at=now,
                )
            )
            recorded.append(seq)
            return True

        self.writer.mutate(
            state.task.id,
            None,
            change,
            actor=self.actor,
            reason=f"recorded {step.name} (pending)",
        )
        return recorded[-1] if recorded else None

    def _take(
        self,
        task_id: str,
        seq: int,
        edit: Callable[[TaskState, Action, datetime], bool],
        reason: Callable[[TaskState], str],
    ) -> tuple[TaskState, Action] | None:
        """Commit ``edit`` on one action if it agrees to; None when someone else holds it."""
        taken: list[bool] = []

        def change(draft: TaskState) -> bool:
            taken.clear()
            if not edit(draft, draft.action(seq), self.writer.clock()):
                return False
            taken.append(True)
            return True

        state, _, _ = self.writer.mutate(task_id, None, change, actor=self.actor, reason=reason)
        return (state, state.action(seq)) if taken else None

    def _claim(self, task_id: str, seq: int) -> tuple[TaskState, Action] | None:
        """pending -> running under our lease, one more attempt; never over a live lease."""

        def edit(draft: TaskState, action: Action, now: datetime) -> bool:
            if action.status != ActionStatus.PENDING:
                return False
            if action.lease_owner not in (None, self.owner) and not self.expired(action, now):
                return False
            if action.next_attempt_at is not None and action.next_attempt_at > now:
                return False
            # Still due on fresh state? The user may have changed course since we read it.
            due = settle(self.writer.template(draft), draft.copy(), now)
            if not (isinstance(due, RunAction) and due.seq == seq):
                return False
            spec = self.spec_for(draft, action.name, action.kind)
            if not spec.side_effect and action.kind == ActionKind.STEP:
                fresh = spec.input_for(draft.task, _outputs(draft))  # reads the current slots
                action.input = json.loads(json.dumps(fresh, default=str))
            action.status = ActionStatus.RUNNING
            action.attempts += 1
            action.lease_owner = self.owner
            action.lease_expires_at = self._lease_for(spec, now)
            action.next_attempt_at = None
            return True

        return self._take(
            task_id,
            seq,
            edit,
            lambda s: f"started {s.action(seq).name} (attempt {s.action(seq).attempts})",
        )

    def _context(self, state: TaskState, action: Action) -> ActionContext:
        original = (
            state.action(action.compensates).output if action.compensates is not None else None
        )
        return ActionContext(
            task_id=state.task.id,
            user_id=state.task.user_id,
            seq=action.seq,
            name=action.name,
            attempt=action.attempts,
            idempotency_key=action.idempotency_key,
            input=action.input,
            slots=dict(state.task.slots),
            outputs=_outputs(state),
            original_output=original,
        )

    def _execute(self, spec: ActionSpec, ctx: ActionContext) -> _Result:
        try:
            output = _call_with_timeout(spec.fn, ctx, spec.timeout, spec.name)
        except PermanentError as exc:
            return _Result("permanent", error=_describe(exc))
        except (TimeoutError, OutcomeUnknown) as exc:
            return _Result("unknown", error=_describe(exc))
        except Exception as exc:
            if spec.safe_to_repeat:
                return _Result("retryable", error=_describe(exc))
            # A side effect that raised may still have happened: ask before any retry.
            return _Result("unknown", error=_describe(exc))
        return _Result("success", output=json.loads(json.dumps(output, default=str)))

    def _finish(self, task_id: str, seq: int, spec: ActionSpec, result: _Result) -> None:
        def change(draft: TaskState) -> bool:
            action = draft.action(seq)
            if action.status not in (ActionStatus.RUNNING, ActionStatus.UNKNOWN):
                return False  # someone else settled it already
            if result.kind != "success" and action.lease_owner != self.owner:
                return False  # our lease was taken over; the new holder decides
            now = self.writer.clock()
            _settle_attempt(draft, action, spec, result, now)
            return True

        self.writer.mutate(
            task_id,
            None,
            change,
            actor=self.actor,
            reason=lambda s: _reason(s.action(seq)),
        )

    # -- reconcile ---------------------------------------------------------------------
    def reconcile(self, state: TaskState, seq: int) -> bool:
        """Find out what happened to an action whose outcome is unknown; False if busy."""
        taken = self._take_for_check(state.task.id, seq)
        if taken is None:
            return False
        fresh, action = taken
        spec = self.spec_for(fresh, action.name, action.kind)
        outcome: Outcome | None
        if spec.check_fn is not None:
            try:
                outcome = spec.check_fn(self._context(fresh, action))
                if not isinstance(outcome, Outcome):
                    raise TypeError(f"check of {action.name} returned {outcome!r}, not Outcome")
            except Exception as exc:
                outcome = Outcome.pending(f"check failed: {_describe(exc)}")
        elif spec.safe_to_repeat:
            outcome = Outcome.not_found("safe to repeat with the same key")
        else:  # nothing can tell what happened: leave it unknown, the machine asks a person
            outcome = None

        def change(draft: TaskState) -> bool:
            row = draft.action(seq)
            if row.status != ActionStatus.UNKNOWN or row.lease_owner != self.owner:
                return False
            now = self.writer.clock()
            row.lease_owner = row.lease_expires_at = None
            if outcome is None:
                pass
            elif outcome.state == "succeeded":
                _settle_attempt(draft, row, spec, _Result("success", outcome.output), now)
            elif outcome.state == "pending":
                row.checks += 1
                row.error = outcome.reason or "the downstream has no answer yet"
                row.next_attempt_at = now + spec.retry.delay(row.checks)
            elif outcome.state == "failed":
                _settle_attempt(draft, row, spec, _Result("retryable", error=outcome.reason), now)
            elif spec.retry.can_retry(row.attempts):  # not_found: it never happened
                row.status = ActionStatus.PENDING
                row.error = outcome.reason or "not found downstream"
                row.next_attempt_at = None
            elif spec.check_fn is not None:
                row.status = ActionStatus.FAILED
                row.error = f"not found downstream after {row.attempts} attempts"
            else:
                row.checks += 1
                row.error = f"outcome unknown after {row.attempts} attempts"
            return True

        self.writer.mutate(
            fresh.task.id,
            None,
            change,
            actor=self.actor,
            reason=(
                f"{action.name}: outcome unknown; it can neither be checked nor safely repeated"
                if outcome is None
                else f"reconciled {action.name}: {outcome.state}"
                + (f" ({outcome.reason})" if outcome.reason else "")
            ),
        )
        return True

    def _take_for_check(self, task_id: str, seq: int) -> tuple[TaskState, Action] | None:
        """An expired running action becomes unknown; we hold it while we ask downstream."""

        def edit(draft: TaskState, action: Action, now: datetime) -> bool:
            if action.status not in (ActionStatus.RUNNING, ActionStatus.UNKNOWN):
                return False
            if action.lease_owner is not None and not self.expired(action, now):
                return False
            if action.status == ActionStatus.RUNNING:
                action.error = f"lease of {action.lease_owner} ended: outcome unknown"
            action.status = ActionStatus.UNKNOWN
            action.lease_owner = self.owner
            action.lease_expires_at = now + self.lease
            return True

        return self._take(
            task_id,
            seq,
            edit,
            lambda s: f"reconciling {s.action(seq).name}: {s.action(seq).error}",
        )


def _settle_attempt(
    state: TaskState, action: Action, spec: ActionSpec, result: _Result, now: datetime
) -> None:
    """Write the result of one attempt onto the action (and its compensated original)."""
    action.lease_owner = None
    action.lease_expires_at = None
    action.next_attempt_at = None
    action.error = result.error
    if result.kind == "success":
        action.status = ActionStatus.SUCCESS
        action.output = result.output
        if action.compensates is not None:
            state.action(action.compensates).status = ActionStatus.COMPENSATED
    elif result.kind == "unknown":
        action.status = ActionStatus.UNKNOWN
    elif result.kind == "retryable" and spec.retry.can_retry(action.attempts):
        action.status = ActionStatus.PENDING
        action.next_attempt_at = now + spec.retry.delay(action.attempts)
    else:
        action.status = ActionStatus.FAILED


def _reason(action: Action) -> str:
    if action.status == ActionStatus.SUCCESS:
        return f"{action.name} succeeded"
    if action.status == ActionStatus.PENDING:
        return f"{action.name} failed ({action.error}); retry scheduled"
    return f"{action.name} is {action.status}: {action.error}"


def _outputs(state: TaskState) -> dict[str, JSON]:
    return {
        a.name: a.output
        for a in state.actions
        if a.kind == ActionKind.STEP and a.status == ActionStatus.SUCCESS
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _call_with_timeout(
    fn: Callable[[ActionContext], JSON], ctx: ActionContext, timeout: float | None, name: str
) -> JSON:
    """Call ``fn``; past ``timeout`` seconds raise TimeoutError (the call may still land)."""
    if timeout is None:
        return fn(ctx)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(ctx)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=f"relaystate-action-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"{name} gave no answer within {timeout:g}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")
