"""The changes a user or an operator may ask of a task, as values.

The runtime's ``start``/``fill``/``confirm``/``cancel``/``resolve`` and a conversational
turn build the same values and go through the same path, so a rule about what may change
when (no change of mind once a side effect is recorded, say) lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import inputs
from ..errors import (
    ConfirmationChanged,
    InvalidSlot,
    NotFound,
    ScopeError,
    TaskLocked,
    TemplateError,
)
from ..model import Action, ActionKind, ActionStatus, TaskState, TaskStatus
from ..scope import Scope
from .machine import first_stage, stopped_by_its_code
from .templates import TaskTemplate

JSON = Any


@dataclass(frozen=True)
class Start:
    """A new task of ``type`` for the scope's user, with the slots known so far."""

    type: str
    slots: Mapping[str, JSON] = field(default_factory=dict)
    goal: str | None = None
    context: Mapping[str, JSON] = field(default_factory=dict)
    task_id: str | None = None
    session_id: str | None = None
    """The session it starts in (recorded as the task's origin, not its owner)."""


@dataclass(frozen=True)
class Fill:
    """Set slot values (latest wins; the journal keeps the old ones)."""

    task_id: str
    slots: Mapping[str, JSON]


@dataclass(frozen=True)
class Confirm:
    """The user's yes (go on) or no (back to collecting) on the collected slots. ``seen`` is
    the task version whose summary the user answered: a yes to an older one is refused
    (ConfirmationChanged), so a change made meanwhile elsewhere is never confirmed unseen."""

    task_id: str
    yes: bool = True
    seen: int | None = None


@dataclass(frozen=True)
class Cancel:
    task_id: str


@dataclass(frozen=True)
class Resume:
    """No change: reconcile and run what is due, then say where the task stands."""

    task_id: str


@dataclass(frozen=True)
class Resolve:
    """An operator settles an action that needs attention: it did or did not take effect."""

    task_id: str
    seq: int
    succeeded: bool
    output: JSON = None


@dataclass(frozen=True)
class Rerun:
    """An operator runs an action again once the error in its own code is fixed (an action
    with a side effect is first reconciled with the downstream: it may have taken effect)."""

    task_id: str
    seq: int


Edit = Start | Fill | Confirm | Cancel | Resume | Resolve | Rerun
TaskEdit = Fill | Confirm | Cancel | Resume | Resolve | Rerun
"""The edits of an existing task."""


def check_edit(scope: object, edit: Edit, *, max_text: int | None = None) -> Scope:
    """Check an edit's fields as :func:`relaystate.inputs.check` checks a call's arguments (a
    field with no rule there, added to an edit later, passes: the edit's own code checks it)."""
    fields = dict(vars(edit))
    if isinstance(edit, Start):
        fields["new_task_id"] = fields.pop("task_id")
    return inputs.check(scope, max_text=max_text, **inputs.known_fields(fields))


def reason_for(edit: Edit) -> str:
    """The journal's reason for the commit an edit makes."""
    match edit:
        case Start(type=type_):
            return f"started {type_}"
        case Fill(slots=slots):
            return f"filled {', '.join(slots) or 'nothing'}"
        case Confirm(yes=yes):
            return "user confirmed" if yes else "user declined"
        case Cancel():
            return "cancelled by the user"
        case Resume():
            return "resumed"
        case Resolve(seq=seq, succeeded=ok):
            return f"action {seq} resolved as {'succeeded' if ok else 'failed'}"
        case Rerun(seq=seq):
            return f"action {seq} rerun after a fix"
    raise AssertionError(edit)  # pragma: no cover


def change_for(
    edit: TaskEdit,
    template_of: Callable[[TaskState], TaskTemplate],
    by: str,
    *,
    operator: bool = False,
) -> Callable[[TaskState], bool | None] | None:
    """The function that applies ``edit`` to a fresh draft (None for Resume); ``operator``
    when an admin scope asks it (only then may an operator's slot be filled)."""
    match edit:
        case Fill(slots=slots):
            return lambda draft: _fill(draft, template_of(draft), slots, operator=operator)
        case Confirm(yes=yes, seen=seen):
            return lambda draft: _confirm(draft, template_of(draft), yes, seen)
        case Cancel():
            return lambda draft: _cancel(draft, template_of(draft))
        case Resolve(seq=seq, succeeded=ok, output=output):
            return lambda draft: _resolve(draft, seq, ok, output, by)
        case Rerun(seq=seq):
            return lambda draft: _rerun(draft, seq)
        case Resume():
            return None
    raise AssertionError(edit)  # pragma: no cover


def validated(template: TaskTemplate, slots: Mapping[str, JSON]) -> dict[str, JSON]:
    """Slot values normalised by their declarations; InvalidSlot says which and why."""
    out = {}
    for name, value in slots.items():
        try:
            slot = template.slot(name)
        except TemplateError:
            raise InvalidSlot(name, f"{template.type} has no such slot") from None
        out[name] = slot.validate(value)
    return out


