"""Template replies in Chinese and English, driven by the state machine's next step.

Every reply is built from stored task state (slots, actions, status), never from the chat,
so the first reply after a user comes back says where the task stands.
"""

from __future__ import annotations

from typing import Any

from ..model import ActionKind, ActionStatus, Task, TaskState, TaskStatus
from ..task.next_step import (
    AskConfirmation,
    AskSlot,
    Finished,
    NeedsAttention,
    NextStep,
    WaitOperator,
    WaitUser,
)
from ..task.templates import Slot, TaskTemplate
from . import places
from .extract import extractor_of

_WORDS = {
    "en": {
        "confirm": "Please confirm your {title}: {values}. Is that right? (yes/no)",
        "done": "Done: your {title} is complete.",
        "reference": " Reference: {ref}.",
        "failed": "Sorry, your {title} could not be completed: {reason}.",
        "attention": (
            "I could not confirm whether {action} went through, so I will not repeat it; "
            "a colleague will check and get back to you."
        ),
        "working": "Your {title} is in progress: {status}",
        "with_operator": "Your {title} is with a colleague now, for its {what}; you will "
        "hear back.",
        "cancelled": "Your {title} is cancelled.",
        "invalid": "Sorry, {reason}. ",
        "welcome": "Welcome back. Your {title}{summary} is waiting for {what}. ",
        "choose": "You have {n} unfinished tasks: {items}. Which one shall we continue? (number)",
        "item": "{i}) {title}{summary}: waiting for {what}",
        "none_open": "You have no unfinished tasks. I can help with: {titles}.",
        "help": "I can help with: {titles}. What would you like to do?",
        "paused": "OK, your {title} is saved; say “continue” any time, from any device.",
        "cannot": "Sorry, that cannot be changed now: {reason}.",
        "confirmation": "your confirmation",
        "change_what": "OK, what would you like to change? ",
        "unclear": "Sorry, I did not understand that. ",
        "changed": "The details changed since you last saw them; please check them again. ",
        "nothing_open": "You have no unfinished {title}.",
        "which": "Do you mean {a}, or {b}? (1/2)",
        "a_new": "a new {title}",
        "under_way": "You have another {title} like this under way; this one is new. ",
        "your": "your {title}{summary}",
        "sep": ", ",
    },
    "zh": {
        "confirm": "请确认您的{title}：{values}。对吗？（是/否）",
        "done": "已完成：您的{title}已办理。",
        "reference": "编号：{ref}。",
        "failed": "抱歉，您的{title}未能完成：{reason}。",
        "attention": (
            "无法确认{action}是否已成功，为避免重复操作不会重试，已转人工核实，稍后回复您。"
        ),
        "working": "您的{title}正在办理中：{status}",
        "with_operator": "您的{title}已转给同事处理{what}，稍后会回复您。",
        "cancelled": "已取消您的{title}。",
        "invalid": "抱歉，{reason}。",
        "welcome": "欢迎回来。您的{title}{summary}还差{what}。",
        "choose": "您有{n}个未完成的任务：{items}。要继续哪一个？（请回复编号）",
        "item": "{i}）{title}{summary}：还差{what}",
        "none_open": "您没有未完成的任务。我可以帮您办理：{titles}。",
        "help": "我可以帮您办理：{titles}。请问需要什么帮助？",
        "paused": "好的，您的{title}已保存，随时说“继续”即可，换设备也可以。",
        "cannot": "抱歉，现在无法修改：{reason}。",
        "confirmation": "您的确认",
        "change_what": "好的，请问要修改哪一项？",
        "unclear": "抱歉，我没有理解。",
        "changed": "详情在您上次查看后有变动，请再核对一下。",
        "nothing_open": "您没有未完成的{title}。",
        "which": "您是指{a}，还是{b}？（请回复 1 或 2）",
        "a_new": "新的{title}",
        "under_way": "您已有一个类似的{title}在办理中，这是新的一个。",
        "your": "您的{title}{summary}",
        "sep": "，",
    },
}


def words(language: str) -> dict[str, str]:
    return _WORDS.get(language, _WORDS["en"])


_PROBLEMS_ZH = {
    "required": "请提供{label}",
    "form": "“{value}”不是有效的{label}",
    "choice": "“{value}”不在可选的{label}中（{options}）",
    "date": "“{value}”不是我能理解的日期",
    "invalid_date": "“{value}”不是有效的日期",
    "number": "“{value}”不是数字",
    "place": "“{value}”看起来不像地名",
    "name": "“{value}”看起来不像姓名",
    "order": "“{value}”看起来不像订单号",
    "ambiguous": "您给出了不止一个{label}（{options}），是哪一个",
    "unknown": "没有找到{label}“{value}”",
    "too_large": "{label}“{value}”超过了上限（{options}）",
    "too_small": "{label}“{value}”低于下限（{options}）",
    "whole": "{label}要是整数，“{value}”不是",
    "time": "“{value}”不是我能理解的时间",
    "phone": "“{value}”不是有效的电话号码",
    "email": "“{value}”不是有效的邮箱地址",
    "custom": "“{value}”不符合{label}的要求",
}
_LOCKED = {
    "en": {
        "finished": "your {title} is already {status}",
        "effect": "{action} has already been sent, so the details are locked",
        "running": "{action} is being done right now; try again in a moment",
        "took_effect": "{action} has already taken effect",
        "settled": "{action} is already settled",
    },
    "zh": {
        "finished": "您的{title}已经{status}",
        "effect": "{action}已经提交，信息无法再修改",
        "running": "{action}正在办理中，请稍后再试",
        "took_effect": "{action}已经生效，无法撤销",
        "settled": "{action}已经处理完毕",
    },
}
_STATUS_ZH = {"done": "完成", "failed": "失败", "cancelled": "取消"}


