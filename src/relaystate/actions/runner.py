"""The action protocol: record, lease, execute, reconcile, retry, compensate.

1. Record and claim: the action row (stable idempotency key) commits as ``running`` under
   our lease, attempts + 1, before any effect. Both happen in one commit, the same one that
   carries the change that made the action due (the user's yes, or the previous action's
   result): record-before-effect holds, and an attempt costs one commit before the effect
   and one after.
2. Execute the function outside any transaction; a timeout or :class:`OutcomeUnknown`
   makes the outcome ``unknown``, never ``failed``.
3. Commit the result: ``success`` with its output, a retry with backoff, or ``failed``.
4. Reconcile an ``unknown`` action (or one whose lease expired) before anything else: ask the
   downstream through ``check``; repeat with the same key only when that is safe; otherwise
   the task needs a person. Never a blind re-run of a side effect.

:meth:`ActionRunner.claim` edits a draft (it runs inside the writer's change, so the claim
is decided on fresh, version-checked state); :meth:`execute` runs outside;
:meth:`ActionRunner.apply` writes the result onto fresh state in the next commit.
"""

from __future__ import annotations

import json
import threading
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from .. import failpoints
from ..model import PROGRAMMING_ERROR, Action, ActionKind, ActionStatus, TaskState
from ..task.machine import first_stage
from ..task.next_step import InProgress, NextStep, Reconcile, RunAction
from ..task.spec import (
    PROGRAMMING_ERRORS,
    ActionContext,
    ActionSpec,
    Completes,
    Outcome,
    OutcomeUnknown,
    PermanentError,
    RejectedInput,
)
from ..task.templates import TaskTemplate
from .idempotency import idempotency_key
from .leases import lease_expired

JSON = Any


@dataclass(frozen=True)
class Claim:
    """Work a commit took for this process: one attempt of an action, or a check of it."""

    seq: int
    name: str
    kind: Literal["attempt", "check"]
    recorded: bool = False
    """The same commit recorded the action (it did not exist before)."""

    def describe(self, state: TaskState) -> str:
        action = state.action(self.seq)
        if self.kind == "check":
            return f"reconciling {action.name}: {action.error}"
        verb = "recorded and started" if self.recorded else "started"
        return f"{verb} {action.name} (attempt {action.attempts})"


@dataclass(frozen=True)
class Result:
    """What one attempt or check came to; ``kind`` says how to settle the action."""

    kind: Literal["success", "unknown", "retryable", "permanent", "rejected", "check", "bug"]
    output: JSON = None
    error: str | None = None
    trace: str | None = None
    """For "bug": where the action's own code raised (its last frames), for the journal."""
    outcome: Outcome | None = None
    """For a check: what the downstream said (None: nothing can tell)."""
    rejected: tuple[str, str] | None = None
    """For "rejected": the slot whose value the downstream refused, and why."""
    slots: dict[str, JSON] | None = None
    """For "success" of a read-only action: slot values it completed (:class:`Completes`)."""


