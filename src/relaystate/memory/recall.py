"""Recall over a conversation: turn retrieval helped by the layers around each turn.

Turn search alone misses what a question needs from several turns or from the turn's
surroundings (measured on LoCoMo: keyword + vector turn search finds an evidence turn in the
top 10 for 0.72 of the questions; this method 0.81, held-out 0.81). Items of a namespace
that carry ``metadata["session"]`` form a conversation, and :func:`build_layers` derives from
it two more kinds of document, stored in sibling namespaces and searched like any item:

- a **window** per turn (the turn with the one before and after it in its session), whose
  hits credit the middle turn;
- a **session** document (all its turns), whose score every turn of it inherits;
- a **voice** document per speaker and session (what one person said in it), whose score
  that speaker's turns of the session inherit: multi-hop answers are often one person's
  remarks scattered over a session (LoCoMo dev, multi-hop recall_all@10 0.239 -> 0.261
  with keywords alone, 0.232 -> 0.254 with the hash embedder; entity documents, every turn
  naming a proper noun, were tried and lost 0.03).

A query then fuses, by weighted reciprocal rank: the turns' keyword list (2), the windows'
(1), the turns' vectors (1) and their context vectors (the turn plus half of each neighbour,
1), the session score (keyword and centroid rankings, 1 each) and the voice score (1).
Three multipliers follow what the question says: a speaker it names (x1.25 on that
speaker's turns, the name left out of the keyword query), a date it names (x2 on turns of
sessions of that date, the date words left out), and a "when" question (x1.3 on turns that
carry a time word). A category the question asks for ("Which cities ...") adds one more
keyword list, the conversation's words WordNet files under it (weight 1; see
:mod:`.answer_kind`). Weights are round numbers set before measuring, and every choice of
them in a 48-setting grid scores within 0.79-0.82: the gain is in the layers, not in the constants.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

import numpy as np

from ..model import MemoryItem
from ..store.terms import query_terms
from .answer_kind import word_forms

WINDOW = "~window"
FACT = "~fact"
SESSION = "~session"
VOICE = "~voice"
RRF_K = 60


@dataclass(frozen=True)
class Weights:
    """What :func:`rank` gives each signal. A list's weight multiplies its reciprocal ranks
    (``weight / (RRF_K + rank)``); a boost multiplies a turn's total by ``1 + boost``.
    Round numbers set before measuring; ``bench/locomo_loo.py`` checks them
    leave-one-conversation-out."""

    turns: float = 2.0
    """The turns' keyword list (the question's words in the turn itself)."""
    windows: float = 1.0
    """The windows' keyword list (a turn with its neighbours), credited to the middle turn."""
    vectors: float = 1.0
    """The turns' vector ranking (query vector against each turn's)."""
    context: float = 1.0
    """The context vectors' ranking (a turn plus half of each neighbour in its session)."""
    session_words: float = 1.0
    """The session documents' keyword list, inherited by every turn of the session."""
    session_centroid: float = 1.0
    """The session centroids' vector ranking, inherited by every turn of the session."""
    voice: float = 1.0
    """The voice documents' keyword list (one speaker in one session), inherited by that
    speaker's turns of the session."""
    category: float = 1.0
    """The keyword list of the words filed under the category a question asks for."""
    facts: float = 1.0
    """The keyword list of extracted facts (``NAMESPACE~fact``), credited to the turn each
    cites; empty unless a model extracted facts (``memory import --extractor``)."""
    speaker_boost: float = 0.25
    """On the turns of the one speaker a question names."""
    date_boost: float = 1.0
    """On the turns of sessions whose day fits the date a question names."""
    time_boost: float = 0.3
    """On turns carrying a time word, for a "when" question."""


DEFAULT_WEIGHTS = Weights()
DEPTH = 200
"""How deep each keyword list goes (a rank beyond it adds under 1/260)."""

_MONTHS = [
    *("january", "february", "march", "april", "may", "june", "july", "august"),
    *("september", "october", "november", "december"),
]
_MON = "|".join(_MONTHS)
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MON}),?\s+(\d{{4}})\b", re.I)
_MDY = re.compile(rf"\b({_MON})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MY = re.compile(rf"\b({_MON}),?\s+(\d{{4}})\b", re.I)
_M = re.compile(rf"\b({_MON})\b", re.I)
_Y = re.compile(r"\b((?:19|20)\d\d)\b")
_MAY_VERB = re.compile(r"\bmay\s+(i|you|we|he|she|they|it|be)\b", re.I)
TIME_QUESTION = re.compile(r"^\s*(when|how long|what (year|month|date|day|time))\b|\bwhen\b", re.I)
TIME_WORD = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|recently|lately|earlier|this "
    r"(week|month|year|weekend|morning|evening)|weekend|week|month|year|since|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    rf"{_MON}|\d{{4}})\b",
    re.I,
)


