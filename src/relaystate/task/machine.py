"""The deterministic state machine: the next step of a task from its stored state alone.

``settle`` is pure apart from updating the task's derived fields (stage, status, missing
slots, progress, status text). It reads slots, the confirmation flag and recorded actions;
it never reads chat history, so resuming needs no model and gives the same answer in every
process.
"""

from __future__ import annotations

from datetime import datetime

from ..model import (
    PROGRAMMING_ERROR,
    Action,
    ActionKind,
    ActionStatus,
    Progress,
    TaskState,
    TaskStatus,
)
from .next_step import (
    AskConfirmation,
    AskSlot,
    Finished,
    InProgress,
    NeedsAttention,
    NextStep,
    Reconcile,
    RunAction,
    WaitOperator,
    WaitRetry,
    WaitUser,
    status_for,
)
from .spec import ActionSpec
from .templates import TaskTemplate

MAX_CHECKS = 10
"""How many times an unknown outcome is checked (with backoff) before a person is asked."""


def settle(template: TaskTemplate, state: TaskState, now: datetime) -> NextStep:
    """Advance the stage as far as stored state allows, update derived fields, return the step."""
    task = state.task
    task.missing_slots = [
        s.name for s in template.slots if s.required and task.slots.get(s.name) is None
    ]
    step = _next_step(template, state, now)
    if task.status != TaskStatus.CANCELLED:
        task.status = status_for(step)
    task.progress = Progress(
        done=sum(
            1
            for a in state.actions
            if a.kind == ActionKind.STEP and a.status == ActionStatus.SUCCESS
        ),
        total=template.planned_actions,
    )
    task.status_text = describe(template, state, step)
    return step


def first_stage(template: TaskTemplate, state: TaskState) -> str:
    """The stage a new task starts in: the first whose entry condition holds."""
    for stage in template.stages:
        if stage.entry is None or stage.entry.met(state.task):
            return stage.name
    return template.stages[-1].name


def _next_step(template: TaskTemplate, state: TaskState, now: datetime) -> NextStep:
    task = state.task
    if task.status == TaskStatus.CANCELLED:
        return Finished(TaskStatus.CANCELLED)
    steps = [a for a in state.actions if a.kind == ActionKind.STEP]
    broken = next((a for a in state.actions if stopped_by_its_code(a)), None)
    if broken is not None:  # a person fixes the code first: no unwinding, no retry
        return NeedsAttention(
            f"{broken.name} raised an error in its own code ({broken.error}); fix it, then "
            f"rerun or resolve action {broken.seq}",
            broken.seq,
        )
    if any(a.status == ActionStatus.FAILED for a in steps):
        return _unwind(template, state, now)
    idx = template.stage_index(task.stage)
    while True:
        stage = template.stages[idx]
        for name in stage.actions:
            row = state.find(stage.name, name)
            if row is None:
                return RunAction(stage.name, name)
            step = _action_step(row, template.spec(name), now)
            if step is not None:
                return step
        if stage.exit is not None and not stage.exit.met(task):
            return stage.exit.need(task)
        idx += 1
        while idx < len(template.stages):
            entry = template.stages[idx].entry
            if entry is None or entry.met(task):
                break
            idx += 1
        if idx >= len(template.stages):
            return Finished(TaskStatus.DONE)
        task.stage = template.stages[idx].name


def stopped_by_its_code(action: Action) -> bool:
    """Whether ``action`` stopped on a programming error of its own code (not retried)."""
    return action.error_kind == PROGRAMMING_ERROR and action.status in (
        ActionStatus.FAILED,
        ActionStatus.UNKNOWN,
    )


def _unwind(template: TaskTemplate, state: TaskState, now: datetime) -> NextStep:
    """After a step failed for good: compensate earlier successes in reverse order (saga)."""
    done = [
        a
        for a in state.actions
        if a.kind == ActionKind.STEP
        and a.status in (ActionStatus.SUCCESS, ActionStatus.COMPENSATED)
        and template.spec(a.name).compensate_fn is not None
    ]
    for original in sorted(done, key=lambda a: a.seq, reverse=True):
        spec = template.spec(original.name).compensation()
        row = next(
            (
                a
                for a in state.actions
                if a.kind == ActionKind.COMPENSATION and a.compensates == original.seq
            ),
            None,
        )
        if row is None:
            return RunAction(original.stage, spec.name, ActionKind.COMPENSATION, original.seq)
        if row.status == ActionStatus.FAILED:
            return NeedsAttention(f"{spec.name} failed: {row.error}", row.seq)
        step = _action_step(row, spec, now)
        if step is not None:
            return step
    return Finished(TaskStatus.FAILED)