class ActionRunner:
    """Takes, runs and settles one action at a time, following the protocol above."""

    def __init__(
        self,
        template_of: Callable[[TaskState], TaskTemplate],
        *,
        owner: str,
        lease: timedelta,
        is_stopped: Callable[[str], bool],
    ) -> None:
        self.template_of = template_of
        self.owner = owner
        self.lease = lease
        self.is_stopped = is_stopped

    @property
    def actor(self) -> str:
        return f"worker:{self.owner}"

    def spec_for(self, state: TaskState, name: str, kind: ActionKind) -> ActionSpec:
        template = self.template_of(state)
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

    # -- 1. claim: inside a commit -------------------------------------------------------
    def claim(self, draft: TaskState, step: NextStep, now: datetime) -> Claim | None:
        """Take the work ``step`` asks for onto ``draft`` (settled, fresh); None if none is
        ours to take (a live lease of another holder, a backoff not yet over)."""
        if isinstance(step, RunAction):
            if step.seq is None:
                return self._record(draft, step, now)
            return self._claim(draft, draft.action(step.seq), now)
        if isinstance(step, Reconcile | InProgress):
            return self._take_for_check(draft, draft.action(step.seq), now)
        return None

    def _record(self, draft: TaskState, step: RunAction, now: datetime) -> Claim:
        failpoints.hit("before_record", step.name)
        spec = self.spec_for(draft, step.name, step.kind)
        seq = draft.next_seq()
        if step.compensates is not None:
            original = draft.action(step.compensates)
            data = dict(original.input)
            key = f"{original.idempotency_key}:compensate"
        else:
            data = spec.input_for(draft.task, _outputs(draft))
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
                status=ActionStatus.RUNNING,
                input=_plain(data),
                attempts=1,
                compensates=step.compensates,
                lease_owner=self.owner,
                lease_expires_at=self._lease_for(spec, now),
                created_at=now,
            )
        )
        return Claim(seq, step.name, "attempt", recorded=True)

    def _claim(self, draft: TaskState, action: Action, now: datetime) -> Claim | None:
        """pending -> running under our lease, one more attempt; never over a live lease."""
        if action.status != ActionStatus.PENDING:
            return None
        if action.lease_owner not in (None, self.owner) and not self.expired(action, now):
            return None
        if action.next_attempt_at is not None and action.next_attempt_at > now:
            return None
        spec = self.spec_for(draft, action.name, action.kind)
        if not spec.side_effect and action.kind == ActionKind.STEP:
            fresh = spec.input_for(draft.task, _outputs(draft))  # reads the current slots
            action.input = _plain(fresh)
        action.status = ActionStatus.RUNNING
        action.attempts += 1
        action.lease_owner = self.owner
        action.lease_expires_at = self._lease_for(spec, now)
        action.next_attempt_at = None
        return Claim(action.seq, action.name, "attempt")

    def _take_for_check(self, draft: TaskState, action: Action, now: datetime) -> Claim | None:
        """An expired running action becomes unknown; we hold it while we ask downstream."""
        if action.status not in (ActionStatus.RUNNING, ActionStatus.UNKNOWN):
            return None
        if action.lease_owner is not None and not self.expired(action, now):
            return None
        if action.status == ActionStatus.RUNNING:
            action.error = f"lease of {action.lease_owner} ended: outcome unknown"
        action.status = ActionStatus.UNKNOWN
        action.lease_owner = self.owner
        action.lease_expires_at = now + self.lease
        return Claim(action.seq, action.name, "check")

    # -- 2. execute: outside any transaction ---------------------------------------------
    def execute(self, state: TaskState, claim: Claim) -> Result:
        """Run the attempt or the check the committed ``state`` holds for us."""
        action = state.action(claim.seq)
        spec = self.spec_for(state, action.name, action.kind)
        ctx = self._context(state, action)
        if claim.kind == "check":
            return _check(spec, ctx)
        failpoints.hit("before_effect", action.name)
        result = _attempt(spec, ctx)
        failpoints.hit("after_effect", action.name)
        return result

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

    # -- 3. apply: inside the next commit ------------------------------------------------
    def apply(self, draft: TaskState, claim: Claim, result: Result, now: datetime) -> bool:
        """Write ``result`` onto fresh state; False if someone else settled it meanwhile."""
        action = draft.action(claim.seq)
        spec = self.spec_for(draft, action.name, action.kind)
        if claim.kind == "check":
            return self._apply_check(draft, action, spec, result, now)
        if action.status not in (ActionStatus.RUNNING, ActionStatus.UNKNOWN):
            return False  # someone else settled it already
        if result.kind != "success" and action.lease_owner != self.owner:
            return False  # our lease was taken over; the new holder decides
        if result.kind == "rejected" and result.rejected is not None:
            if _can_ask_again(draft, self.template_of(draft)):
                _ask_again(draft, self.template_of(draft), *result.rejected)
                return True
            result = Result("permanent", error=result.error)
        _settle_attempt(draft, action, spec, result, now)
        return True

    def _apply_check(
        self,
        draft: TaskState,
        row: Action,
        spec: ActionSpec,
        result: Result,
        now: datetime,
    ) -> bool:
        if row.status != ActionStatus.UNKNOWN or row.lease_owner != self.owner:
            return False
        row.lease_owner = row.lease_expires_at = None
        outcome = result.outcome
        row.error_kind = None
        if result.kind == "bug":  # the check's own code is wrong: a person, not a retry
            row.error, row.error_kind = f"its check raised {result.error}", PROGRAMMING_ERROR
        elif outcome is None:
            pass  # nothing can tell what happened: left unknown, the machine asks a person
        elif outcome.state == "succeeded":
            _settle_attempt(draft, row, spec, Result("success", outcome.output), now)
        elif outcome.state == "pending":
            row.checks += 1
            row.error = outcome.reason or "the downstream has no answer yet"
            row.next_attempt_at = now + spec.retry.delay(row.checks)
        elif outcome.state == "failed":
            _settle_attempt(draft, row, spec, Result("retryable", error=outcome.reason), now)
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


