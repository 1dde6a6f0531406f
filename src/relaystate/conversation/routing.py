"""Which Task a message belongs to, by evidence, state first.

Every open Task of the session is a candidate, and so is a new Task of every template.
Each gets a score from what the message says about it:

* a Task waiting for an answer: the message fills the slot it asked for (a value found by a
  pattern, a cue, a date, a choice or an amount is strong evidence; the bare rest of the
  message is weaker), answers its confirmation (yes/no), changes one of its slots, or names
  it (its title, its trigger words, one of its identifying values such as an order number);
  waiting gives it a head start: an answer is not taken for a new request;
* a new Task: its trigger words, a request ("I want", "帮我"), the slot values the message
  carries for it ("a ticket to Osaka for the 3rd"); an open Task of the same type already
  here takes precedence unless the message asks for another one.

The best candidate wins when it is clearly ahead; when two are close the engine asks which.
Every candidate keeps the reasons of its score, so a Turn can say why it went where it went.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from ..model import TaskState, TaskStatus
from ..task.next_step import AskConfirmation, AskSlot, NextStep
from ..task.templates import Slot, TaskTemplate
from .extract import Extraction, extract, template_words
from .intents import REQUEST as _REQUEST
from .intents import is_correction, is_no, is_yes
from .questions import slot_named
from .text import fold, phrases

MIN_SCORE = 1.5
"""Below this nothing is said about any task: the engine offers what it can do."""
CLOSE = 0.75
"""Two candidates closer than this (and different) are asked about, not guessed."""
STRONG = frozenset({"pattern", "cue", "loose", "number"})
"""How a value was found when the message plainly says it (not just its leftover words)."""

_ANOTHER = phrases(
    [
        "another",
        "a new",
        "new one",
        "one more",
        "a second",
        "also",
        "as well",
        "too",
        "different",
        "再",
        "又",
        "另",
        "另外",
        "新的",
        "还要",
        "还想",
        "也要",
        "也想",
    ]
)


@dataclass(frozen=True)
class OpenTask:
    """An open Task as routing weighs it: its state, the template it runs on and its next
    step, as the runtime gives them (routing reads values, it calls nothing back)."""

    state: TaskState
    template: TaskTemplate
    step: NextStep


@dataclass
class Candidate:
    """One place a message could go, with its score and the reasons for it."""

    template: TaskTemplate
    state: TaskState | None
    """The open Task, or None for a new Task of ``template``."""
    extraction: Extraction
    step: NextStep | None = None
    score: float = 0.0
    reasons: list[str] = field(default_factory=list)
    resume_only: bool = False
    """The message names this Task but says nothing new for it: go back to it."""

    @property
    def key(self) -> str:
        return self.state.task.id if self.state is not None else f"new:{self.template.type}"

    def add(self, points: float, why: str) -> None:
        self.score += points
        self.reasons.append(f"{why} ({points:+g})")

    def explain(self) -> str:
        what = (
            f"open {self.template.type} {self.state.task.id[:8]}"
            if self.state is not None
            else f"new {self.template.type}"
        )
        return f"{what}: score {self.score:g}: " + "; ".join(self.reasons)


def rank(
    text: str,
    *,
    here: Sequence[OpenTask],
    templates: Sequence[TaskTemplate],
    language: str,
    today: date,
) -> list[Candidate]:
    """Every candidate for ``text``, best first: the open Tasks ``here`` and a new Task of
    each of ``templates``."""
    folded = fold(text)
    out: list[Candidate] = []
    open_of: dict[str, list[TaskState]] = {}
    others = {t.type: names(t, folded) for t in templates}
    for task in here:
        open_of.setdefault(task.template.type, []).append(task.state)
        elsewhere = any(v for k, v in others.items() if k != task.template.type)
        out.append(_score_open(text, folded, task, language, today, elsewhere))
    _asked_last(out)
    another = bool(_ANOTHER.search(folded))
    for template in templates:
        out.append(_score_new(text, folded, template, open_of, another, language, today))
    out.sort(key=lambda c: c.score, reverse=True)
    return out


def _wrong_way(slot: Slot, value: object, today: date) -> bool:
    """Whether a date lies on the other side of today than its slot looks (a past day for
    a booking, a day to come for something that happened)."""
    if slot.kind != "date" or not isinstance(value, str):
        return False
    try:
        day = date.fromisoformat(value)
    except ValueError:
        return False
    return day < today if slot.direction == "future" else day > today


def _asked_last(candidates: list[Candidate]) -> None:
    """Of the open Tasks the message says something to, the one that spoke last has the
    edge when the message answers its question: "2 of us" after "How many people?" answers
    that Task, not an older one that also counts people."""
    told = [c for c in candidates if c.state is not None and c.extraction.values]
    if len(told) < 2:
        return
    latest = max(told, key=_updated)
    pointed = ("named", "mentions its")  # "回到Bangkok那个", "anyway the pixel": that one
    if any(r.startswith(pointed) for c in told if c is not latest for r in c.reasons):
        return
    step = latest.step
    waiting = latest.state is not None and latest.state.task.status == TaskStatus.WAITING_USER
    found = latest.extraction
    plainly = isinstance(step, AskSlot) and found.sources.get(step.slot) in STRONG
    if waiting and plainly:  # a value plainly said, not the rest of the message
        latest.add(0.8, "asked last")


def _updated(c: Candidate) -> str:
    return c.state.task.updated_at.isoformat() if c.state is not None else ""


def decide(candidates: Sequence[Candidate]) -> tuple[Candidate | None, Candidate | None]:
    """The winner, or None when nothing scores enough; and a runner-up too close to call."""
    if not candidates or candidates[0].score < MIN_SCORE:
        return None, None
    best = candidates[0]
    close = next(
        (
            c
            for c in candidates[1:]
            if c.score >= MIN_SCORE and best.score - c.score < CLOSE and c.key != best.key
        ),
        None,
    )
    return best, close


def names(template: TaskTemplate, folded: str) -> list[str]:
    """The words of ``folded`` that name ``template`` (its titles, keywords and triggers)."""
    return [word for word in template_words(template) if contains(folded, word)]


_PLAIN_TITLE = frozenset(
    [
        "booking",
        "reservation",
        "request",
        "service",
        "order",
        "form",
        "the",
        "and",
        "for",
        "of",
        "new",
        "my",
        "a",
        "an",
        "online",
    ]
)


def title_words(template: TaskTemplate, folded: str) -> list[str]:
    """The words of ``template``'s English title and of its slots' names that ``folded``
    says ("table" of "table reservation", "room" of room_type, "car" of "car rental"): weak
    evidence that a message without a trigger asks for it."""
    words = {w for t in template.titles.values() if t.isascii() for w in fold(t).split()}
    words |= {w for s in template.slots for w in s.name.lower().split("_") if len(w) >= 4}
    words = {w for w in words if len(w) >= 3 and w not in _PLAIN_TITLE and w not in _SLOT_WORDS}
    return sorted(w for w in words if contains(folded, w))


_SLOT_WORDS = frozenset(
    [
        "name",
        "date",
        "time",
        "type",
        "number",
        "city",
        "phone",
        "email",
        "address",
        "size",
        "kind",
        "day",
        "days",
        "note",
        "notes",
    ]
)
"""Slot-name words too common to name a task."""


def contains(folded: str, word: str) -> bool:
    """Whether ``word`` is in ``folded`` (as a whole word, when it is ASCII)."""
    if word.isascii():
        return word in folded and _whole(word).search(folded) is not None
    return word in folded


@functools.lru_cache(maxsize=4096)
def _whole(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z]){re.escape(word)}(?![a-z])")


def _score_open(
    text: str,
    folded: str,
    open_task: OpenTask,
    language: str,
    today: date,
    names_another: bool,
) -> Candidate:
    state, template, step = open_task.state, open_task.template, open_task.step
    expecting = step.slot if isinstance(step, AskSlot) else None
    confirming = isinstance(step, AskConfirmation)
    if is_correction(text):
        # "名字打错了，是张伟", "the name's wrong, it's...", "osaka not tokyo", "80 not 100"
        named_slot = slot_named(template, folded) if confirming else None
        corrected = _corrected(template, state, folded) or (
            named_slot.name if named_slot is not None else None
        )
        if corrected is not None:
            expecting = corrected
    found = extract(
        template,
        text,
        language=language,
        today=today,
        expecting=expecting,
        confirming=confirming,
        held=state.task.slots,
    )
    c = Candidate(template, state, found, step)
    task = state.task
    named = names(template, folded)
    if task.status == TaskStatus.WAITING_USER:
        c.add(1.0, "waits for the user")
    if named:
        c.add(2.0, f"named ({', '.join(named)})")
    correcting = is_correction(text)
    news = 0  # values the Task does not hold yet
    for slot_name, value in found.values.items():
        source = found.sources.get(slot_name, "cue")
        current = task.slots.get(slot_name)
        if slot_name == expecting:
            news += 1
            if source in STRONG:
                c.add(3.0, f"answers {slot_name}")
            elif _only_names(found, slot_name, named):
                c.resume_only = True
            else:
                c.add(
                    2.0 if template.slot(slot_name).kind == "text" else 1.5,
                    f"answers {slot_name} (rest of the message)",
                )
            continue
        if source not in STRONG:
            continue
        if source == "loose" and names_another and not named:
            continue  # "and a hotel in Boston for tonight": tonight is the hotel's, not ours
        if current is None:
            news += 1
            c.add(1.5, f"gives {slot_name}")
        elif current == value:
            c.add(1.5, f"mentions its {slot_name}")
        elif template.slot(slot_name).pattern is not None and not correcting:
            c.add(-3.0, f"another {slot_name} than its own")
        else:
            news += 1
            c.add(2.5, f"changes {slot_name}")
    failed = expecting is not None and expecting not in found.values and expecting in found.errors
    if failed and not named and not names_another:
        c.add(1.0, f"answers {expecting}, with a value it cannot take")
    if isinstance(step, AskConfirmation) and (is_yes(text) or is_no(text)):
        c.add(3.0, "answers its confirmation")
    for slot_name, value in task.slots.items():  # "back to the Chengdu trip", "ORD-10003"
        held = fold(str(value)) if isinstance(value, str) else ""
        if len(held) >= 2 and slot_name not in found.values and contains(folded, held):
            c.add(1.5, f"mentions its {slot_name} ({value})")
    if named and not news and not isinstance(step, AskConfirmation):
        c.resume_only = True  # "my refund please", "refund for ORD-10001" (its own order)
    return c


def _corrected(template: TaskTemplate, state: TaskState, folded: str) -> str | None:
    """The slot a correction takes back by repeating its value ("不是张三，是张珊", "osaka not
    tokyo", "80 not 100"), when exactly one slot's value is repeated."""
    held = []
    for name, value in state.task.slots.items():
        said = fold(str(value))
        if isinstance(value, bool) or not said or template.slot(name).pattern is not None:
            continue
        if said.isascii():
            found = re.search(rf"(?<![a-z0-9]){re.escape(said)}(?![a-z0-9])", folded)
        else:
            found = re.search(re.escape(said), folded)
        if found:
            held.append(name)
    return held[0] if len(held) == 1 else None


def _only_names(found: Extraction, slot_name: str, named: Sequence[str]) -> bool:
    """Whether the leftover words taken as an answer only name the task ("my refund please")."""
    rest = fold(str(found.values[slot_name]))
    for word in named:
        rest = rest.replace(word, " ")
    rest = re.sub(
        r"(?<![a-z])(?:my|the|a|an|for|please|about|that|this|again|on)(?![a-z])", " ", rest
    )
    rest = re.sub(r"[我的那个这个关于请吧呢啊呀了一下]", " ", rest)
    return not re.sub(r"[\W_]+", "", rest)


def _score_new(
    text: str,
    folded: str,
    template: TaskTemplate,
    open_of: dict[str, list[TaskState]],
    another: bool,
    language: str,
    today: date,
) -> Candidate:
    found = extract(template, text, language=language, today=today, opening=True)
    c = Candidate(template, None, found)
    named = names(template, folded)
    triggered = [w for w in named if w in _triggers(template)]
    if triggered:
        c.add(2.0, f"asked for ({', '.join(triggered)})")
    elif not named and (titled := title_words(template, folded)):
        c.add(1.0, f"a word of its name ({', '.join(titled)})")  # "table for two at 8"
    elif template.opening_slot and describes(template, text):
        # "手机一直卡", "my pixel 9 stopped charging": what the Task is about, described
        if named:
            c.add(1.5, f"describes its {', '.join(named)}")
        elif any(template.slot(n).kind == "choice" for n in found.values):
            c.add(1.0, "describes one of its choices")
    strong = [n for n, s in found.sources.items() if s in STRONG]
    backwards = [n for n in strong if _wrong_way(template.slot(n), found.values[n], today)]
    if backwards:  # "last night" for a ride to book, "next week" for a loss: not this task
        c.add(-1.0, f"a date the wrong way for {', '.join(backwards)}")
        strong = [n for n in strong if n not in backwards]
    loose = [n for n in strong if found.sources[n] == "loose"]
    specific = [n for n in loose if template.slot(n).kind == "choice"]  # a model, a cabin
    evidence = [n for n in strong if n not in loose] + specific
    loose = [n for n in loose if n not in specific]
    if evidence:
        c.add(min(len(evidence), 3) * 1.0, f"gives {', '.join(evidence)}")
    if loose:
        c.add(0.5 * min(len(loose), 2), f"could use {', '.join(loose)}")
    if triggered and _requests(folded):
        c.add(1.5, "a clear request")
    elif evidence and _REQUEST.search(folded):  # 这个订单我不想要了 ORD-10001: still asks
        c.add(0.5, "a request")
    same = open_of.get(template.type, [])
    if same and not another and not all(contradicts(template, s, found) for s in same):
        c.add(-2.0, "one is open already")
    elif same and (triggered or evidence):
        c.add(0.5, "another one (asked for, or different values)")
    elif open_of and another and (triggered or evidence):
        c.add(0.5, "asks for something more")
    return c


_NEGATED = re.compile(r"(?:n't|(?<![a-z])(?:not|no|never)|不|别|没)\s*$")


def _requests(folded: str) -> bool:
    """Whether the message asks for something: a request word not negated ("I don't need it
    anymore", 不需要了 explain; they do not ask)."""
    return any(not _NEGATED.search(folded[: m.start()]) for m in _REQUEST.finditer(folded))


def describes(template: TaskTemplate, text: str) -> bool:
    """Whether an opening message says more than "I need a repair" (its keywords and a
    request): then all of it describes the case ("my phone won't charge")."""
    folded = fold(text)
    words = [
        *(w for ws in template.keywords.values() for w in ws),
        *(w for ws in template.triggers.values() for w in ws),
        *template.titles.values(),
    ]
    for word in sorted({fold(w) for w in words if w}, key=len, reverse=True):
        folded = folded.replace(word, " ")
    folded = _REQUEST.sub(" ", folded)
    folded = re.sub(
        r"(?<![a-z])(?:a|an|the|my|to|for|please|get|it|i|i'd|i'm|some|with|help|make|file|"
        r"open|start|submit|new|want|need|like|would|can|could|要|我|的|了|一下|帮|想|申请|办)"
        r"(?![a-z])",
        " ",
        folded,
    )
    return bool(re.sub(r"[\W_]+", "", folded))


def _triggers(template: TaskTemplate) -> set[str]:
    return {fold(w) for ws in template.triggers.values() for w in ws}


def asks_for_another(text: str) -> bool:
    """Whether the message asks for another Task of a kind ("another refund", "再订一张")."""
    return bool(_ANOTHER.search(fold(text)))


def contradicts(template: TaskTemplate, state: TaskState, found: Extraction) -> bool:
    """Whether the message gives an identifying value (a slot with a pattern, such as an
    order number) or any value that differs from what the open Task holds."""
    for name, value in found.values.items():
        current = state.task.slots.get(name)
        if current is not None and current != value and found.sources.get(name) in STRONG:
            return True
    return False