def _fill(
    draft: TaskState, template: TaskTemplate, slots: Mapping[str, JSON], *, operator: bool
) -> bool:
    """A changed value sends the task back to its first stage, so it is confirmed again,
    and read-only actions that already ran (a look-up) run again on the new values. Once a
    side effect has been recorded the slots are locked. An operator's slot (an approval) is
    filled by an admin scope only, and filling it sends nothing back."""
    _require_open(draft)
    values = validated(template, slots)
    theirs = [k for k in values if template.slot(k).filled_by == "operator"]
    if theirs and not operator:
        raise ScopeError(f"slot {theirs[0]!r} is filled by an operator (an admin scope)")
    changed = {k: v for k, v in values.items() if draft.task.slots.get(k) != v}
    if changed:
        draft.task.slots.update(changed)
        refused = draft.task.context.get("rejected")
        if isinstance(refused, dict) and refused.get("slot") in changed:
            draft.task.context.pop("rejected")
        if any(k not in theirs for k in changed):
            _change_of_mind(draft, template, "its slots can no longer change")
    return True


def _confirm(draft: TaskState, template: TaskTemplate, yes: bool, seen: int | None) -> bool:
    _require_open(draft)
    _require_no_effect(draft, template, "it is past confirmation")
    if yes and seen is not None and seen != draft.task.version:
        raise ConfirmationChanged(draft.task.id, seen, draft.task.version)
    if yes:
        draft.task.confirmed = True
    else:
        _change_of_mind(draft, template, "it is past confirmation")
    return True


def _cancel(draft: TaskState, template: TaskTemplate) -> bool:
    """Cancel an open task, unless an action is in flight or a side effect already landed."""
    _require_open(draft)
    for action in draft.actions:
        if action.status.is_open:
            raise TaskLocked(
                f"{action.name} is {action.status}; cancel after it settles",
                code="running",
                action=action.name,
            )
        spec = template.spec(action.name.removesuffix(".compensate"))
        if action.status == ActionStatus.SUCCESS and spec.side_effect:
            raise TaskLocked(
                f"{action.name} already took effect; it cannot be cancelled",
                code="took_effect",
                action=action.name,
            )
    draft.task.status = TaskStatus.CANCELLED
    return True


def _resolve(draft: TaskState, seq: int, succeeded: bool, output: JSON, by: str) -> bool:
    try:
        action = draft.action(seq)
    except KeyError:
        raise NotFound(f"task {draft.task.id} has no action {seq}") from None
    if not draft.task.status.is_open or not _unsettled(action):
        raise TaskLocked(
            f"{action.name} is {action.status} and task {draft.task.id} is "
            f"{draft.task.status}; nothing to resolve (only an Action whose outcome is unknown, "
            f"or one a person must settle, can be)",
            code="settled",
            action=action.name,
        )
    action.status = ActionStatus.SUCCESS if succeeded else ActionStatus.FAILED
    action.output = output if succeeded else action.output
    action.error = None if succeeded else (action.error or f"resolved as failed by {by}")
    action.error_kind = None
    action.lease_owner = action.lease_expires_at = action.next_attempt_at = None
    if succeeded and action.compensates is not None:
        draft.action(action.compensates).status = ActionStatus.COMPENSATED
    return True


def _unsettled(action: Action) -> bool:
    """Whether an operator may say how ``action`` ended: its outcome is ``unknown``, or it
    failed where the machine stops for a person (an error in its own code, a compensation
    that failed). A step that failed for good was unwound (its Task failed, or compensates):
    calling it a success afterwards would turn a failed Task into a done one."""
    if action.status == ActionStatus.UNKNOWN:
        return True
    return action.status == ActionStatus.FAILED and (
        stopped_by_its_code(action) or action.kind == ActionKind.COMPENSATION
    )


def _rerun(draft: TaskState, seq: int) -> bool:
    try:
        action = draft.action(seq)
    except KeyError:
        raise NotFound(f"task {draft.task.id} has no action {seq}") from None
    if not stopped_by_its_code(action):
        raise TaskLocked(
            f"{action.name} is {action.status} and was not stopped by an error in its code; "
            "nothing to rerun",
            code="settled",
            action=action.name,
        )
    action.error_kind = None
    action.checks = 0
    action.next_attempt_at = None
    if action.status == ActionStatus.FAILED:  # no side effect: simply once more
        action.status = ActionStatus.PENDING
    # UNKNOWN (a side effect): reconciled with the downstream before anything is repeated
    return True


def _require_no_effect(state: TaskState, template: TaskTemplate, why: str) -> None:
    """Refuse a change of mind once a side effect is recorded (it may have happened)."""
    for action in state.actions:
        if action.kind == ActionKind.STEP and template.spec(action.name).side_effect:
            raise TaskLocked(
                f"task {state.task.id} has recorded {action.name}: {why}",
                code="effect",
                action=action.name,
            )


def _change_of_mind(state: TaskState, template: TaskTemplate, why: str) -> None:
    """Back to the first stage, to be confirmed again; read-only actions run again later.

    Refused once a side effect is recorded, or while an action is in flight (its result
    would land on a task that no longer wants it).
    """
    _require_no_effect(state, template, why)
    for action in state.actions:
        if action.status == ActionStatus.RUNNING:
            raise TaskLocked(
                f"{action.name} is running; change it after it settles",
                code="running",
                action=action.name,
            )
    state.task.confirmed = False
    state.task.stage = first_stage(template, state)
    for action in state.actions:  # read-only look-ups: safe to run again on new values
        action.status, action.output, action.error = ActionStatus.PENDING, None, None
        action.attempts = action.checks = 0
        action.next_attempt_at = action.lease_owner = action.lease_expires_at = None


def _require_open(state: TaskState) -> None:
    if not state.task.status.is_open:
        raise TaskLocked(f"task {state.task.id} is {state.task.status}", code="finished")
