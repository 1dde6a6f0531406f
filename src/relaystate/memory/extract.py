"""Facts a chat model extracts from memory items when they are written, checked against the
turn each cites before they enter the memory graph.

A model reads a batch of turns (id, speaker, time, text) and answers JSON facts
``{"subject", "predicate", "object", "valid_from", "valid_until", "turn"}``. Nothing it says
is trusted: a fact must cite one of the turns it was sent, have a non-empty subject,
predicate and object of bounded length, dates that parse, and every name-ish token (a word
with an upper-case letter, any Chinese, Japanese or Korean run) and every number of its
subject and object must occur in the cited turn (its text or its speaker), compared
Unicode-normalised (NFKC), case-folded and with Traditional Chinese folded to Simplified.
A refused fact is counted and logged (debug), never written. A batch the model gives no
usable answer for (a timeout, an HTTP error, no JSON, the wrong shape) yields no facts and
one warning; the caller goes on: writing memories never fails because of the model.

The facts are edges of :class:`~relaystate.memory.graph.MemoryGraph` (not ``single``: a new
fact never closes another), their ``source`` ``extracted:TURN`` so each can be traced to
the turn it came from; re-running over the same turns writes nothing new. Facts that
task slots derive (:mod:`relaystate.memory.working`, the recorder) are not touched here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import ConfigError, InvalidInput
from ..model import Fact, MemoryItem
from ..specs import read_spec
from ..store.scripts import fold
from ..store.terms import CJK_RUN

if TYPE_CHECKING:
    from ..llm.openai import OpenAICompatibleModel
    from .graph import MemoryGraph

log = logging.getLogger(__name__)

ENV_EXTRACTOR = "RELAYSTATE_EXTRACTOR"
"""The extractor spec used when none is given (``none`` or unset: no extraction)."""
ENV_EXTRACTOR_API_KEY = "RELAYSTATE_EXTRACTOR_API_KEY"
"""The API key of an ``openai:MODEL@BASE_URL`` extractor, if its server needs one."""
FACT = "~fact"
"""The namespace suffix of fact documents (:func:`fact_items`): ``NAMESPACE~fact``."""
SOURCE = "extracted:"
"""How a written fact's ``source`` starts; the cited turn's id follows."""
_UNTIL = " until="
MAX_PART = 200
"""Longest subject or object (characters): a fact is a short statement, not a passage."""
MAX_PREDICATE = 100
BATCH = 20
"""Turns one question carries."""

_CJK = CJK_RUN.pattern.removeprefix("[").removesuffix("]+")
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+(?:['’][^\W_{_CJK}]+)*")
"""A CJK run, or a word of other letters and digits (订单号JD2024 is 订单号 and JD2024)."""
_POSSESSIVE = re.compile(r"['’]s$")
_DIGITS = re.compile(r"[0-9]+")
_GROUPED = re.compile(r"(?<=[0-9])[,_](?=[0-9]{3}(?![0-9]))")
"""A thousands separator: 1,200 and 1200 are one number."""


@dataclass(frozen=True)
class ExtractedFact:
    """One fact an extractor proposes: ``subject predicate object``, valid from
    ``valid_from`` until ``valid_until`` (each None when unsaid), stated by the memory item
    ``turn``. ``problem`` says why an extractor could not read the fact it was given (a date
    that does not parse): such a fact is refused, and counted."""

    subject: str
    predicate: str
    object: str
    valid_from: date | datetime | None = None
    valid_until: date | datetime | None = None
    turn: str = ""
    problem: str | None = None


class FactExtractor(Protocol):
    """Facts stated by a batch of memory items. An extractor that gets no usable answer for
    the batch raises :class:`ExtractionFailed` (or any exception: the batch is then
    skipped with a warning); each fact it returns is checked again before it is written."""

    def extract(self, items: Sequence[MemoryItem]) -> list[ExtractedFact]: ...


class NoExtraction:
    """The default: no model, no facts."""

    def extract(self, items: Sequence[MemoryItem]) -> list[ExtractedFact]:
        return []


class ExtractionFailed(Exception):
    """A batch gave no usable answer; the message says why (with any API key masked)."""


@dataclass
class ExtractionReport:
    """What :func:`extract_into_graph` did: facts ``written`` into the graph, ``already``
    held by it (a re-run), ``refused`` by the checks, ``failed_batches`` that gave no
    answer; ``facts`` every accepted fact (written or already held), in order."""

    user_id: str
    written: int = 0
    already: int = 0
    refused: int = 0
    failed_batches: int = 0
    batches: int = 0
    facts: list[ExtractedFact] = field(default_factory=list)


# -- the model ---------------------------------------------------------------------------


_DATE = {"type": ["string", "null"]}
FACTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "predicate": {"type": "string"},
                    "object": {"type": "string"},
                    "valid_from": _DATE,
                    "valid_until": _DATE,
                    "turn": {"type": "string"},
                },
                "required": ["subject", "predicate", "object", "valid_from", "valid_until", "turn"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}
"""The answer asked for (a strict ``json_schema`` response format), and checked."""

SYSTEM = (
    "You extract facts from conversation turns for a memory graph. The user sends a JSON "
    'array of turns, each {"id", "speaker", "time", "text"}. Answer with every fact the '
    "turns state about people, places, things and events, one short statement each: "
    '{"subject", "predicate", "object", "valid_from", "valid_until", "turn"}. Subject and '
    "object are names or short phrases copied exactly as the turn writes them (same spelling "
    "and script; write the speaker's name for I or me); the predicate is a short lower-case "
    "verb phrase (lives in, works at, likes). Put no dates in subject or object: valid_from "
    "and valid_until are when the fact starts and stops being true, as YYYY-MM-DD resolved "
    "against the turn's time, or null when the turn does not say. turn is the id of the "
    "turn that states the fact. Never guess, infer or add anything the turns do not say; "
    'answer {"facts": []} when they state nothing.'
)


class ChatFactExtractor:
    """Facts asked of a model behind an OpenAI-compatible chat-completions endpoint
    (``POST {base_url}/chat/completions``, temperature 0, :data:`FACTS_SCHEMA` as a strict
    JSON schema response format), through :class:`~relaystate.llm.openai.OpenAICompatibleModel`:
    the same deadline per attempt, retries of transient failures, checks of the answer and
    masking of the API key."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        from ..llm.openai import OpenAICompatibleModel

        self._model: OpenAICompatibleModel = OpenAICompatibleModel(
            base_url, api_key, model, timeout=timeout, retries=retries, backoff=backoff
        )
        self.base_url = self._model.base_url
        self.model = self._model.model
        self.name = f"openai:{self.model}@{self.base_url}"

    def __repr__(self) -> str:
        return f"ChatFactExtractor(base_url={self.base_url!r}, model={self.model!r})"

    def extract(self, items: Sequence[MemoryItem]) -> list[ExtractedFact]:
        """The facts the model states for ``items``; ExtractionFailed when it gives no
        usable answer (the reason, key masked)."""
        from ..llm.endpoint import EndpointError

        if not items:
            return []
        turns = [
            {
                "id": item.id,
                "speaker": speaker(item),
                "time": None if item.time is None else item.time.isoformat(),
                "text": item.text,
            }
            for item in items
        ]
        question = json.dumps(turns, ensure_ascii=False)
        try:
            answer = self._model.ask_json("facts", SYSTEM, question, "facts", FACTS_SCHEMA)
        except EndpointError as exc:
            raise ExtractionFailed(self._model.redact(exc.reason)) from None
        return [_proposed(raw) for raw in answer["facts"]]