def problem(reason: str, slot: Slot | None, language: str) -> str:
    """Why a value was refused, in ``language`` (a Problem says what kind; a bare string is
    only known in English)."""
    code = getattr(reason, "code", None)
    if language != "zh":
        return str(reason)
    label = slot.label("zh") if slot is not None else "这个值"
    value = getattr(reason, "value", None)
    options = [
        slot.display(o, "zh") if slot is not None else o for o in getattr(reason, "options", ())
    ]
    if code is None or (code == "custom" and value is None):
        return f"这个{label}不符合要求"
    return _PROBLEMS_ZH[code].format(label=label, value=value or "", options="、".join(options))


def locked(code: str, template: TaskTemplate, task: Task, action: str | None, language: str) -> str:
    """Why the task cannot take the change, in ``language``."""
    table = _LOCKED.get(language, _LOCKED["en"])
    status = str(task.status)
    if language == "zh":
        status = _STATUS_ZH.get(status, status)
    text = table.get(code, table["effect"])
    what = action.replace("_", " ") if action else template.title(language)
    return text.format(title=template.title(language), status=status, action=what)


def values(template: TaskTemplate, task: Task, language: str) -> str:
    """The filled slots as "label: value" pairs, in template order."""
    w = words(language)
    colon = "：" if language == "zh" else ": "
    return w["sep"].join(
        f"{s.label(language)}{colon}{_shown(s, task.slots[s.name], language)}"
        for s in template.slots
        if task.slots.get(s.name) is not None
    )


def _shown(slot: Slot, value: Any, language: str) -> str:
    """A slot's value in the reply's language: a known city by its name in that language
    (Dubai -> 迪拜 in a Chinese reply; the stored value stays as the user gave it)."""
    if extractor_of(slot) == "place" and isinstance(value, str) and not slot.value_labels:
        return places.in_language(value, language)
    return slot.display(value, language)


def waiting_for(template: TaskTemplate, task: Task, step: NextStep, language: str) -> str:
    if isinstance(step, AskSlot):
        return template.slot(step.slot).label(language)
    return words(language)["confirmation"]


def reply_for(template: TaskTemplate, state: TaskState, step: NextStep, language: str) -> str:
    """What to say after a turn, from the task's next step."""
    task, w, title = state.task, words(language), template.title(language)
    if isinstance(step, AskSlot):
        return template.slot(step.slot).question(language)
    if isinstance(step, AskConfirmation):
        return w["confirm"].format(title=title, values=values(template, task, language))
    if isinstance(step, Finished):
        if step.status == TaskStatus.DONE:
            refs = _references(state)
            return w["done"].format(title=title) + (
                w["reference"].format(ref=", ".join(refs)) if refs else ""
            )
        if step.status == TaskStatus.CANCELLED:
            return w["cancelled"].format(title=title)
        failed = [a for a in state.actions if a.status == ActionStatus.FAILED]
        reason = (failed[0].error or "").split(": ", 1)[-1] if failed else task.status_text
        return w["failed"].format(title=title, reason=reason)
    if isinstance(step, WaitOperator):
        return w["with_operator"].format(title=title, what=template.slot(step.slot).label(language))
    if isinstance(step, NeedsAttention):
        name = state.action(step.seq).name if step.seq is not None else title
        return w["attention"].format(action=name)
    if isinstance(step, WaitUser):
        return task.status_text
    return w["working"].format(title=title, status=task.status_text)


def welcome(template: TaskTemplate, state: TaskState, step: NextStep, language: str) -> str:
    """The first reply on coming back: where the task stands, then its question."""
    task, w = state.task, words(language)
    if not task.status.is_open or not isinstance(step, AskSlot | AskConfirmation):
        return reply_for(template, state, step, language)
    return w["welcome"].format(
        title=template.title(language),
        summary=summary(template, task, language),
        what=waiting_for(template, task, step, language),
    ) + reply_for(template, state, step, language)


def choose(items: list[tuple[TaskTemplate, TaskState, NextStep]], language: str) -> str:
    w = words(language)
    listed = w["sep"].join(
        w["item"].format(
            i=i,
            title=template.title(language),
            summary=summary(template, state.task, language),
            what=waiting_for(template, state.task, step, language),
        )
        for i, (template, state, step) in enumerate(items, 1)
    )
    return w["choose"].format(n=len(items), items=listed)


def summary(template: TaskTemplate, task: Task, language: str) -> str:
    filled = values(template, task, language)
    if not filled:
        return ""
    return f"（{filled}）" if language == "zh" else f" ({filled})"


def _references(state: TaskState) -> list[str]:
    refs = []
    for action in state.actions:
        output: Any = action.output
        if (
            action.kind == ActionKind.STEP
            and action.status == ActionStatus.SUCCESS
            and isinstance(output, dict)
            and isinstance(output.get("id"), str)
        ):
            refs.append(output["id"])
    return refs
