"""How a task type is declared: its slots, its ordered stages and the actions they run."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, overload

from ..errors import InvalidInput, InvalidSlot, TemplateError
from ..inputs import MAX_SAFE_INTEGER, json_value
from ..model import Task
from .contact_forms import e164, email_address
from .fingerprint import fingerprint as _fingerprint
from .next_step import AskConfirmation, AskSlot, NextStep, WaitOperator, WaitUser
from .problems import Problem, custom
from .retry import Retry
from .spec import ActionFn, ActionSpec, InputFn

SLOT_KINDS = (
    "text",
    "choice",
    "date",
    "number",
    "count",
    "time",
    "phone",
    "email",
    "place",
    "person",
)
"""What a slot holds: free ``text``; one of its ``choices``; a ``date`` (YYYY-MM-DD); a
``number`` (an amount, a weight); a ``count`` (a whole number of things: nights, guests); a
``time`` of day (HH:MM, 24 hours); a ``phone`` number (E.164, +8613800138000); an ``email``
address; a ``place`` (a city, by its name in the conversation's language) or a ``person``'s
name (both text, read as such)."""
TEXT_KINDS = ("text", "place", "person")
"""The kinds stored as the text that was said (trimmed)."""
EXTRACTORS = (
    "text",
    "place",
    "person",
    "order_id",
    "amount",
    "number",
    "count",
    "time",
    "phone",
    "email",
    "address",
)
"""How a slot's value may be read from what people say (``Slot(extractor=...)``)."""
FILLED_BY = ("user", "operator")
UPGRADE_POLICIES = ("auto", "pinned")
Migration = Callable[[dict[str, Any]], dict[str, Any]]
"""Lifts a stored task's dict one template version up."""
_ZH_WEEKDAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")


def _has_cjk(text: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" for ch in text)


@dataclass(frozen=True)
class Slot:
    """One piece of information a task needs, with how to ask for it and how to check it.

    ``kind`` says what the value is, and so how it is read from what people say and stored:
    "text" (the default), "choice" (one of ``choices``), "date" (YYYY-MM-DD), "number", "count"
    (a whole number, at least 1), "time" (HH:MM, 24 hours), "phone" (E.164), "email",
    "place" (a city's name) or "person" (a name). Every option is checked when the slot is
    declared, so a typo fails at once, not in a conversation later.
    """

    name: str
    kind: str = "text"
    required: bool = True
    choices: Sequence[str] | None = None
    synonyms: Mapping[str, str] = field(default_factory=dict)
    pattern: str | None = None
    parser: Callable[[Any], Any] | None = None
    ask: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    """What to call this slot in a reply, per language ("date" -> "出发日期")."""
    #: How the value is read from an utterance, when the name, labels and question do not
    #: say it already (see the template guide): for a text slot "text" (free text),
    #: "place", "person", "order_id", "address", "time", "phone", "email", "amount",
    #: "number" or "count"; for a number slot "amount", "number" or "count". Checked when
    #: the template is declared.
    extractor: str | None = None
    #: Language -> words that introduce this slot's value: {"en": ["from"], "zh": ["从"]}.
    #: "{}" marks where the value goes when it comes before the word: "{}出发" (once, at
    #: the start or the end). Declared cues replace the kind's defaults; the slot's name
    #: and labels are always cues too. Checked when the template is declared.
    cues: Mapping[str, Sequence[str]] = field(default_factory=dict)
    #: Language -> value -> what to call it: {"zh": {"economy": "经济舱"}}. Without it a
    #: Chinese reply shows a choice by its first Chinese synonym.
    value_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: Language -> why the task needs this slot, for "why do you need that?".
    why: Mapping[str, str] = field(default_factory=dict)
    #: For a date: "future" (a flight: "June 1" is the next one) or "past" (a purchase:
    #: "June 1" is the last one, and so is "Friday").
    direction: str = "future"
    #: Who gives this slot's value: "user" (asked in the conversation) or "operator" (an
    #: approval, a decision: only an admin scope may fill it, it is never asked nor read from
    #: the user's words, and setting it does not send the task back to be confirmed again;
    #: wait for it with :func:`operator_sets`).
    filled_by: str = "user"
    #: The smallest and largest value a number or count takes (a count is at least 1 unless
    #: said otherwise): ``Slot("guests", kind="count", maximum=8)``.
    minimum: float | None = None
    maximum: float | None = None
    #: For a phone slot, the country a number without +code is read in first ("GB", "CN"):
    #: otherwise the conversation's language decides (zh: CN, then US and GB; en: US, GB, CN).
    region: str | None = None

    def __post_init__(self) -> None:
        if self.choices and self.kind == "text":
            object.__setattr__(self, "kind", "choice")
        if self.kind not in SLOT_KINDS:
            raise TemplateError(f"slot {self.name!r}: kind must be one of {SLOT_KINDS}")
        if self.kind == "choice" and not self.choices:
            raise TemplateError(f"slot {self.name!r}: a choice slot needs choices")
        if self.direction not in ("future", "past"):
            raise TemplateError(f"slot {self.name!r}: direction must be future or past")
        if self.filled_by not in FILLED_BY:
            raise TemplateError(f"slot {self.name!r}: filled_by must be one of {FILLED_BY}")
        if self.filled_by == "operator":
            object.__setattr__(self, "required", False)  # awaited by a condition, not asked
        bounded = self.minimum is not None or self.maximum is not None
        if bounded and self.kind not in ("number", "count"):
            raise TemplateError(
                f"slot {self.name!r}: minimum and maximum are for numbers and counts"
            )
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise TemplateError(f"slot {self.name!r}: minimum is above maximum")
        if self.region is not None and self.kind != "phone":
            raise TemplateError(f"slot {self.name!r}: region is for phone slots")
        if self.region is not None and not re.fullmatch(r"[A-Z]{2}", self.region):
            raise TemplateError(f"slot {self.name!r}: region is a country code such as 'GB'")
        self._check_reading()

    def _check_reading(self) -> None:
        """A typo in how a slot is read fails when the template is declared, not silently
        in a conversation later."""
        if self.extractor is not None:
            if self.extractor not in EXTRACTORS:
                raise TemplateError(
                    f"slot {self.name!r}: extractor must be one of {', '.join(EXTRACTORS)}"
                )
            if self.kind not in ("text", "number") and self.extractor != self.kind:
                raise TemplateError(
                    f"slot {self.name!r}: a {self.kind} slot is read as a {self.kind}; "
                    "extractor is for text and number slots"
                )
            if self.kind == "number" and self.extractor not in ("amount", "number", "count"):
                raise TemplateError(
                    f"slot {self.name!r}: a number slot reads as amount, number or count"
                )
        if not isinstance(self.cues, Mapping):
            raise TemplateError(
                f"slot {self.name!r}: cues maps a language to its words: "
                '{"en": ["from"], "zh": ["从", "{}出发"]}'
            )
        for language, words in self.cues.items():
            listed = [words] if isinstance(words, str) else words
            if not isinstance(language, str) or not isinstance(listed, Sequence):
                raise TemplateError(f"slot {self.name!r}: cues maps a language to a list of words")
            for cue in listed:
                if not isinstance(cue, str) or not cue.replace("{}", "").strip():
                    raise TemplateError(f"slot {self.name!r}: a cue is a non-empty word: {cue!r}")
                marks = cue.count("{}")
                inner = cue.strip().removeprefix("{}").removesuffix("{}")
                if marks > 1 or "{}" in inner or re.search(r"\{\w*\}", inner):
                    raise TemplateError(
                        f"slot {self.name!r}: cue {cue!r}: '{{}}' marks the value once, before "
                        "the words ('{}出发') or after them ('from {}' or just 'from')"
                    )

    def label(self, language: str = "en") -> str:
        """This slot's name for people, in ``language`` if declared."""
        return self.labels.get(language) or self.labels.get("en") or self.name.replace("_", " ")

    def question(self, language: str = "en") -> str:
        """The question that asks for this slot, in ``language`` if declared."""
        if language in self.ask:
            return self.ask[language]
        if "en" in self.ask:
            return self.ask["en"]
        if self.kind == "count":  # "How many guests?", not "What is the guests?"
            return f"How many {self.name.replace('_', ' ')}?"
        return f"What is the {self.name.replace('_', ' ')}?"

    def display(self, value: Any, language: str = "en") -> str:
        """A stored value as a person reads it in ``language``: a choice by its label there,
        a date with its weekday."""
        if value is None:
            return ""
        text = str(value)
        declared = self.value_labels.get(language, {})
        if text in declared:
            return declared[text]
        if self.kind == "choice" and language == "zh":
            native = [s for s, c in self.synonyms.items() if c == text and _has_cjk(s)]
            if native:
                return native[0]
        if self.kind == "date":
            try:
                day = date.fromisoformat(text)
            except ValueError:
                return text
            if language == "zh":
                return f"{day.year}年{day.month}月{day.day}日（{_ZH_WEEKDAYS[day.weekday()]}）"
            return f"{day:%A} {day.day} {day:%B} {day.year}"
        return text

    def validate(self, value: Any) -> Any:
        """Normalise ``value`` to plain JSON, or raise InvalidSlot saying why not."""
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InvalidSlot(self.name, Problem("required", "a value is required"))
        if self.kind == "number" and isinstance(value, str) and value in self.synonyms.values():
            return value  # a word the task completes later ("all": the order's total)
        given = value
        if self.parser is not None:
            try:
                value = self.parser(value)
            except (ValueError, TypeError, OverflowError) as exc:
                reason = custom(str(exc) or "not understood", value=given)
                raise InvalidSlot(self.name, reason) from None
        if self.kind == "choice":
            value = self._choice(value)
        elif self.kind == "date":
            value = self._date(value)
        elif self.kind in ("number", "count"):
            value = self._bounded(self._number(value, given), given)
        elif self.kind == "time":
            value = _time_of_day(self.name, value)
        elif self.kind == "phone":
            value = _phone(self.name, value, self.region)
        elif self.kind == "email":
            value = _email(self.name, value)
        elif isinstance(value, str):
            value = value.strip()
        if self.pattern is not None and not re.fullmatch(self.pattern, str(value)):
            reason = Problem("form", f"{value!r} does not match the expected form", value=value)
            raise InvalidSlot(self.name, reason)
        try:  # plain JSON, every backend alike (the length was checked at the front door)
            json_value(value, f"slot {self.name!r}", limit=sys.maxsize)
        except InvalidInput as exc:
            if self.parser is not None:
                raise TemplateError(f"the parser of {exc}") from None
            raise InvalidSlot(self.name, Problem("form", exc.problem, value=value)) from None
        return value

    def _bounded(self, number: int | float, given: Any) -> int | float:
        """A count is whole (and at least 1 unless declared); either within its bounds."""
        shown = str(number if given is None else given).strip()
        if self.kind == "count":
            if isinstance(number, float) and not number.is_integer():
                reason = Problem("whole", f"{shown!r} is not a whole number", value=shown)
                raise InvalidSlot(self.name, reason)
            number = int(number)
        low = self.minimum if self.minimum is not None else (1 if self.kind == "count" else None)
        if low is not None and number < low:
            limit = _shown(low)
            reason = Problem("too_small", f"{shown} is below {limit}", value=shown, options=[limit])
            raise InvalidSlot(self.name, reason)
        if self.maximum is not None and number > self.maximum:
            limit = _shown(self.maximum)
            reason = Problem("too_large", f"{shown} is above {limit}", value=shown, options=[limit])
            raise InvalidSlot(self.name, reason)
        return number

    def _choice(self, value: Any) -> str:
        assert self.choices is not None
        text = str(value).strip().lower()
        for choice in self.choices:
            if choice.lower() == text:
                return choice
        for synonym, choice in self.synonyms.items():
            if synonym.lower() == text:
                return choice
        reason = Problem(
            "choice",
            f"{value!r} is not one of {', '.join(self.choices)}",
            value=value,
            options=self.choices,
        )
        raise InvalidSlot(self.name, reason)

    def _date(self, value: Any) -> str:
        if isinstance(value, datetime):
            return value.date().isoformat()
        if isinstance(value, date):
            return value.isoformat()
        try:
            return date.fromisoformat(str(value).strip()).isoformat()
        except ValueError:
            reason = Problem("date", f"{value!r} is not a date (YYYY-MM-DD)", value=value)
            raise InvalidSlot(self.name, reason) from None

    def _number(self, value: Any, given: Any = None) -> int | float:
        """A finite number no larger than 2**53 - 1: beyond it a float no longer holds every
        integer, so the amount read back would not be the one given (10**400 becomes inf)."""
        if isinstance(value, bool):
            raise InvalidSlot(
                self.name, Problem("number", f"{value!r} is not a number", value=value)
            )
        if isinstance(value, int | float):
            number: int | float = value
        else:
            try:
                number = float(str(value).strip())
            except ValueError:
                reason = Problem("number", f"{value!r} is not a number", value=value)
                raise InvalidSlot(self.name, reason) from None
        shown = str(value if given is None else given).strip()
        shown = shown if len(shown) <= 24 else shown[:20] + "..."
        if isinstance(number, float) and (
            math.isnan(number) or (math.isinf(number) and not any(c.isdigit() for c in shown))
        ):  # "nan", "inf", "-Infinity": words, not amounts
            reason = Problem("number", f"{shown!r} is not a number", value=shown)
            raise InvalidSlot(self.name, reason)
        if not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:  # inf too
            reason = Problem(
                "too_large",
                f"{shown} is too large (at most {MAX_SAFE_INTEGER:,})",
                value=shown,
                options=[f"{MAX_SAFE_INTEGER:,}"],
            )
            raise InvalidSlot(self.name, reason)
        if isinstance(number, float) and number.is_integer() and not isinstance(value, float):
            return int(number)
        return number


def _shown(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else str(limit)


_CLOCK = re.compile(
    r"(?P<h>[01]?\d|2[0-3])(?:[:：.](?P<m>[0-5]\d)(?::[0-5]\d(?:\.\d+)?)?)?"
    r"(?:\s*(?P<half>[ap])\.?m\.?)?"
)
"""A clock time: 19:30, 7:05, 19:30:00 (seconds dropped), 7:30pm, 7 pm."""


def _time_of_day(slot: str, value: Any) -> str:
    """A time of day as HH:MM (24 hours), from a ``datetime.time`` or a clock text as an
    API caller writes it: "7:05", "19:30", "19:30:00", "7:30pm", "7 pm", "12am"."""
    if isinstance(value, time):
        return f"{value.hour:02d}:{value.minute:02d}"
    m = _CLOCK.fullmatch(str(value).strip().lower())
    hour = int(m["h"]) if m else -1
    if m and m["half"]:
        hour = -1 if not 1 <= hour <= 12 else hour % 12 + (12 if m["half"] == "p" else 0)
    elif m and m["m"] is None:
        hour = -1  # "7" alone: not a clock time
    if not 0 <= hour <= 23:
        reason = Problem("time", f"{value!r} is not a time of day (HH:MM)", value=value)
        raise InvalidSlot(slot, reason)
    assert m is not None  # hour >= 0 only when it matched
    return f"{hour:02d}:{m['m'] or '00'}"


def _phone(slot: str, value: Any, region: str | None) -> str:
    """A phone number in E.164 (+8613800138000); one without +code is read in ``region``
    first, then in CN, US and GB."""
    number = e164(str(value).strip(), [region, "CN", "US", "GB"])
    if number is None:
        reason = Problem("phone", f"{value!r} is not a phone number", value=value)
        raise InvalidSlot(slot, reason)
    return number


def _email(slot: str, value: Any) -> str:
    """An email address, its domain in lower case."""
    address = email_address(str(value))
    if address is None:
        reason = Problem("email", f"{value!r} is not an email address", value=value)
        raise InvalidSlot(slot, reason)
    return address


@dataclass(frozen=True)
class Condition:
    """A named test on a task, with the step that would make it true (what to wait for)."""

    name: str
    met: Callable[[Task], bool]
    need: Callable[[Task], NextStep]


def condition(fn: Callable[[Task], bool]) -> Condition:
    """Turn a predicate into a Condition whose unmet state waits for the user."""
    return Condition(fn.__name__, fn, lambda task: WaitUser(fn.__name__))


all_required_slots = Condition(
    "all_required_slots",
    lambda task: not task.missing_slots,
    lambda task: AskSlot(task.missing_slots[0]),
)
user_confirmed = Condition(
    "user_confirmed", lambda task: task.confirmed, lambda task: AskConfirmation()
)


def operator_sets(slot: str, value: Any) -> Condition:
    """Met once an operator has set ``slot`` (a ``filled_by="operator"`` slot) to ``value``:
    a human approval step. Until then the task waits for an operator (it needs attention,
    so it is in every operator's list of what waits for a person)."""
    return Condition(
        f"{slot}={value}",
        lambda task: task.slots.get(slot) == value,
        lambda task: WaitOperator(slot, value),
    )


@dataclass(frozen=True)
class Stage:
    """One stage of a task: its actions run in order, then ``exit`` must hold to move on.

    A stage whose ``entry`` condition does not hold when the task reaches it is skipped.
    """

    name: str
    actions: Sequence[str] = ()
    exit: Condition | None = None
    entry: Condition | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    """What to call this stage on the dashboard, per language (``{"zh": "确认中"}``)."""

    def label(self, language: str = "en") -> str:
        """This stage's name for people, in ``language`` if declared."""
        return self.labels.get(language) or self.labels.get("en") or self.name.replace("_", " ")


class TaskTemplate:
    """A task type: slots, ordered stages and the actions those stages run.

    :attr:`fingerprint` identifies this definition of the type and version: a sha256 over
    a canonical JSON of what decides behaviour (slots with their kinds, required, choices
    and checks; the stages in order with their actions and conditions; each action's name
    and idempotency declarations), the same in every process and Python run. Every Task
    records the fingerprint of the definition that made it, and a process whose definition
    of the same type and version has another one refuses to write that Task
    (:class:`~relaystate.errors.TemplateMismatch`): change a template's behaviour under a
    new ``version`` with a migration. See :mod:`relaystate.task.fingerprint`.
    """

    def __init__(
        self,
        type: str,
        *,
        version: int = 1,
        slots: Iterable[Slot] = (),
        stages: Iterable[Stage] = (),
        goal: str = "",
        titles: Mapping[str, str] | None = None,
        triggers: Mapping[str, Sequence[str]] | None = None,
        keywords: Mapping[str, Sequence[str]] | None = None,
        opening_slot: str | None = None,
        upgrade: str = "auto",
    ) -> None:
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise TemplateError(f"template {type!r}: version must be a whole number >= 1")
        if upgrade not in UPGRADE_POLICIES:
            raise TemplateError(f"template {type!r}: upgrade must be one of {UPGRADE_POLICIES}")
        self.type = type
        self.version = version
        self.upgrade = upgrade
        """"auto": a build that knows a newer version lifts the task through its migrations
        and any build may continue it; "pinned": the task runs to its end on the version and
        the build that started it."""
        self.migrations: dict[int, Migration] = {}
        """Version N -> how to lift a stored task of version N to N + 1."""
        self.slots = list(slots)
        self.stages = list(stages)
        self.goal = goal
        self.titles = dict(titles or {})
        """What to call a task of this type in each language ("flight booking", "机票预订")."""
        self.triggers = {lang: list(words) for lang, words in (triggers or {}).items()}
        """Words per language that start a new task of this type ("book a flight", "订机票")."""
        self.keywords = {lang: list(words) for lang, words in (keywords or {}).items()}
        """Words that name this kind of task without saying anything about the case ("repair",
        "售后", "手机"): they bring back an open one, and are never taken as a slot's value."""
        self.opening_slot = opening_slot
        """A slot the opening utterance itself fills ("my phone won't charge" -> symptoms)."""
        self.actions: dict[str, ActionSpec] = {}
        if not self.stages:
            raise TemplateError(f"template {type!r} needs at least one stage")
        for kind, names in (
            ("slot", [s.name for s in self.slots]),
            ("stage", [s.name for s in self.stages]),
        ):
            dupes = {n for n in names if names.count(n) > 1}
            if dupes:
                raise TemplateError(f"template {type!r}: duplicate {kind} names {sorted(dupes)}")

    @overload
    def action(self, fn: ActionFn, /) -> ActionSpec: ...

    @overload
    def action(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        side_effect: bool = False,
        idempotent: bool = False,
        retry: Retry | None = None,
        timeout: float | None = None,
        input: InputFn | None = None,
    ) -> Callable[[ActionFn], ActionSpec]: ...

    def action(
        self,
        fn: ActionFn | None = None,
        /,
        *,
        name: str | None = None,
        side_effect: bool = False,
        idempotent: bool = False,
        retry: Retry | None = None,
        timeout: float | None = None,
        input: InputFn | None = None,
    ) -> ActionSpec | Callable[[ActionFn], ActionSpec]:
        """Register an action of this task type (usable bare or with options)."""

        def register(f: ActionFn) -> ActionSpec:
            spec = ActionSpec(
                name or f.__name__,
                f,
                side_effect=side_effect,
                idempotent=idempotent,
                retry=retry or Retry(),
                timeout=timeout,
                input=input,
            )
            if spec.name in self.actions:
                raise TemplateError(f"template {self.type!r}: action {spec.name!r} declared twice")
            self.actions[spec.name] = spec
            return spec

        return register(fn) if fn is not None else register

    def migration(self, *, from_version: int) -> Callable[[Migration], Migration]:
        """Register how a stored task of ``from_version`` becomes one of ``from_version + 1``:
        a function of the task's dict (slots, stage, context...) returning the new dict."""
        if not isinstance(from_version, int) or not 1 <= from_version < self.version:
            raise TemplateError(
                f"template {self.type!r} version {self.version}: a migration lifts an older "
                f"version (1 to {self.version - 1}), not {from_version!r}"
            )

        def register(fn: Migration) -> Migration:
            if from_version in self.migrations:
                raise TemplateError(
                    f"template {self.type!r}: two migrations from version {from_version}"
                )
            self.migrations[from_version] = fn
            return fn

        return register

    @property
    def fingerprint(self) -> str:
        """This definition's fingerprint (``v1:`` + 64 hex digits); computed when asked,
        so actions, checks and compensations declared after construction count."""
        return _fingerprint(self)

    def title(self, language: str = "en") -> str:
        """This task type's name for people, in ``language`` if declared."""
        return self.titles.get(language) or self.titles.get("en") or self.type.replace("_", " ")

    def slot(self, name: str) -> Slot:
        for s in self.slots:
            if s.name == name:
                return s
        raise TemplateError(f"template {self.type!r} has no slot {name!r}")

    def stage_index(self, name: str) -> int:
        for i, s in enumerate(self.stages):
            if s.name == name:
                return i
        raise TemplateError(f"template {self.type!r} has no stage {name!r}")

    def spec(self, name: str) -> ActionSpec:
        try:
            return self.actions[name]
        except KeyError:
            raise TemplateError(f"template {self.type!r} has no action {name!r}") from None

    @property
    def planned_actions(self) -> int:
        """How many step actions a task of this type runs when it goes all the way."""
        return sum(len(s.actions) for s in self.stages)

    def validate(self) -> None:
        """Check that every stage's actions are declared; raised at registration time."""
        for stage in self.stages:
            for name in stage.actions:
                if name not in self.actions:
                    raise TemplateError(
                        f"template {self.type!r}: stage {stage.name!r} runs undeclared "
                        f"action {name!r}"
                    )