def _proposed(raw: Mapping[str, Any]) -> ExtractedFact:
    """A fact of the answer (its shape checked against the schema), dates read."""
    dates: dict[str, date | datetime | None] = {}
    problem = None
    for name in ("valid_from", "valid_until"):
        try:
            dates[name] = parse_date(raw[name])
        except ValueError:
            dates[name] = None
            problem = problem or f"{name} {raw[name]!r} is not a date"
    return ExtractedFact(
        raw["subject"],
        raw["predicate"],
        raw["object"],
        dates["valid_from"],
        dates["valid_until"],
        raw["turn"],
        problem,
    )


def parse_date(value: object) -> date | datetime | None:
    """None, a calendar date (``YYYY-MM-DD``) or an ISO 8601 time; else ValueError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    text = value.strip()
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return date.fromisoformat(text)
    return datetime.fromisoformat(text)


def extractor_from_config(
    spec: str | None, environ: Mapping[str, str] | None = None
) -> FactExtractor | None:
    """The extractor a spec names; with no spec, ``RELAYSTATE_EXTRACTOR``'s.

    - ``none`` or empty: None (no extraction)
    - ``openai:MODEL@BASE_URL``: :class:`ChatFactExtractor`, e.g.
      ``openai:gpt-4o-mini@https://api.openai.com/v1``; its key comes from
      ``RELAYSTATE_EXTRACTOR_API_KEY``

    A spec it cannot read raises :class:`ConfigError` naming the setting.
    """
    env = os.environ if environ is None else environ
    found = read_spec(spec, env, ENV_EXTRACTOR, kind="extractor")
    if found is None:
        return None
    if found.family == "openai":
        model, base_url = found.model_at()
        try:
            return ChatFactExtractor(
                base_url, model, env.get(ENV_EXTRACTOR_API_KEY, "").strip() or None
            )
        except ValueError as exc:
            raise ConfigError(f"{found.setting}: {exc}") from None
    raise ConfigError(
        f"{found.setting}: {found.text!r} is no extractor; use none or openai:MODEL@BASE_URL"
    )


# -- checking ----------------------------------------------------------------------------


class Refused(Exception):
    """Why :func:`check` refuses a fact."""


def speaker(item: MemoryItem) -> str | None:
    """Who said a turn (``metadata["speaker"]`` or ``["role"]``), if it says."""
    who = item.metadata.get("speaker") or item.metadata.get("role")
    return str(who) if who else None


def _normal(text: str) -> str:
    return fold(unicodedata.normalize("NFKC", text)).casefold()


def _tokens(text: str) -> list[str]:
    """Words (possessive 's off) and CJK runs of NFKC text, as written."""
    return [_POSSESSIVE.sub("", m.group()) for m in _TOKEN.finditer(text)]


@dataclass(frozen=True)
class _Evidence:
    text: str
    words: frozenset[str]
    numbers: frozenset[str]

    @classmethod
    def of(cls, item: MemoryItem) -> _Evidence:
        said = item.text + "\n" + (speaker(item) or "")
        said = _GROUPED.sub("", unicodedata.normalize("NFKC", said))
        return cls(
            _normal(said),
            frozenset(_normal(t) for t in _tokens(said)),
            frozenset(_DIGITS.findall(said)),
        )

    def missing(self, part: str) -> str | None:
        """The first name-ish token or number of ``part`` this turn does not have."""
        part = _GROUPED.sub("", unicodedata.normalize("NFKC", part))
        number: str
        for number in _DIGITS.findall(part):
            if number not in self.numbers:
                return number
        for token in _tokens(part):
            if CJK_RUN.fullmatch(token):
                if _normal(token) not in self.text:
                    return token
            elif any(ch.isupper() for ch in token) and _normal(token) not in self.words:
                return token
        return None


def _clean(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise Refused(f"{what} is not text")
    text = " ".join(unicodedata.normalize("NFKC", value).split())
    if not text:
        raise Refused(f"{what} is empty")
    if len(text) > limit:
        raise Refused(f"{what} is longer than {limit} characters")
    if any(unicodedata.category(ch)[0] == "C" for ch in text):
        raise Refused(f"{what} holds a control or unassigned character")
    return text


def _as_time(value: date | datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime(value.year, value.month, value.day, tzinfo=UTC)


def check(fact: ExtractedFact, turns: Mapping[str, MemoryItem]) -> ExtractedFact:
    """``fact`` as it will be written (NFKC, white space collapsed), if the turn it cites (one
    of ``turns``) bears it out; else ``Refused`` saying why."""
    if fact.problem:
        raise Refused(fact.problem)
    item = turns.get(fact.turn) if isinstance(fact.turn, str) else None
    if item is None:
        raise Refused(f"it cites {fact.turn!r}, which is not one of the turns sent")
    subject = _clean(fact.subject, "the subject", MAX_PART)
    predicate = _clean(fact.predicate, "the predicate", MAX_PREDICATE)
    obj = _clean(fact.object, "the object", MAX_PART)
    evidence = _Evidence.of(item)
    for what, part in (("subject", subject), ("object", obj)):
        missing = evidence.missing(part)
        if missing is not None:
            raise Refused(f"the {what}'s {missing!r} is not in turn {item.id!r}")
    for when in (fact.valid_from, fact.valid_until):
        if when is not None and not isinstance(when, date):
            raise Refused(f"{when!r} is not a date or time")
    if (
        fact.valid_from is not None
        and fact.valid_until is not None
        and _as_time(fact.valid_until) < _as_time(fact.valid_from)
    ):
        raise Refused("it ends before it starts")
    return ExtractedFact(subject, predicate, obj, fact.valid_from, fact.valid_until, item.id)


# -- writing -----------------------------------------------------------------------------


def source_of(fact: ExtractedFact) -> str:
    """The ``source`` a written fact carries: ``extracted:TURN``, and `` until=DATE`` when
    it stops being true (the graph's ``relate`` opens facts, it does not close them at a
    given time: the end is kept here)."""
    text = SOURCE + fact.turn
    if fact.valid_until is not None:
        text += _UNTIL + fact.valid_until.isoformat()
    return text


def traced(fact: Fact) -> tuple[str, date | datetime | None] | None:
    """The turn a fact of the graph was extracted from and when it stops being true (from
    its ``source``); None for a fact not extracted by a model."""
    source = fact.source or ""
    if not source.startswith(SOURCE):
        return None
    turn, sep, until = source[len(SOURCE) :].rpartition(_UNTIL)
    if sep:
        try:
            return turn, parse_date(until)
        except ValueError:
            pass
    return source[len(SOURCE) :], None


def extract_into_graph(
    graph: MemoryGraph,
    user_id: str,
    items: Sequence[MemoryItem],
    extractor: FactExtractor,
    *,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
) -> ExtractionReport:
    """Ask ``extractor`` for the facts of ``items``, ``batch`` at a time, and write those
    the cited turns bear out into the user's graph (idempotent: a re-run writes nothing
    new). A batch that fails is skipped with one warning; ``progress(n)`` is told after
    each batch how many items it covered."""
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise InvalidInput("batch", f"must be a whole number of at least 1, not {batch!r}")
    report = ExtractionReport(user_id)
    for start in range(0, len(items), batch):
        part = items[start : start + batch]
        report.batches += 1
        try:
            proposed = extractor.extract(part)
        except Exception as exc:
            report.failed_batches += 1
            reason = str(exc) if isinstance(exc, ExtractionFailed) else repr(exc)
            log.warning(
                "fact extraction by %s gave nothing for %d turns (%s..%s), going on: %s",
                getattr(extractor, "name", type(extractor).__name__),
                len(part),
                part[0].id,
                part[-1].id,
                reason,
            )
        else:
            _write(graph, user_id, {i.id: i for i in part}, proposed, report)
        if progress is not None:
            progress(len(part))
    return report


def _write(
    graph: MemoryGraph,
    user_id: str,
    turns: Mapping[str, MemoryItem],
    proposed: Sequence[ExtractedFact],
    report: ExtractionReport,
) -> None:
    for fact in proposed:
        try:
            accepted = check(fact, turns)
            item = turns[accepted.turn]
            since = accepted.valid_from
            recorded = graph.relate(
                user_id,
                accepted.subject,
                accepted.predicate,
                accepted.object,
                source=source_of(accepted),
                task_id=item.task_id,
                at=_as_time(since) if since is not None else item.time,
            )
        except (Refused, InvalidInput) as exc:
            report.refused += 1
            log.debug("extracted fact refused (%s): %r", exc, fact)
            continue
        report.facts.append(accepted)
        if recorded is None:
            report.already += 1
        else:
            report.written += 1


def fact_items(
    facts: ExtractionReport | Sequence[ExtractedFact],
    namespace: str,
    *,
    user_id: str | None = None,
) -> list[MemoryItem]:
    """Documents of accepted facts for retrieval, in ``NAMESPACE~fact`` (not stored here):
    text ``subject predicate object``, ``cites`` the turn, source ``fact``, the parts and
    dates in ``metadata``. Their ids are derived from the fact, so writing them again
    replaces them."""
    if isinstance(facts, ExtractionReport):
        user = user_id if user_id is not None else facts.user_id
        listed: Sequence[ExtractedFact] = facts.facts
    else:
        user, listed = user_id or "", facts
    made: dict[str, MemoryItem] = {}
    for fact in listed:
        key = json.dumps([fact.turn, fact.subject, fact.predicate, fact.object])
        item_id = "fact:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]
        made.setdefault(
            item_id,
            MemoryItem(
                item_id,
                user,
                namespace + FACT,
                f"{fact.subject} {fact.predicate} {fact.object}",
                None if fact.valid_from is None else _as_time(fact.valid_from),
                "fact",
                None,
                {
                    "subject": fact.subject,
                    "predicate": fact.predicate,
                    "object": fact.object,
                    "valid_from": _iso(fact.valid_from),
                    "valid_until": _iso(fact.valid_until),
                },
                (fact.turn,),
            ),
        )
    return list(made.values())


def _iso(value: date | datetime | None) -> str | None:
    return None if value is None else value.isoformat()


__all__ = [
    "BATCH",
    "ENV_EXTRACTOR",
    "ENV_EXTRACTOR_API_KEY",
    "FACT",
    "FACTS_SCHEMA",
    "ChatFactExtractor",
    "ExtractedFact",
    "ExtractionFailed",
    "ExtractionReport",
    "FactExtractor",
    "NoExtraction",
    "Refused",
    "check",
    "extract_into_graph",
    "extractor_from_config",
    "fact_items",
    "parse_date",
    "source_of",
    "traced",
]
