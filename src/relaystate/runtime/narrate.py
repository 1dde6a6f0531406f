"""A journal entry in people's words: what changed in the user's terms first (slots, stage,
status, confirmation, Actions and their outcomes), and apart from it the bookkeeping it also
changed (leases, due times, derived text), which audits and ``--json`` still have in full.

Action changes name the Action (the journal's paths only hold its seq): the names come
from the baseline and from the entries that recorded each Action, read in order. Slots,
stages and statuses are named by ``Labels`` (the template's words, in the reader's language);
the sentences themselves are written in English and Chinese.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import JournalEntry, Snapshot
from ..task.labels import Labels

BOOKKEEPING_TASK = frozenset(
    {
        "updated_at",
        "due_at",
        "status_text",
        "missing_slots",
        "progress",
        "version",
        "schema_version",
        "created_by_build",
        "template_fingerprint",
    }
)
"""Task fields that follow from the others, or are the runtime's own."""
BOOKKEEPING_ACTION = frozenset(
    {"attempts", "checks", "lease_owner", "lease_expires_at", "next_attempt_at", "updated_at"}
)
"""Action fields that are the action protocol's bookkeeping."""
SHOWN = 60
"""The most characters of a value shown in a sentence."""


PHRASES = {
    "en": {
        "started": "started in stage {stage}",
        "with": " with {slots}",
        "set": "{what} set to {value}",
        "cleared": "{what} cleared (was {value})",
        "moved": "{what}: {before} → {after}",
        "slots": "slots",
        "stage": "stage",
        "status": "status",
        "confirmed": "confirmed by the user",
        "withdrawn": "confirmation withdrawn",
        "refused": "the downstream refused {slot}: {reason}",
        "replaced": "the refused value was replaced",
        "lifted": "lifted to template version {version}",
        "recorded": "Action {name} recorded ({status})",
        "compensation": "compensation {name} recorded ({status})",
        "removed": "{name} removed",
        "returned": "{name} returned {value}",
        "failed": "{name}: {error}",
        "action": "action {seq}",
        "list": ", ",
    },
    "zh": {
        "started": "开始，阶段为{stage}",
        "with": "，已有 {slots}",
        "set": "{what}设为 {value}",
        "cleared": "{what}已清除（原为 {value}）",
        "moved": "{what}：{before} → {after}",
        "slots": "信息",
        "stage": "阶段",
        "status": "状态",
        "confirmed": "用户已确认",
        "withdrawn": "确认已撤回",
        "refused": "下游系统拒绝了{slot}：{reason}",
        "replaced": "被拒绝的值已替换",
        "lifted": "升级到模板版本 {version}",
        "recorded": "已记录操作 {name}（{status}）",
        "compensation": "已记录补偿操作 {name}（{status}）",
        "removed": "{name} 已移除",
        "returned": "{name} 返回 {value}",
        "failed": "{name}：{error}",
        "action": "操作 {seq}",
        "list": "，",
    },
}
"""The journal's sentences, per language."""


@dataclass(frozen=True)
class Told:
    """One entry in words: ``said`` what changed for people, ``bookkeeping`` the rest."""

    said: list[str]
    bookkeeping: list[str]


def task_type(baseline: Snapshot | None, entries: Sequence[JournalEntry]) -> str | None:
    """The Task's type, read from its history (the baseline, or the entry that started it)."""
    if baseline is not None:
        found = (baseline.state.get("task") or {}).get("type")
        if isinstance(found, str):
            return found
    for entry in entries:
        for change in entry.changes:
            after = change.get("after")
            if list(change.get("path", [])) == ["task"] and isinstance(after, dict):
                return str(after.get("type")) if after.get("type") else None
    return None


def narrate(
    baseline: Snapshot | None, entries: Sequence[JournalEntry], labels: Labels | None = None
) -> list[Told]:
    """Each entry of a history (after ``baseline``), in words, in order; ``labels`` names
    slots, stages and statuses (default: English, names as words)."""
    teller = _Teller(labels or Labels())
    if baseline is not None:
        for seq, action in (baseline.state.get("actions") or {}).items():
            if isinstance(action, dict):
                teller.names[int(seq)] = str(action.get("name", teller.say("action", seq=seq)))
    return [teller.entry(e) for e in entries]


