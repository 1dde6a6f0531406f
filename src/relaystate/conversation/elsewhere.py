"""The user's open Tasks of other sessions, as a new request in this session sees them.

A Task belongs to the request that started it. A new request in another session joins it
only while it is still being told what to do (it asks for a value, or for the confirmation
of its values, and nothing of it has gone downstream): then the same request again is the
same booking, not a second one. Once confirmed, running, or waiting on an outcome or an
operator, its work answers the request that started it; a new request, however alike,
starts its own Task (and is told the other one is under way), never taking that one's
result for its own. Naming the Task, its id, or "continue" still bring it back: those ask
for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..model import TaskState, TaskStatus
from ..task.next_step import AskConfirmation, AskSlot, NextStep
from ..task.templates import TaskTemplate
from .extract import Extraction
from .routing import contradicts


def takes_requests(template: TaskTemplate, state: TaskState, step: NextStep) -> bool:
    """Whether ``state`` still gathers what it is to do: it waits for a value or for the
    confirmation of its values, and its stage comes before any stage with a side effect
    (a look-up may have run; nothing was sent on the user's behalf)."""
    if state.task.status != TaskStatus.WAITING_USER:
        return False
    if not isinstance(step, AskSlot | AskConfirmation):
        return False
    if any(_has_effect(template, a.name) for a in state.actions):
        return False
    names = [s.name for s in template.stages]
    effects = [
        i for i, s in enumerate(template.stages) if any(_has_effect(template, a) for a in s.actions)
    ]
    here = names.index(state.task.stage) if state.task.stage in names else len(names)
    return not effects or here < effects[0]


def _has_effect(template: TaskTemplate, action: str) -> bool:
    spec = template.actions.get(action)
    return spec is not None and spec.side_effect


@dataclass(frozen=True)
class Elsewhere:
    """What other sessions hold for a new request of one type."""

    joins: TaskState | None = None
    """The Task still gathering its details that the request may continue."""
    under_way: TaskState | None = None
    """A Task past its details that the request resembles (said in the reply, not joined)."""


def look(
    template: TaskTemplate,
    found: Extraction,
    candidates: Iterable[TaskState],
    *,
    here: set[str],
    template_of: Callable[[TaskState], TaskTemplate],
    next_step: Callable[[TaskState], NextStep],
) -> Elsewhere:
    """The Task of ``template``'s type open in another session (not in ``here``) that the
    request may join, and the first one it resembles that is already under way."""
    joins = under_way = None
    for state in candidates:
        if state.task.id in here or state.task.type != template.type:
            continue
        if contradicts(template, state, found):
            continue
        if takes_requests(template_of(state), state, next_step(state)):
            joins = joins or state
        else:
            under_way = under_way or state
    return Elsewhere(joins, under_way)