def _action_step(row: Action, spec: ActionSpec, now: datetime) -> NextStep | None:
    """What a recorded action still needs, or None when it has succeeded."""
    if row.status in (ActionStatus.SUCCESS, ActionStatus.COMPENSATED):
        return None
    if row.status == ActionStatus.RUNNING:
        return InProgress(row.seq)
    if row.status == ActionStatus.FAILED:
        return NeedsAttention(f"{row.name} failed: {row.error}", row.seq)
    if row.status == ActionStatus.UNKNOWN:
        if spec.check_fn is None and not spec.safe_to_repeat:
            return NeedsAttention(
                f"the outcome of {row.name} is unknown, and it can neither be checked "
                "nor safely repeated",
                row.seq,
            )
        if spec.check_fn is None and not spec.retry.can_retry(row.attempts):
            return NeedsAttention(
                f"the outcome of {row.name} is unknown after {row.attempts} attempts", row.seq
            )
        if row.checks >= MAX_CHECKS:
            return NeedsAttention(
                f"the outcome of {row.name} is still unknown after {row.checks} checks", row.seq
            )
        if row.next_attempt_at is not None and row.next_attempt_at > now:
            return WaitRetry(row.seq, row.next_attempt_at)
        return Reconcile(row.seq)
    if row.next_attempt_at is not None and row.next_attempt_at > now:
        return WaitRetry(row.seq, row.next_attempt_at)
    return RunAction(row.stage, row.name, row.kind, row.compensates, row.seq)


def describe(template: TaskTemplate, state: TaskState, step: NextStep) -> str:
    """One human sentence: where the task stands and what happens next."""
    task = state.task
    what = task.type.replace("_", " ")
    filled = sum(1 for s in template.slots if task.slots.get(s.name) is not None)
    match step:
        case AskSlot(slot=slot):
            return (
                f"The {what} is collecting details: waiting for {slot.replace('_', ' ')} "
                f"({filled} of {len(template.slots)} slots filled)."
            )
        case AskConfirmation():
            values = ", ".join(f"{k}={v}" for k, v in task.slots.items())
            return f"The {what} waits for the user to confirm: {values}."
        case WaitOperator(slot=slot, value=value):
            return (
                f"The {what} waits for an operator to set {slot.replace('_', ' ')} "
                f"({value} to go on)."
            )
        case WaitUser(reason=reason):
            return f"The {what} waits for the user: {reason.replace('_', ' ')}."
        case RunAction(name=name, seq=None):
            return f"The {what} is in stage {task.stage}: next it runs {name}."
        case RunAction(name=name, seq=seq) if seq is not None:
            row = state.action(seq)
            return (
                f"The {what} is in stage {task.stage}: {name} is due (attempt {row.attempts + 1})."
            )
        case WaitRetry(seq=seq, at=at):
            row = state.action(seq)
            return (
                f"The {what} is waiting to retry {row.name} at {at:%Y-%m-%d %H:%M:%S} UTC "
                f"after: {row.error}."
            )
        case InProgress(seq=seq):
            return f"The {what} is running {state.action(seq).name}."
        case Reconcile(seq=seq):
            return (
                f"The {what} is checking what really happened to {state.action(seq).name} "
                "before going on."
            )
        case NeedsAttention(reason=reason):
            return f"The {what} needs attention: {reason}."
        case Finished(status=TaskStatus.DONE):
            return (
                f"The {what} is done: {task.progress.done} of {task.progress.total} "
                "actions succeeded."
            )
        case Finished(status=TaskStatus.CANCELLED):
            return f"The {what} was cancelled."
        case Finished(status=_):
            failed = [
                a for a in state.actions if a.status == ActionStatus.FAILED and a.kind == "step"
            ]
            undone = [a.name for a in state.actions if a.status == ActionStatus.COMPENSATED]
            reason = f"{failed[0].name} failed: {failed[0].error}" if failed else "it failed"
            tail = f"; undone: {', '.join(undone)}" if undone else ""
            return f"The {what} failed: {reason}{tail}."
    raise AssertionError(step)  # pragma: no cover