class _Teller:
    """Tells one history's entries in order (it learns Action names as they are recorded)."""

    def __init__(self, labels: Labels) -> None:
        self.labels = labels
        self.phrases = PHRASES[labels.words]
        self.names: dict[int, str] = {}

    def say(self, key: str, **values: Any) -> str:
        return self.phrases[key].format(**values)

    def entry(self, entry: JournalEntry) -> Told:
        said: list[str] = []
        kept: list[str] = []
        for change in entry.changes:
            path = list(change.get("path", []))
            if path[:1] == ["task"]:
                self.task(path[1:], change, said, kept)
            elif path[:1] == ["actions"]:
                self.action(path[1:], change, said, kept)
        return Told(said, kept)

    def task(
        self, path: list[Any], change: dict[str, Any], said: list[str], kept: list[str]
    ) -> None:
        words = self.labels
        if not path:  # the whole Task: it was started
            task = change.get("after") or {}
            filled = (task.get("slots") or {}).items()
            slots = self.phrases["list"].join(f"{words.slot(k)}={_short(v)}" for k, v in filled)
            started = self.say("started", stage=words.stage(str(task.get("stage"))))
            said.append(started + (self.say("with", slots=slots) if slots else ""))
            return
        field = str(path[0])
        if field in BOOKKEEPING_TASK:
            kept.append(field)
        elif field == "slots" and len(path) > 1:
            said.append(self.moved(words.slot(str(path[1])), change))
        elif field == "slots":
            said.append(self.moved(self.say("slots"), change))
        elif field == "stage":
            said.append(self.moved(self.say("stage"), change, words.stage))
        elif field == "status":
            said.append(self.moved(self.say("status"), change, words.status))
        elif field == "confirmed":
            said.append(self.say("confirmed" if change.get("after") else "withdrawn"))
        elif field == "context" and path[1:2] == ["rejected"]:
            refused = change.get("after")
            if isinstance(refused, dict):
                slot = words.slot(str(refused.get("slot")))
                said.append(self.say("refused", slot=slot, reason=refused.get("reason")))
            else:
                said.append(self.say("replaced"))
        elif field == "template_version":
            said.append(self.say("lifted", version=change.get("after")))
        else:
            said.append(self.moved(".".join(str(p) for p in path), change))

    def action(
        self, path: list[Any], change: dict[str, Any], said: list[str], kept: list[str]
    ) -> None:
        if not path:
            return  # the Task's empty list of Actions, when it was started
        seq = int(path[0])
        name = self.names.get(seq) or self.say("action", seq=seq)
        if len(path) == 1:
            action = change.get("after")
            if isinstance(action, dict):
                name = self.names[seq] = str(action.get("name", name))
                what = "compensation" if action.get("kind") == "compensation" else "recorded"
                status = self.labels.action_status(str(action.get("status")))
                said.append(self.say(what, name=name, status=status))
            else:
                said.append(self.say("removed", name=name))
            return
        field = str(path[1])
        if field in BOOKKEEPING_ACTION:
            kept.append(f"{name}.{field}")
        elif field == "status":
            said.append(self.moved(name, change, self.labels.action_status))
        elif field == "output" and change.get("after") is not None:
            said.append(self.say("returned", name=name, value=_short(change.get("after"))))
        elif field == "error" and change.get("after"):
            said.append(self.say("failed", name=name, error=change.get("after")))
        elif field in ("output", "error", "error_kind") and not change.get("after"):
            kept.append(f"{name}.{field}")
        else:
            said.append(self.moved(f"{name} {field}", change))

    def moved(
        self, what: str, change: dict[str, Any], word: Callable[[str], str] | None = None
    ) -> str:
        """``what`` set, cleared or changed; ``word`` names a value (a stage, a status)."""

        def shown(value: Any) -> str:
            return word(str(value)) if word is not None and value is not None else _short(value)

        if "before" not in change:
            return self.say("set", what=what, value=shown(change.get("after")))
        if "after" not in change:
            return self.say("cleared", what=what, value=shown(change["before"]))
        before, after = shown(change["before"]), shown(change["after"])
        return self.say("moved", what=what, before=before, after=after)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
