"""Which template version a stored task runs on in this build, and lifting it there.

A build may carry several versions of a task type; the newest starts new tasks. A task
keeps the version that started it until a migration lifts it: an ``auto`` task is lifted to
the newest version (each registered migration N -> N + 1 in order); a ``pinned`` one never
is, and runs on its own version in its own build. A task of a version newer than any here
is refused (:class:`TaskTooNew`): an older build never writes state it does not know.

With ``dual_write`` (while an older build still runs beside this one) nothing is lifted
and new tasks start on the oldest version carried here, so every task this build writes
stays readable by the older build; turn it off, or run ``relaystate migrate``, once the
older build is gone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..errors import MigrationFailed, OtherBuild, TaskTooNew, TemplateError
from ..model import ActionKind, Task, TaskState
from . import fingerprint
from .machine import settle
from .templates import Migration, TaskTemplate

FIXED = ("id", "type", "user_id", "version", "created_by_build", "pinned")
"""Fields of a task a migration may not change."""


class TemplateVersions:
    """The task templates a build knows, by type and version."""

    def __init__(self, templates: Iterable[TaskTemplate] = (), *, dual_write: bool = False):
        self._by_type: dict[str, dict[int, TaskTemplate]] = {}
        self.dual_write = dual_write
        self.newest: dict[str, TaskTemplate] = {}
        """The newest version of each type: what older tasks are lifted to."""
        self.starting: dict[str, TaskTemplate] = {}
        """What starts new tasks of each type (the newest; the oldest in dual-write): the
        runtime's ``templates``, which the conversation engine reads a new task's slots by."""
        for template in templates:
            self.register(template)

    def register(self, template: TaskTemplate) -> None:
        versions = self._by_type.setdefault(template.type, {})
        versions[template.version] = template
        self.newest[template.type] = versions[max(versions)]
        self.starting[template.type] = versions[min(versions) if self.dual_write else max(versions)]

    def for_new(self, type: str) -> TaskTemplate | None:
        """The template a new task of ``type`` starts on (the oldest one in dual-write)."""
        return self.starting.get(type)

    def known(self) -> Mapping[str, list[int]]:
        """Versions this build carries, per type."""
        return {t: sorted(v) for t, v in self._by_type.items()}

    def runnable(self) -> dict[str, list[int]]:
        """Versions of each type whose tasks this build can continue (directly or lifted)."""
        out: dict[str, list[int]] = {}
        for kind, versions in self._by_type.items():
            top = max(versions)
            chain = self._chain(kind)
            out[kind] = [v for v in range(1, top + 1) if v in versions or _reaches(chain, v, top)]
        return out

    def needs_lift(self, task: Task) -> bool:
        """Whether ``task`` must be lifted before this build runs it."""
        versions = self._by_type.get(task.type)
        if not versions or task.pinned or (self.dual_write and task.template_version in versions):
            return False
        top = max(versions)
        return task.template_version < top and _reaches(
            self._chain(task.type), task.template_version, top
        )

    def runs_on(self, task: Task) -> TaskTemplate:
        """The template ``task`` runs on here, as stored (lift it first if ``needs_lift``)."""
        versions = self._by_type.get(task.type)
        if not versions:
            raise TemplateError(f"task {task.id} is of type {task.type!r}, unknown here")
        top = max(versions)
        if task.template_version > top:
            raise TaskTooNew(
                f"task {task.id} runs on {task.type!r} version {task.template_version}; this "
                f"build knows up to version {top} and leaves it to a newer build"
            )
        template = versions.get(task.template_version)
        if template is not None:
            return template
        if task.pinned:
            raise OtherBuild(
                f"task {task.id} is pinned to {task.type!r} version {task.template_version} "
                f"and build {task.created_by_build!r}, which this build does not carry: it is "
                "left to that build"
            )
        if self.needs_lift(task):
            raise TemplateError(
                f"task {task.id} is on {task.type!r} version {task.template_version}: lift it "
                f"to version {top} first"
            )
        raise TemplateError(
            f"task {task.id} is on {task.type!r} version {task.template_version}, which this "
            f"build neither carries nor can migrate from"
        )

    def check_made_by(self, task: Task) -> None:
        """TemplateMismatch if this build carries ``task``'s type and version under another
        definition than the one that made it (nothing to compare when it does not carry
        that version: a lift, a pinned task of another build)."""
        template = self._by_type.get(task.type, {}).get(task.template_version)
        if template is not None:
            fingerprint.check(task, template)

    def carries(self, task: Task) -> bool:
        """Whether this build has the template version ``task`` is on."""
        return task.template_version in self._by_type.get(task.type, {})

    def lift(self, state: TaskState, now: datetime) -> TaskState:
        """The task lifted to the newest version, in memory (its actions unchanged, derived
        fields settled on the new template, its fingerprint the new version's);
        MigrationFailed names the step that failed, TemplateMismatch a task this build's
        definition of its version did not make (its migrations were written for that one)."""
        task = state.task
        self.check_made_by(task)
        chain = self._chain(task.type)
        target = self.newest[task.type]
        row: dict[str, Any] = task.to_dict()
        for version in range(task.template_version, target.version):
            row = _step(chain[version], row, version, task.type)
        try:
            lifted = TaskState(Task.from_dict(row), state.copy().actions)
        except (KeyError, TypeError, ValueError) as exc:
            raise MigrationFailed(
                f"migration of {task.type!r} to version {target.version} left a task that "
                f"cannot be read: {type(exc).__name__}: {exc}"
            ) from None
        _check_fits(lifted, target)
        lifted.task.template_fingerprint = target.fingerprint
        settle(target, lifted, now)
        return lifted

    def _chain(self, kind: str) -> dict[int, Migration]:
        """Every migration the versions of ``kind`` carried here declare, by version."""
        versions = self._by_type.get(kind, {})
        chain: dict[int, Migration] = {}
        for version in sorted(versions):
            chain.update(versions[version].migrations)
        return chain


def _reaches(chain: Mapping[int, Migration], start: int, top: int) -> bool:
    return all(v in chain for v in range(start, top))


def _step(fn: Migration, row: dict[str, Any], version: int, kind: str) -> dict[str, Any]:
    where = f"migration of {kind!r} from version {version}"
    try:
        out = fn(copy.deepcopy(row))
    except Exception as exc:
        raise MigrationFailed(f"{where} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(out, dict):
        raise MigrationFailed(f"{where} returned {type(out).__name__}, not the task's dict")
    for key in FIXED:
        if out.get(key) != row.get(key):
            raise MigrationFailed(f"{where} changed {key!r}, which a migration may not change")
    if not isinstance(out.get("slots"), dict) or not isinstance(out.get("stage"), str):
        raise MigrationFailed(f"{where} left no slots dict or no stage")
    out["template_version"] = version + 1
    return out


def _check_fits(state: TaskState, template: TaskTemplate) -> None:
    """The lifted task must name only stages and actions the new version declares."""
    where = f"after migration to {template.type!r} version {template.version}"
    names = {s.name for s in template.stages}
    if state.task.stage not in names:
        raise MigrationFailed(f"{where}: stage {state.task.stage!r} is not one of {sorted(names)}")
    for action in state.actions:
        name = (
            action.name.removesuffix(".compensate")
            if action.kind == ActionKind.COMPENSATION
            else action.name
        )
        if name not in template.actions:
            raise MigrationFailed(f"{where}: recorded action {action.name!r} is not declared")
