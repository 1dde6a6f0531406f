"""What the state machine says should happen next; one small value type per kind of step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..model import ActionKind, TaskStatus


@dataclass(frozen=True)
class AskSlot:
    """The task waits for the user to give a value for ``slot``."""

    slot: str


@dataclass(frozen=True)
class AskConfirmation:
    """The task waits for the user to confirm the collected slots."""


@dataclass(frozen=True)
class WaitUser:
    """The task waits for the user to satisfy a custom condition."""

    reason: str


@dataclass(frozen=True)
class WaitOperator:
    """The task waits for an operator to set ``slot`` (a ``filled_by="operator"`` slot) to
    ``value``: a human approval step. The task needs attention meanwhile, so it is in every
    operator's list of what waits for a person."""

    slot: str
    value: object


@dataclass(frozen=True)
class RunAction:
    """Run an action: record it first when ``seq`` is None, else attempt the recorded one."""

    stage: str
    name: str
    kind: ActionKind = ActionKind.STEP
    compensates: int | None = None
    seq: int | None = None


@dataclass(frozen=True)
class WaitRetry:
    """A recorded action failed and waits for its backoff to pass before the next attempt."""

    seq: int
    at: datetime


@dataclass(frozen=True)
class InProgress:
    """An action is running under a lease; nothing to do unless that lease has expired."""

    seq: int


@dataclass(frozen=True)
class Reconcile:
    """An action's outcome is unknown: ask the downstream (or retry safely) before anything."""

    seq: int


@dataclass(frozen=True)
class NeedsAttention:
    """Deterministic code cannot safely go on; a person must look (never a blind re-run)."""

    reason: str
    seq: int | None = None


@dataclass(frozen=True)
class Finished:
    status: TaskStatus


NextStep = (
    AskSlot
    | AskConfirmation
    | WaitUser
    | WaitOperator
    | RunAction
    | WaitRetry
    | InProgress
    | Reconcile
    | NeedsAttention
    | Finished
)


def status_for(step: NextStep) -> TaskStatus:
    """The task status that a next step implies."""
    if isinstance(step, AskSlot | AskConfirmation | WaitUser):
        return TaskStatus.WAITING_USER
    if isinstance(step, NeedsAttention | WaitOperator):
        return TaskStatus.NEEDS_ATTENTION
    if isinstance(step, Finished):
        return step.status
    return TaskStatus.RUNNING