def describe_result(state: TaskState, claim: Claim, result: Result) -> str:
    """The journal's reason for the commit that applied ``result``."""
    action = state.action(claim.seq)
    if result.kind == "bug":
        what = "its check" if claim.kind == "check" else action.name
        return (
            f"{what} raised a programming error, not retried: {result.error}; fix the code, "
            f"then rerun or resolve action {action.seq}\n{result.trace or ''}"
        ).rstrip()
    if claim.kind == "check":
        outcome = result.outcome
        if outcome is None:
            return f"{action.name}: outcome unknown; it can neither be checked nor safely repeated"
        return f"reconciled {action.name}: {outcome.state}" + (
            f" ({outcome.reason})" if outcome.reason else ""
        )
    if state.task.context.get(REJECTED, {}).get("slot") and action.status == ActionStatus.PENDING:
        rejected = state.task.context[REJECTED]
        return f"{action.name} refused {rejected['slot']}: {rejected['reason']}; asking again"
    if action.status == ActionStatus.SUCCESS:
        return f"{action.name} succeeded"
    if action.status == ActionStatus.PENDING:
        return f"{action.name} failed ({action.error}); retry scheduled"
    return f"{action.name} is {action.status}: {action.error}"


def _check(spec: ActionSpec, ctx: ActionContext) -> Result:
    outcome: Outcome | None
    if spec.check_fn is not None:
        try:
            outcome = spec.check_fn(ctx)
        except Exception as exc:
            if _is_bug(exc, spec):
                return Result("bug", error=_describe(exc), trace=_trace(exc))
            outcome = Outcome.pending(f"check failed: {_describe(exc)}")
        if not isinstance(outcome, Outcome):
            problem = f"check of {ctx.name} returned {outcome!r}, not an Outcome"
            return Result("bug", error=problem)
    elif spec.safe_to_repeat:
        outcome = Outcome.not_found("safe to repeat with the same key")
    else:
        outcome = None
    return Result("check", outcome=outcome)


