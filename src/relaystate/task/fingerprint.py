"""Which definition of a template made a stored Task: a hash of what decides its behaviour.

Two programs may declare the same task type and version differently (a slot added, a choice
renamed) and share one store. A Task records the fingerprint of the definition that made it,
and a process whose definition of that name and version has another fingerprint refuses to
write it (:class:`~relaystate.errors.TemplateMismatch`) instead of rewriting its slots and
progress by rules that never made them.

The fingerprint is sha256 over a canonical JSON (sorted keys, no spaces) of the declaration,
so it is the same in every process and Python run (never ``hash()``, an ``id()`` or a
function's address). ``SCHEME`` prefixes it: a later relaystate that hashes other parts uses
another prefix, and a stored fingerprint of another scheme is re-stamped, not refused.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import TemplateMismatch

if TYPE_CHECKING:
    from ..model import Task

# A template, its slots, stages and conditions are read by attribute (``Any`` here): the
# templates module imports this one (``TaskTemplate.fingerprint``), not the other way round.
TaskTemplate: TypeAlias = Any
Slot: TypeAlias = Any
Stage: TypeAlias = Any
Condition: TypeAlias = Any

SCHEME = "v1:"
"""The prefix of a fingerprint of this scheme (what is hashed, and how)."""


def declaration(template: TaskTemplate) -> dict[str, Any]:
    """The parts of ``template`` that decide a Task's stored state and path, as plain JSON.

    Covered: name, version; each slot's kind, whether it is required, its choices, pattern,
    parser (by qualified name), bounds and who fills it; the stages in order with their
    actions and entry/exit conditions (by name); each action's name, side effect,
    idempotency and whether it has a check and a compensation. Not covered: words for
    people and for reading (labels, questions, synonyms, cues, triggers, titles, goal), the
    retry policy and timeouts (tuning), migrations and the upgrade policy. Slots and actions
    are keyed by name, so the order they are declared in does not count; choices are a set;
    the order of stages, and of each stage's actions, does count.
    """
    return {
        "type": template.type,
        "version": template.version,
        "slots": {s.name: _slot(s) for s in template.slots},
        "stages": [_stage(s) for s in template.stages],
        "actions": {
            name: {
                "side_effect": spec.side_effect,
                "idempotent": spec.idempotent,
                "check": spec.check_fn is not None,
                "compensate": spec.compensate_fn is not None,
            }
            for name, spec in template.actions.items()
        },
    }


def fingerprint(template: TaskTemplate) -> str:
    """``SCHEME`` + the sha256 (hex) of the canonical JSON of :func:`declaration`."""
    text = json.dumps(
        declaration(template), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return SCHEME + hashlib.sha256(text.encode("utf-8")).hexdigest()


def check(task: Task, template: TaskTemplate) -> None:
    """Refuse ``task`` if a definition of its template other than ``template`` made it.

    A Task with no fingerprint (stored before Tasks recorded one) or one of another scheme
    is accepted: the writer stamps this definition's on its next write.
    """
    stored = task.template_fingerprint
    if not stored.startswith(SCHEME):
        return
    here = template.fingerprint
    if stored != here:
        raise TemplateMismatch(task.id, template.type, template.version, stored, here)


def stamp(task: Task, template: TaskTemplate) -> bool:
    """Record ``template``'s fingerprint on ``task`` if it has none of this scheme (an
    older Task, accepted by :func:`check`); True if it changed."""
    if task.template_fingerprint.startswith(SCHEME):
        return False
    task.template_fingerprint = template.fingerprint
    return True


def _slot(slot: Slot) -> dict[str, Any]:
    return {
        "kind": slot.kind,
        "required": slot.required,
        "choices": sorted(slot.choices) if slot.choices else None,
        "pattern": slot.pattern,
        "parser": _name(slot.parser),
        "filled_by": slot.filled_by,
        "minimum": slot.minimum,
        "maximum": slot.maximum,
    }


def _stage(stage: Stage) -> dict[str, Any]:
    return {
        "name": stage.name,
        "actions": list(stage.actions),
        "entry": _condition(stage.entry),
        "exit": _condition(stage.exit),
    }


def _condition(condition: Condition | None) -> str | None:
    return None if condition is None else condition.name


def _name(fn: Callable[..., Any] | None) -> str | None:
    """A callable by its qualified name (not its module, which depends on how the code was
    imported: ``__main__`` as a script, ``app.agent`` under ``--app``)."""
    if fn is None:
        return None
    found = getattr(fn, "__qualname__", None)
    return found if isinstance(found, str) else type(fn).__qualname__
