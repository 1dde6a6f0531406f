"""The language-model interface: understanding and phrasing only, never deciding.

Deterministic code decides what a task does next. A model, when one is configured, is asked
four narrow questions, and every answer is optional:

- ``route``: which task an ambiguous input belongs to (the rules could not tell);
- ``extract``: which slot values a free-text message states;
- ``summarize``: a short summary of older turns, for working memory;
- ``rephrase``: a more natural wording of a reply the templates already produced.

``None`` always means "no usable answer": the caller then does what it does with no model at
all (asks the user, keeps its own summary, sends the template reply). So an implementation must
never raise into a turn and never hand back anything it has not checked; the offline
``RuleModel`` simply declines everything, and the runtime still works.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol, runtime_checkable

from ..errors import TemplateError
from ..task.templates import SLOT_KINDS, Slot


@dataclass(frozen=True)
class RouteCandidate:
    """A task (or task template) an input might belong to, described for a model to choose.

    ``id`` is whatever the caller routes by (a task id, or a template type for a new intent);
    ``description`` is one line a reader would recognise it by, e.g. "book a flight".
    """

    id: str
    description: str


@dataclass(frozen=True)
class RouteChoice:
    """A model's pick among the candidates, with its own confidence in [0, 1].

    The confidence is the model's self-report, not a calibrated probability: callers use it
    only to decide whether to act on the pick or ask the user which task was meant.
    """

    id: str
    confidence: float


@dataclass(frozen=True)
class SlotSpec:
    """What a model needs to know about one slot to extract it from free text.

    ``kind`` is a slot kind of ``templates.SLOT_KINDS``; a ``choice`` slot lists its
    ``choices``, and a value outside them is rejected. Values a model extracts are plain JSON
    (dates as ``YYYY-MM-DD``) and still go through ``Slot.validate`` like any user input.
    """

    name: str
    kind: str = "text"
    description: str = ""
    choices: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if self.choices and self.kind == "text":
            object.__setattr__(self, "kind", "choice")
        if self.kind not in SLOT_KINDS:
            raise TemplateError(f"slot {self.name!r}: kind must be one of {SLOT_KINDS}")
        if self.kind == "choice" and not self.choices:
            raise TemplateError(f"slot {self.name!r}: a choice slot needs choices")

    @classmethod
    def from_slot(cls, slot: Slot, *, language: str = "en", description: str = "") -> SlotSpec:
        """The spec of a template's slot; its question serves as the description by default."""
        return cls(
            slot.name,
            slot.kind,
            description or slot.question(language),
            tuple(slot.choices or ()),
        )


@runtime_checkable
class Model(Protocol):
    """A language model used for understanding and phrasing; every method may decline.

    Implementations never raise into a turn: a failure (unreachable, slow, malformed, off
    schema, refused) is logged and reported as ``None``, or for ``rephrase`` as the reply it
    was given, unchanged.
    """

    def route(
        self, text: str, candidates: Sequence[RouteCandidate], *, language: str
    ) -> RouteChoice | None:
        """Which candidate ``text`` belongs to, or None when that cannot be told.

        Called only when the deterministic rules found the input ambiguous; the returned id
        is always one of the candidates' ids.
        """
        ...

    def extract(
        self, text: str, slots: Sequence[SlotSpec], *, language: str, today: date
    ) -> dict[str, Any] | None:
        """The values ``text`` states for ``slots``, by slot name, as plain JSON.

        Slots the text does not mention are absent from the dict, so ``{}`` means "understood,
        nothing stated" while None means "no usable answer". ``today`` anchors relative dates
        ("tomorrow") to the user's calendar day.
        """
        ...

    def summarize(self, texts: Sequence[str], *, language: str, max_words: int) -> str | None:
        """A summary of ``texts`` of at most ``max_words`` words, or None to keep one's own."""
        ...

    def rephrase(self, reply: str, *, language: str) -> str:
        """``reply`` worded more naturally, with every fact kept; ``reply`` itself on any doubt.

        The reply comes from the templates, which say exactly what the machine decided; a
        rewording may change tone, never content.
        """
        ...
