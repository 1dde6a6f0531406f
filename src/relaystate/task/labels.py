"""What people call a Task's parts, per language: its type, slots and stages (from its
template), and the runtime's own statuses (from here). The dashboard and the journal in
people's words say these instead of identifiers (``waiting for you``, not ``waiting_user``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .templates import TaskTemplate

LANGUAGES = ("en", "zh")
"""The languages the runtime's own words are written in."""

TASK_STATUSES = {
    "en": {
        "pending": "pending",
        "running": "in progress",
        "waiting_user": "waiting for you",
        "needs_attention": "needs attention",
        "done": "done",
        "failed": "failed",
        "cancelled": "cancelled",
    },
    "zh": {
        "pending": "待处理",
        "running": "办理中",
        "waiting_user": "等待您",
        "needs_attention": "需人工处理",
        "done": "已完成",
        "failed": "失败",
        "cancelled": "已取消",
    },
}
"""Language -> Task status -> what to call it."""

ACTION_STATUSES = {
    "en": {
        "pending": "pending",
        "running": "running",
        "success": "succeeded",
        "failed": "failed",
        "unknown": "outcome unknown",
        "compensated": "undone",
    },
    "zh": {
        "pending": "待执行",
        "running": "执行中",
        "success": "成功",
        "failed": "失败",
        "unknown": "结果未知",
        "compensated": "已撤销",
    },
}
"""Language -> Action status -> what to call it."""


def _plain(name: str) -> str:
    return name.replace("_", " ")


@dataclass(frozen=True)
class Labels:
    """The words for one Task type in one language; without a template (a type the server
    no longer runs) slot and stage names are shown as words (``cabin class``)."""

    language: str = "en"
    template: TaskTemplate | None = None

    @property
    def words(self) -> str:
        """The language the runtime's own words are in: ``language`` if written, else en."""
        return self.language if self.language in LANGUAGES else "en"

    def title(self) -> str:
        return self.template.title(self.language) if self.template else "Task"

    def slot(self, name: str) -> str:
        found = self.template and next((s for s in self.template.slots if s.name == name), None)
        return found.label(self.language) if found else _plain(name)

    def stage(self, name: str) -> str:
        found = self.template and next((s for s in self.template.stages if s.name == name), None)
        return found.label(self.language) if found else _plain(name)

    def status(self, status: str) -> str:
        return TASK_STATUSES[self.words].get(status, _plain(status))

    def action_status(self, status: str) -> str:
        return ACTION_STATUSES[self.words].get(status, _plain(status))
