"""Questions about the Task at hand, answered from its state: "why do you need that?",
"what's my destination?", "退多少来着？", "这个怎么填？", "help".

The answer never changes the Task; it says what the Task holds or needs, then asks its
question again, so the conversation goes on where it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..model import TaskState
from ..task.next_step import AskConfirmation, AskSlot, NextStep
from ..task.templates import Slot, TaskTemplate
from .extract import extractor_of
from .intents import is_question
from .text import fold, phrases

_WHY = re.compile(
    r"(?<![a-z])(?:why|what for|how come|do i (?:have|need) to|must i|is it necessary)(?![a-z])"
    r"|为什么|为啥|干嘛|干什么用|有什么用|凭什么|一定要|必须|非得|需要.*吗"
)
_HELP = phrases(
    [
        "help",
        "how do i",
        "how should i",
        "what do you need",
        "what should i",
        "i don't know what",
        "what does that mean",
        "帮助",
        "怎么填",
        "怎么写",
        "怎么弄",
        "怎么办",
        "什么意思",
        "不知道填什么",
        "要填什么",
        "需要什么",
    ]
)
#: Question words that point at a kind of slot when its name is not said.
_KIND_HINTS = {
    "amount": re.compile(r"how much|多少钱|多少|金额"),
    "number": re.compile(r"how many|how much|多少"),
    "date": re.compile(r"(?<![a-z])when(?![a-z])|what day|which day|什么时候|哪天|几号|日期"),
    "place": re.compile(r"(?<![a-z])where(?![a-z])|哪里|哪儿|去哪"),
    "person": re.compile(r"(?<![a-z])who(?![a-z])|谁|名字"),
    "order_id": re.compile(r"which order|what order|哪个订单|订单号"),
}
_WORDS = {
    "en": {
        "why": "I need the {label} to complete your {title}.",
        "value": "Your {label} is {value}.",
        "none": "I don't have your {label} yet.",
        "help": "Right now I need your {label}.",
        "help_confirm": "Everything is filled in; I only need your confirmation.",
    },
    "zh": {
        "why": "需要{label}才能办理您的{title}。",
        "value": "您的{label}是{value}。",
        "none": "还没有您的{label}。",
        "help": "现在需要您提供{label}。",
        "help_confirm": "信息都已填好，只需要您确认。",
    },
}


@dataclass(frozen=True)
class Question:
    """What a message asks about the Task: "why" a slot is needed, a slot's "value", or
    "help" with what to answer now."""

    kind: str
    slot: Slot | None


def read(text: str, template: TaskTemplate, step: NextStep) -> Question | None:
    """The question ``text`` asks about a Task of ``template`` waiting at ``step``, or None
    when it is not a question about it."""
    folded = " ".join(fold(text).split())
    asked = template.slot(step.slot) if isinstance(step, AskSlot) else None
    mentioned = slot_named(template, folded)
    if _WHY.search(folded) and (is_question(text) or "?" in text or "？" in text):
        return Question("why", mentioned or asked)
    if _HELP.search(folded):
        return Question("help", asked)
    if not is_question(text) and not re.search(r"来着|again", folded):
        return None
    if mentioned is not None:
        return Question("value", mentioned)
    return None


def answer(
    question: Question, template: TaskTemplate, state: TaskState, step: NextStep, language: str
) -> str:
    """The answer, from the Task's state, in ``language`` (then the engine asks again)."""
    w = _WORDS.get(language, _WORDS["en"])
    slot, title = question.slot, template.title(language)
    if question.kind == "why":
        if slot is None:
            return w["help_confirm"] if isinstance(step, AskConfirmation) else ""
        declared = slot.why.get(language) or slot.why.get("en")
        return declared or w["why"].format(label=slot.label(language), title=title)
    if question.kind == "help":
        if slot is None:
            return w["help_confirm"] if isinstance(step, AskConfirmation) else ""
        return w["help"].format(label=slot.label(language))
    assert slot is not None
    value = state.task.slots.get(slot.name)
    if value is None:
        return w["none"].format(label=slot.label(language))
    return w["value"].format(label=slot.label(language), value=slot.display(value, language))


def slot_named(template: TaskTemplate, folded: str) -> Slot | None:
    """The slot a (folded) message names: by its label or name, else by the kind of thing it
    asks about ("who", "名字", "when")."""
    for slot in template.slots:
        words = {fold(label) for label in slot.labels.values()} | {
            slot.name.replace("_", " "),
            *(w for w in slot.name.split("_") if len(w) >= 4),
        }
        if any(w and w in folded for w in words):
            return slot
    for slot in template.slots:
        hint = _KIND_HINTS.get(extractor_of(slot))
        if hint is not None and hint.search(folded):
            return slot
    return None