def _attempt(spec: ActionSpec, ctx: ActionContext) -> Result:
    try:
        output = _call_with_timeout(spec.fn, ctx, spec.timeout, spec.name)
    except RejectedInput as exc:
        if spec.side_effect:  # a side effect is asked again only through its own slots' change
            return Result("permanent", error=_describe(exc))
        return Result("rejected", error=_describe(exc), rejected=(exc.slot, exc.reason))
    except PermanentError as exc:
        return Result("permanent", error=_describe(exc))
    except (TimeoutError, OutcomeUnknown) as exc:
        return Result("unknown", error=_describe(exc))
    except Exception as exc:
        if _is_bug(exc, spec):
            return Result("bug", error=_describe(exc), trace=_trace(exc))
        if spec.safe_to_repeat:
            return Result("retryable", error=_describe(exc))
        # A side effect that raised may still have happened: ask before any retry.
        return Result("unknown", error=_describe(exc))
    completed = None
    if isinstance(output, Completes):
        if not spec.side_effect:
            completed = _plain(dict(output.slots))
        output = output.output
    return Result("success", output=_plain(output), slots=completed)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON every backend stores: what is not JSON as text, and a NaN or
    an infinity (which an executor may return, and JSON has no word for) as null."""
    return json.loads(json.dumps(value, default=str), parse_constant=lambda _name: None)


REJECTED = "rejected"
"""Key in ``task.context`` of the value the downstream refused, until the user gives another."""


def _can_ask_again(state: TaskState, template: TaskTemplate) -> bool:
    """Only while nothing with a side effect is recorded (it may have happened)."""
    return not any(
        a.kind == ActionKind.STEP and template.spec(a.name).side_effect for a in state.actions
    )


def _ask_again(state: TaskState, template: TaskTemplate, slot: str, reason: str) -> None:
    """The refused slot is cleared and the task goes back to asking for it; the read-only
    actions run again on the next value. The reason stays for the reply (and the journal)."""
    task = state.task
    value = task.slots.pop(slot, None)
    task.confirmed = False
    task.stage = first_stage(template, state)
    problem = {
        "slot": slot,
        "value": value,
        "reason": str(reason),
        "code": getattr(reason, "code", "custom"),
        "options": list(getattr(reason, "options", ())),
    }
    task.context[REJECTED] = problem
    for action in state.actions:
        action.status, action.output, action.error = ActionStatus.PENDING, None, None
        action.attempts = action.checks = 0
        action.next_attempt_at = action.lease_owner = action.lease_expires_at = None


def _settle_attempt(
    state: TaskState, action: Action, spec: ActionSpec, result: Result, now: datetime
) -> None:
    """Write the result of one attempt onto the action (and its compensated original)."""
    action.lease_owner = None
    action.lease_expires_at = None
    action.next_attempt_at = None
    action.error = result.error
    action.error_kind = None
    if result.kind == "bug":
        # an effect may have landed before the code failed: unknown, then, not failed
        action.status = ActionStatus.UNKNOWN if spec.side_effect else ActionStatus.FAILED
        action.error_kind = PROGRAMMING_ERROR
    elif result.kind == "success":
        action.status = ActionStatus.SUCCESS
        action.output = result.output
        if result.slots:
            state.task.slots.update(result.slots)
        if action.compensates is not None:
            state.action(action.compensates).status = ActionStatus.COMPENSATED
    elif result.kind == "unknown":
        action.status = ActionStatus.UNKNOWN
    elif result.kind == "retryable" and spec.retry.can_retry(action.attempts):
        action.status = ActionStatus.PENDING
        action.next_attempt_at = now + spec.retry.delay(action.attempts)
    else:
        action.status = ActionStatus.FAILED


def _outputs(state: TaskState) -> dict[str, JSON]:
    return {
        a.name: a.output
        for a in state.actions
        if a.kind == ActionKind.STEP and a.status == ActionStatus.SUCCESS
    }


def _is_bug(exc: Exception, spec: ActionSpec) -> bool:
    """Whether ``exc`` says the action's own code is wrong (and its retry policy does not
    say to retry it anyway)."""
    return isinstance(exc, PROGRAMMING_ERRORS) and not isinstance(exc, spec.retry.retry_on)


def _trace(exc: BaseException, frames: int = 6, limit: int = 4000) -> str:
    """The last ``frames`` frames of where ``exc`` was raised, at most ``limit`` characters."""
    text = "".join(traceback.format_exception(exc, limit=-frames))
    return text if len(text) <= limit else "...\n" + text[-limit:]


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