@dataclass(frozen=True)
class DateAsked:
    """A date a question names: which session days fit it, and its words (out of the
    keyword query: "may" or "2023" would match everything). ``month`` alone: that month of
    any year."""

    words: frozenset[str]
    start: date | None = None
    end: date | None = None
    month: int | None = None

    def __call__(self, day: date) -> bool:
        if self.month is not None:
            return day.month == self.month or (day.month == self.month % 12 + 1 and day.day <= 14)
        assert self.start is not None and self.end is not None
        return self.start <= day <= self.end


def date_asked(question: str) -> DateAsked | None:
    """The first date a question names, read generously: the day itself or the next (a
    session is dated by when it was written down); a month or the first two weeks after it;
    a year or the first two weeks of the next."""
    found = _DMY.search(question) or _MDY.search(question)
    if found:
        a, b, year = found.groups()
        day_text, month = (a, b) if a.isdigit() else (b, a)
        try:
            day = date(int(year), _MONTHS.index(month.lower()) + 1, int(day_text))
        except ValueError:
            return None
        words = frozenset({month.lower(), year, day_text})
        return DateAsked(words, day, date.fromordinal(day.toordinal() + 1))
    found = _MY.search(question)
    if found:
        month, year = found.group(1).lower(), int(found.group(2))
        index = _MONTHS.index(month) + 1
        end = date(year + index // 12, index % 12 + 1, 14)
        return DateAsked(frozenset({month, str(year)}), date(year, index, 1), end)
    found = _M.search(question)
    if found and not _MAY_VERB.search(question):
        month = found.group(1).lower()
        return DateAsked(frozenset({month}), month=_MONTHS.index(month) + 1)
    found = _Y.search(question)
    if found:
        year = int(found.group(1))
        return DateAsked(frozenset({found.group(1)}), date(year, 1, 1), date(year + 1, 1, 14))
    return None


@dataclass
class Conversation:
    """A namespace's turns in conversation order, with what recall needs of each."""

    ids: list[str]
    position: dict[str, int]
    session_of: np.ndarray
    sessions: list[str]
    session_days: list[date | None]
    speakers: list[str]
    is_time: np.ndarray
    voice_of: np.ndarray
    voices: dict[str, int]
    texts: list[str]
    vectors: np.ndarray | None = None
    context: np.ndarray | None = None
    centroids: np.ndarray | None = None
    session_starts: list[float] = dataclasses.field(default_factory=list)
    """When each session began (a POSIX time; -inf for none): where a new session goes."""
    _forms: dict[str, frozenset[str]] | None = dataclasses.field(default=None, repr=False)
    _buffers: tuple[np.ndarray, np.ndarray, np.ndarray] | None = dataclasses.field(
        default=None, repr=False
    )
    """The vectors' and context vectors' buffers (with room to grow) and the sessions'
    unnormalised sums (:mod:`.following`)."""

    def forms(self) -> dict[str, frozenset[str]]:
        """The conversation's words by lemma (:func:`.answer_kind.word_forms`), made on the
        first question that asks for a category: ~40 ms at 10,000 turns, which a
        conversation rebuilt after every turn should not pay for every other question."""
        if self._forms is None:
            self._forms = word_forms(self.texts)
        return self._forms

    @classmethod
    def of(cls, items: Sequence[MemoryItem]) -> Conversation:
        ordered = ordered_turns(items)
        sessions: dict[str, int] = {}
        days: list[date | None] = []
        starts: list[float] = []
        for item in ordered:
            key = session_key(item)
            if key not in sessions:
                sessions[key] = len(sessions)
                days.append(item.time.date() if item.time else None)
                starts.append(item.time.timestamp() if item.time else -math.inf)
        voices: dict[str, int] = {}
        for item in ordered:
            voices.setdefault(voice_id(session_key(item), speaker(item)), len(voices))
        return cls(
            ids=[i.id for i in ordered],
            position={i.id: n for n, i in enumerate(ordered)},
            session_of=np.array([sessions[session_key(i)] for i in ordered], dtype=np.int64),
            sessions=list(sessions),
            session_days=days,
            speakers=[speaker(i) for i in ordered],
            is_time=np.array([bool(TIME_WORD.search(i.text)) for i in ordered], dtype=bool),
            voice_of=np.array(
                [voices[voice_id(session_key(i), speaker(i))] for i in ordered], dtype=np.int64
            ),
            voices=voices,
            texts=[i.text for i in ordered],
            session_starts=starts,
        )


def voice_id(session: str, who: str) -> str:
    """The id of what ``who`` said in ``session`` (a voice document)."""
    return f"voice:{session}:{who}"


def session_key(item: MemoryItem) -> str:
    return str(item.metadata.get("session", ""))


def speaker(item: MemoryItem) -> str:
    return str(item.metadata.get("speaker") or item.metadata.get("role") or "").casefold()


def is_conversation(item: MemoryItem) -> bool:
    return "session" in item.metadata


def ordered_turns(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    """Turns of a conversation in order: by session (the session's first time), then as
    they were added (the store's order, which ``items`` keeps)."""
    turns = [i for i in items if is_conversation(i)]
    first: dict[str, tuple[datetime | None, int]] = {}
    for n, item in enumerate(turns):
        first.setdefault(session_key(item), (item.time, n))
    return [
        item
        for _, item in sorted(
            enumerate(turns),
            key=lambda p: (_when(first[session_key(p[1])]), p[0]),
        )
    ]


def _when(start: tuple[datetime | None, int]) -> tuple[float, int]:
    """Sessions without a time first (as the store orders items): then a live
    conversation's newest session, which has a time, is the last, where a new turn is
    appended without rebuilding anything (:mod:`.following`)."""
    moment, order = start
    return (moment.timestamp() if moment else -math.inf, order)


def derived(
    items: Sequence[MemoryItem], namespace: str, *, built: dict[str, str] | None = None
) -> list[MemoryItem]:
    """The window, voice and session documents of a conversation's turns (in the
    ``~window``, ``~voice`` and ``~session`` namespaces beside ``namespace``), each citing
    its turns. ``built``: the digest each session's documents were last made from
    (:func:`session_digest`, kept in the session document); a session whose turns still
    give it is left out, so a new turn costs the documents of its session only."""
    turns = ordered_turns(items)
    by_session: dict[str, list[MemoryItem]] = {}
    for item in turns:
        by_session.setdefault(session_key(item), []).append(item)
    made: list[MemoryItem] = []
    for key, group in by_session.items():
        digest = session_digest(group)
        if built is not None and built.get(key) == digest:
            continue
        for n, item in enumerate(group):
            near = group[max(0, n - 1) : n + 2]
            made.append(
                MemoryItem(
                    item.id,
                    item.user_id,
                    namespace + WINDOW,
                    " ".join(i.text for i in near),
                    item.time,
                    "window",
                    item.task_id,
                    {"session": key},
                    tuple(i.id for i in near),
                )
            )
        voices: dict[str, list[MemoryItem]] = {}
        for item in group:
            voices.setdefault(speaker(item), []).append(item)
        for who, said in voices.items():
            made.append(
                MemoryItem(
                    voice_id(key, who),
                    said[0].user_id,
                    namespace + VOICE,
                    "\n".join(i.text for i in said),
                    said[0].time,
                    "voice",
                    None,
                    {"session": key},
                    tuple(i.id for i in said),
                )
            )
        made.append(
            MemoryItem(
                f"session:{key}",
                group[0].user_id,
                namespace + SESSION,
                "\n".join(i.text for i in group),
                group[0].time,
                "session",
                None,
                {"session": key, "digest": digest},
                tuple(i.id for i in group),
            )
        )
    return made


def session_digest(group: Sequence[MemoryItem]) -> str:
    """What a session's documents are made of (its turns' ids, speakers, times and texts,
    in order), as a short hash."""
    h = hashlib.sha256()
    for item in group:
        when = item.time.isoformat() if item.time else ""
        h.update("\0".join((item.id, speaker(item), when, item.text)).encode() + b"\1")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Lists:
    """What the store found for one question: keyword hits of turns, windows, sessions."""

    turns: list[str]
    windows: list[str]
    sessions: list[str]
    voices: list[str] = dataclasses.field(default_factory=list)
    members: list[str] = dataclasses.field(default_factory=list)
    """Turns naming a member of the category the question asks for (Rome for "cities")."""
    facts: list[str] = dataclasses.field(default_factory=list)
    """The turns that facts matching the question cite, in the facts' order (facts a model
    extracted at import, :mod:`.extract`, kept in ``NAMESPACE~fact``)."""


def plan(question: str, conv: Conversation) -> tuple[list[str], str | None, DateAsked | None]:
    """The keyword terms of a question, the one speaker it names (if one), and its date."""
    asked_words = {w for w in query_terms(question)}
    named = sorted({s for s in conv.speakers if s and s in asked_words})
    when = date_asked(question)
    drop = set(named) | (set(when.words) if when else set())
    terms = [t for t in query_terms(question) if t not in drop]
    return terms, (named[0] if len(named) == 1 else None), when


def rank(
    question: str,
    conv: Conversation,
    lists: Lists,
    query_vector: np.ndarray | None,
    named: str | None,
    when: DateAsked | None,
    k: int,
    weights: Weights = DEFAULT_WEIGHTS,
) -> list[tuple[str, float, dict[str, int]]]:
    """The ``k`` best turns with their score and their rank in each list that found them
    ("keyword" for its own words, "window", "category", "session", "voice", "vector",
    "context"), each signal weighed by ``weights``.
    Vectorised over the turns: only the ``k`` returned are looked at one by one."""
    total = np.zeros(len(conv.ids))
    keyword = _credit(total, conv, lists.turns, weights.turns)
    window = _credit(total, conv, lists.windows, weights.windows)
    category = _credit(total, conv, lists.members, weights.category)
    fact = _credit(total, conv, lists.facts, weights.facts)
    session_score = np.zeros(len(conv.sessions))
    index = {s: i for i, s in enumerate(conv.sessions)}
    session_rank = {index[key]: r for r, key in enumerate(lists.sessions, start=1) if key in index}
    for at, r in session_rank.items():
        session_score[at] += weights.session_words / (RRF_K + r)
    vector_ranks: dict[str, np.ndarray] = {}
    if query_vector is not None and conv.vectors is not None:
        assert conv.context is not None and conv.centroids is not None
        for name, matrix, weight in (
            ("vector", conv.vectors, weights.vectors),
            ("context", conv.context, weights.context),
        ):
            vector_ranks[name] = _ranks(matrix @ query_vector)
            total += weight / (RRF_K + vector_ranks[name])
        centroid = _ranks(conv.centroids @ query_vector)
        session_score += weights.session_centroid / (RRF_K + centroid)
    total += session_score[conv.session_of]
    voice_rank = {
        conv.voices[v]: r for r, v in enumerate(lists.voices, start=1) if v in conv.voices
    }
    if voice_rank:
        voice_score = np.zeros(len(conv.voices))
        for at, r in voice_rank.items():
            voice_score[at] = weights.voice / (RRF_K + r)
        total += voice_score[conv.voice_of]
    if named is not None:
        total *= np.where(np.array(conv.speakers) == named, 1 + weights.speaker_boost, 1.0)
    if when is not None:
        fits = np.array([d is not None and when(d) for d in conv.session_days], dtype=bool)
        total *= np.where(fits[conv.session_of], 1 + weights.date_boost, 1.0)
    if TIME_QUESTION.search(question):
        total *= np.where(conv.is_time, 1 + weights.time_boost, 1.0)
    best = np.argsort(-total, kind="stable")[:k].tolist()
    ranked = []
    for turn in best:
        if total[turn] <= 0:
            break
        found = {
            name: r
            for name, r in (
                ("keyword", keyword.get(turn)),
                ("window", window.get(turn)),
                ("category", category.get(turn)),
                ("fact", fact.get(turn)),
                ("session", session_rank.get(int(conv.session_of[turn]))),
                ("voice", voice_rank.get(int(conv.voice_of[turn]))),
            )
            if r is not None
        }
        for name, ranks in vector_ranks.items():
            if ranks[turn] <= DEPTH:
                found[name] = int(ranks[turn])
        ranked.append((conv.ids[turn], float(total[turn]), found))
    return ranked


def _credit(total: np.ndarray, conv: Conversation, ids: list[str], weight: float) -> dict[int, int]:
    """Add a keyword list's reciprocal ranks to its turns; each turn's rank in it."""
    ranks: dict[int, int] = {}
    for r, item_id in enumerate(ids, start=1):
        at = conv.position.get(item_id)
        if at is not None and at not in ranks:
            total[at] += weight / (RRF_K + r)
            ranks[at] = r
    return ranks


def _ranks(scores: np.ndarray) -> np.ndarray:
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    return ranks
