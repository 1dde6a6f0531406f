"""Slot extraction: one user utterance, in Chinese or English, to slot values.

Offline and deterministic: rules, no model. The order of reading, most specific first, is

1. values matching a text slot's ``pattern`` anywhere ("ORD-10001");
2. dates (:mod:`.dates`), choice words and synonyms, amounts with a currency;
3. cues, the words that introduce a value ("from", "到", "my name is", "because"), including
   the slot's own name ("change the destination to Shanghai", "目的地改成上海");
4. values nobody introduced: a date goes to the date slot, a choice word to its slot, an
   amount to the amount slot;
5. when the task just asked for ``expecting`` and nothing above answered it, the rest of the
   utterance, trimmed of filler, is the answer.

Text already used for one value is not read again for another, so "tomorrow" never becomes
a place and "1月22日" never an amount. Values go through :meth:`Slot.validate`; a failure is
reported in ``errors`` (for asking again with the reason), never raised.

When one slot gets several values, a negated one loses ("not economy, business", "不是明天，
是后天"); then a correction ("actually", "改成") takes the last, anything else the first.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from ..errors import InvalidSlot
from ..task.problems import Problem
from ..task.templates import EXTRACTORS, Slot, TaskTemplate
from . import fuzzy, holidays, places
from .dates import DateCandidate, scan_dates
from .derived import once_per_template
from .intents import REQUEST, control_word, is_correction, is_question, is_yes
from .kinds import extractor_of, said_of
from .numbers import NumberMatch, find_numbers, number_to_cn
from .text import (
    NEVER,
    SENTENCE_END,
    fold,
    is_cjk,
    overlaps,
    phrase_source,
    phrases,
    strip_punct,
)
from .words import (
    ADVERBS,
    AMOUNT_BEFORE,
    AMOUNT_WORDS,
    BLOCKERS,
    DEFAULT_CUES,
    DESTINATION_NAMES,
    EN_NAME_STOP,
    EN_STOP,
    FALLBACK_STOP,
    FILLER_HEAD,
    FILLER_TAIL,
    FREE_HEAD,
    LEFTOVER_STOP,
    NAME_PARTICLES,
    NOT_BEFORE_ORIGIN,
    NOT_CHOICE_NEXT,
    ORDINAL_NOT_NEXT,
    ORDINALS,
    ORIGIN_NAMES,
    POLITE_TAIL,
    ROLE_CUES,
    TEXT_ROLE_CUES,
    WEAK_CUES,
    ZH_NAME_STOP,
    ZH_PLACE_STOP,
)


@dataclass
class Extraction:
    """What one utterance says about a task's slots.

    ``values`` are validated plain JSON (dates as YYYY-MM-DD, choices by canonical name);
    ``errors`` maps a slot to why the value given for it was refused; ``correction`` is true
    when the utterance corrects an earlier answer ("actually...", "改成...").
    """

    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    correction: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    """How each value was found: "pattern", "cue", "loose" (a date, choice or amount nobody
    introduced), "number" (a bare number for the slot asked) or "rest" (what was left of the
    utterance, taken as the answer to the slot asked). Routing weighs them: "rest" is the
    weakest evidence that a message belongs to a task."""


# --- patterns: the shapes around a value (its words are in .words) -------------------------

_CUE_SUFFIX = (
    r"(?:\s+(?:is|was|to|should\s+be|will\s+be)(?![a-z0-9])|\s*[:=]|改成|改为|换成|换为|是|为|叫)"
)
"""What may follow a cue and belongs to it ("destination is", "目的地改成", "reason:"): one
group after all cues, rather than each cue written out with each of them."""
_CONNECTOR_TAIL = re.compile(r"(?:\s|[:：=#]|(?<![a-z])(?:is|number|no\.?|id)|是|为|号)*$")
_SWAP = re.compile(
    r"(?:[,;，；]|\.{2,}|…+)\s*(?:(?:oh|er|erm|uh|um|hmm)\s+)?"
    r"(?:no|nope|sorry|i mean|or rather|make that|wait|不对|不是|算了)(?![a-z])[\s,，.!！]*"
    r"(?:sorry[\s,]*|还是|是)?"
)
_TO_A_PLACE = re.compile(
    r"(?<![a-z])(?:in|to|from|at|near|around|visit|visiting|into|via)\s+(?:the\s+)?"
)
"""Words after which a misspelt city is looked for."""
_OLD_BEFORE = re.compile(
    r"(?:(?<![a-z])(?:instead\s+of|rather\s+than)|而不是)\s*$"
    r"|(?P<then>(?:^|(?<=[\s,，。.!！]))(?:not|并?不是|不要)\s*)$"
)
"""Words before a held value that mark it as the one replaced: after the new value
("JFK instead of Newark") or before it (``then``: "not Newark but JFK", "不是苏州，是杭州")."""
_NEW_AFTER = re.compile(
    r"\s*(?:(?P<to>(?<![a-z])(?:to|into|for|with)(?![a-z])|->|→|改成|改为|换成|换为|变成|改到)"
    r"|(?:[,，;；]\s*)?(?:(?<![a-z])but(?![a-z])|而是|是)|[,，;；])\s*(?:(?:it'?s|is)\s+)?"
)
"""Words after a held value that lead to its replacement."""
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z']*)\s+$")


def _part_of_a_name(text: str, start: int) -> bool:
    """Whether the number at ``start`` follows a word it belongs to ("iPhone 15", "苹果15"),
    rather than one that leads to an amount ("refund 15", "退15", "about 15")."""
    if start and is_cjk(text[start - 1]):
        return text[start - 1] not in AMOUNT_BEFORE
    word = _WORD_BEFORE.search(text[:start])
    return word is not None and fold(word.group(1)) not in AMOUNT_WORDS


_COUNTED = re.compile(
    r"\s*(?!(?:bucks|dollars?|yuan|rmb|usd|back)(?![a-z]))[a-z]|\s*[个件张台只条部本次天年月号岁点]"
)
"""What follows a number that counts or names something rather than an amount."""
_BACK = re.compile(r"\s*(?:bucks|dollars?|yuan|rmb)?\s+back(?![a-z])")
_CONNECTOR = re.compile(
    r"(?:\s|[:=#]|(?<![a-z])(?:is|was|are|be|will be|should be|of|no\.|number|id|about|"
    r"around|on|for)(?![a-z])|是|为|叫|号|在|了|写成|写|填成|填写|填|一?趟)*"
)

_CUT_PREPOSITION = re.compile(
    r"(?:[\s,]+(?:in|on|at|to|from|for|with|by|of|near|around|about|worth|valued at))+\s*$"
    r"|(?:大概|大约|差不多|估计)?值\s*$|(?:大概|大约|差不多|估计)\s*$",
    re.IGNORECASE,
)
"""What a clause ends with when the value after it was taken out ("lost it in [Seattle]",
"大概值[三千]")."""
_DANGLING = re.compile(
    r"[\s,;:\-–—]+(?:(?:and|so|but|then|or)\s+)?(?:(?:i\s+)?(?:want|need|would like|'d like)"
    r"(?:\s+to)?\s+)?(?:get|give|have|want|need|please|and|so|but|then|or)?[\s,;:\-–—]*$"
    r"|[\s,;:\-–—]+$",
    re.IGNORECASE,
)
"""What a clause trails off with once its value is taken out: "- and get", ", so"."""
_TRAILING_VERB = re.compile(
    r"(?:[\s,;]+(?:it's|it is|that's|that is|this is|is|are|was|were))+\s*$", re.I
)
"""A verb left without its complement once a value is taken out ("..., it's [urgent]")."""
_NEGATION = re.compile(
    r"(?:(?<![a-z])(?:not|no|never|except(?:\s+for)?|instead of|rather than|anything but|"
    r"other than|apart from)|n't(?:\s+(?:want|need|like))?"
    r"|不是|不要|不用|不坐|不去|不飞|不从|而不是|别|并非|并不是|除了)\s*"
    r"(?:(?:the|a|an|from|to|on|in|at|fly|go|be|with)\s+)?$"
)
_NOT_BUT = (
    re.compile(r"^\s*(?:并?不是|不要)(?P<old>.+?)[，,\s]*(?:而)?是(?P<new>.+)$"),
    re.compile(r"^\s*not\s+(?P<old>.+?),?\s+but\s+(?P<new>.+)$", re.IGNORECASE),
    re.compile(r"^\s*not\s+(?P<old>[^,]+),\s*(?P<new>.+)$", re.IGNORECASE),
    re.compile(r"^\s*(?:应该)?是?(?P<new>[^，,]+?)[，,\s]*(?:而)?不是(?P<old>.+)$"),
    re.compile(r"^\s*(?P<new>.+?),?\s+not\s+(?P<old>[^,]+)$", re.IGNORECASE),
)
_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['.\-](?=[^\W\d_]))*")
_CODE = re.compile(
    r"(?<![A-Za-z0-9])(?P<letters>[A-Za-z]{2,5})[\s\-_#.]?(?P<digits>\d{3,})(?![0-9])"
)
#: A code such as an order number: letters, digits and dashes, not part of "12:30" or "3.5".
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-_/]*(?![:.,]?[A-Za-z0-9])")


# --- the slots' readers --------------------------------------------------------------------


def _role(slot: Slot) -> str | None:
    words = slot.name.lower().split("_")
    if any(w in ORIGIN_NAMES for w in words):
        return "origin"
    if any(w in DESTINATION_NAMES for w in words):
        return "destination"
    return None


def _listed(words: str | Sequence[str]) -> list[str]:
    return [words] if isinstance(words, str) else list(words)


def _cues(slot: Slot, kind: str) -> list[tuple[str, bool]]:
    """(cue, before) for ``slot``: declared cues (else defaults), plus its own name."""
    declared = [c for words in slot.cues.values() for c in _listed(words)]
    if not declared:
        defaults = DEFAULT_CUES.get(kind, {})
        role = _role(slot)
        if kind == "place" and role is not None:
            defaults = ROLE_CUES[role]
        if kind == "text":
            defaults = next(
                (cues for name, cues in TEXT_ROLE_CUES.items() if name in slot.name.lower()), {}
            )
        declared = [c for words in defaults.values() for c in _listed(words)]
    elif kind == "place" and _role(slot) is not None:  # arrows mean the same in any template
        declared += list(ROLE_CUES[str(_role(slot))]["any"])
    words = slot.name.lower().split("_")
    names = {" ".join(words), *(w for w in words if len(w) >= 4)}
    names |= {fold(label) for label in slot.labels.values() if label}  # 原因是…, 金额改成…
    names |= {  # 还车改到…: a label without what it is ("还车日期" is said "还车")
        stem
        for label in slot.labels.values()
        if label and (stem := _LABEL_TAIL.sub("", fold(label))) != fold(label) and len(stem) >= 2
    }
    out: list[tuple[str, bool]] = []
    for cue in [*declared, *sorted(names)]:
        if "{}" in cue:
            before = cue.strip().startswith("{}")
            out.append((cue.replace("{}", "").strip(), before))
            continue
        out.append((cue, False))
    return [(c, b) for c, b in out if c]


_LABEL_TAIL = re.compile(r"(?:日期|时间|城市|地址|电话|号码|人数|金额|姓名|名字|方式)$")


_TERMS: dict[int, tuple[weakref.ReferenceType[Slot], dict[str, str]]] = {}
"""Each choice slot's terms, built once (a slot is declared once and never changes)."""


def _choice_terms(slot: Slot) -> dict[str, str]:
    """Each way of writing a choice -> the choice: its name and synonyms, and each of those
    with its number joined or apart and said in Chinese ("pixel8", "小米十四"). Read only."""
    known = _TERMS.get(id(slot))
    if known is not None and known[0]() is slot:
        return known[1]
    terms = _written_choices(slot)
    if len(_TERMS) > 4096:  # templates come and go in a long test run: keep it bounded
        _TERMS.clear()
    _TERMS[id(slot)] = (weakref.ref(slot), terms)
    return terms


def _written_choices(slot: Slot) -> dict[str, str]:
    assert slot.choices is not None
    named = [(c, c) for c in slot.choices] + list(slot.synonyms.items())
    terms: dict[str, str] = {}
    for written, choice in named:
        terms.setdefault(" ".join(fold(written).split()), choice)
    for written, choice in named:
        for variant in _number_variants(" ".join(fold(written).split())):
            terms.setdefault(variant, choice)
    return terms


def _number_variants(term: str) -> list[str]:
    """ "iphone 16" -> "iphone16", "iphone 十六"; "苹果16" -> "苹果十六"."""
    if not re.search(r"\d", term):
        return []
    joined = re.sub(r"(?<=[^\W\d_])\s+(?=\d)", "", term)
    apart = re.sub(r"(?<=[a-z])(?=\d)", " ", term)

    def spoken(m: re.Match[str]) -> str:
        return number_to_cn(int(m.group())) or m.group()

    said = [re.sub(r"\d+", spoken, t) for t in (term, joined)]
    # "小米的14": a Chinese brand, 的, its number
    possessive = [re.sub(r"(?<=[\u3400-\u9fff])(?=\d)", "的", t) for t in (term, joined)]
    variants = [joined, apart, *said, *possessive]
    return [v for v in dict.fromkeys(variants) if v != term]


# --- one utterance -------------------------------------------------------------------------


@dataclass
class _Item:
    """Something found in the text: a date, a choice word, an amount, or a blocker."""

    kind: str
    start: int
    end: int
    value: Any = None
    slot: str | None = None
    relevant: bool = True
    used: bool = False
    reason: str | None = None


@dataclass
class _Candidate:
    value: Any
    start: int
    end: int
    negated: bool
    loose: bool = False
    source: str = "cue"


@dataclass
class _Hit:
    start: int
    end: int
    roles: list[tuple[Slot, str, bool]]
    used: bool = False
    """Whether a value was read at this cue (free text keeps the words of an unused one)."""


class _Reader:
    def __init__(
        self,
        template: TaskTemplate,
        text: str,
        *,
        today: date,
        expecting: str | None,
        correction: bool,
        confirming: bool = False,
        opening: bool = False,
        language: str | None = None,
        held: Mapping[str, Any] | None = None,
    ) -> None:
        self.template = template
        self.held = dict(held or {})
        self.language = language or ("zh" if any(map(is_cjk, text)) else "en")
        self.confirming = confirming
        self.opening = opening
        self.text = text
        self.folded = fold(text)
        self.plain = fold(text, lower=False)
        self.cased = any(ch.isupper() for ch in text)
        self.today = today
        self.expecting = template.slot(expecting) if expecting else None
        self.correction = correction
        self.kinds = {slot.name: extractor_of(slot) for slot in template.slots}
        self.units = _units(template, self.kinds)
        self.items: list[_Item] = []
        self.claims: list[tuple[int, int]] = []
        self.hits: list[_Hit] = []
        self.anchors = 0
        self.cands: dict[str, list[_Candidate]] = {slot.name: [] for slot in template.slots}
        self.errors: dict[str, str] = {}
        self.numbers: list[NumberMatch] = []

    @property
    def about(self) -> str:
        """What the task is about, in its own words (type, titles, triggers)."""
        t = self.template
        words = [t.type.replace("_", " "), *t.titles.values()]
        words += [w for listed in t.triggers.values() for w in listed]
        return " | ".join(words)

    # -- spans

    def taken(self) -> list[tuple[int, int]]:
        return [*self.claims, *((i.start, i.end) for i in self.items)]

    def claim(self, start: int, end: int) -> None:
        self.claims.append((start, end))

    def negated(self, start: int) -> bool:
        head = self.folded[max(0, start - 24) : start]
        return bool(_NEGATION.search(head))

    def add(
        self,
        slot: Slot,
        value: Any,
        start: int,
        end: int,
        *,
        loose: bool = False,
        source: str = "cue",
    ) -> None:
        source = "loose" if loose else source
        if self.kinds[slot.name] == "place" and isinstance(value, str):
            value = places.canonical(value, self.language)
        if self.kinds[slot.name] == "person" and isinstance(value, str) and not self.cased:
            value = value.title()  # "marcus johnson", typed all in lower case, on a ticket
        self.cands[slot.name].append(
            _Candidate(value, start, end, self.negated(start), loose=loose, source=source)
        )

    def next_stop(self, pos: int, *, free: bool = False) -> int:
        stops = [len(self.text)]
        stops += [h.start for h in self.hits if h.start >= pos]
        stops += [s for s, _ in self.claims if s >= pos]
        stops += [
            i.start
            for i in self.items
            if i.start >= pos and (not free or (i.relevant and i.kind != "block"))
        ]
        return min(stops)

    def prev_stop(self, pos: int) -> int:
        stops = [0]
        stops += [h.end for h in self.hits if h.end <= pos]
        stops += [e for _, e in self.claims if e <= pos]
        stops += [i.end for i in self.items if i.end <= pos]
        return max(stops)

    # -- steps

    def patterns(self) -> None:
        for slot in self.template.slots:
            if slot.pattern is None or slot.kind != "text":
                continue
            bounded = rf"(?<![A-Za-z0-9])(?:{slot.pattern})(?![A-Za-z0-9])"
            for flags in (0, re.IGNORECASE):
                found = False
                for m in re.finditer(bounded, self.plain, flags):
                    value = m.group()
                    if flags and not re.fullmatch(slot.pattern, value):
                        value = value.upper()
                        if not re.fullmatch(slot.pattern, value):
                            continue
                    if overlaps(m.start(), m.end(), self.claims):
                        continue
                    self.add(slot, value, m.start(), m.end(), source="pattern")
                    self.claim(m.start(), m.end())
                    self.anchors += 1
                    found = True
                if found:
                    break
            if not found:
                self._code_variants(slot)

    def _code_variants(self, slot: Slot) -> None:
        """An identifier typed loosely: "ORD 10001", "ord10002", "ord-10002" for the pattern
        ``ORD-\\d{5}``: letters and digits, tried with and without the dash, upper-cased."""
        assert slot.pattern is not None
        for m in _CODE.finditer(self.plain):
            if overlaps(m.start(), m.end(), self.claims):
                continue
            letters, digits = m.group("letters").upper(), m.group("digits")
            for value in (f"{letters}-{digits}", f"{letters}{digits}", f"{letters} {digits}"):
                if re.fullmatch(slot.pattern, value):
                    self.add(slot, value, m.start(), m.end(), source="pattern")
                    self.claim(m.start(), m.end())
                    self.anchors += 1
                    return
        self._bare_digits(slot)

    def _bare_digits(self, slot: Slot) -> None:
        """The digits of an identifier whose letters go without saying: "order #10003",
        "订单号是10001" (after one of the slot's cues), or "10001" when it was asked for."""
        assert slot.pattern is not None
        prefix = re.match(r"\^?([A-Za-z]+)", slot.pattern)
        if prefix is None:
            return
        letters = prefix.group(1).upper()
        cues = [" ".join(fold(c).split()) for c, before in _cues(slot, "order_id") if not before]
        asked = self.expecting is not None and self.expecting.name == slot.name
        for m in re.finditer(r"(?<![A-Za-z0-9\-])#?(\d{3,})(?!\d|[.,]\d)", self.plain):
            if overlaps(m.start(), m.end(), self.claims):
                continue
            head = self.folded[: m.start()].rstrip()
            head = _CONNECTOR_TAIL.sub("", head)
            cued = any(head.endswith(c) for c in cues if c)
            if not (cued or asked):
                continue
            for value in (f"{letters}-{m.group(1)}", f"{letters}{m.group(1)}"):
                if re.fullmatch(slot.pattern, value):
                    self.add(slot, value, m.start(), m.end(), source="pattern")
                    self.claim(m.start(), m.end())
                    self.anchors += 1
                    return

    def dates(self) -> None:
        relevant = any(kind == "date" for kind in self.kinds.values())
        wanted = [s for s in self.template.slots if self.kinds[s.name] == "date"]
        if self.expecting is not None and self.expecting in wanted:
            wanted = [self.expecting]
        past = bool(wanted) and all(s.direction == "past" for s in wanted)
        for c in scan_dates(self.text, today=self.today, past=past):
            if overlaps(c.start, c.end, self.taken()):
                continue
            self.items.append(_date_item(c, relevant))

    def _weak(self, hit: _Hit) -> bool:
        return " ".join(self.folded[hit.start : hit.end].split()) in WEAK_CUES

    def slots_of(self, *kinds: str) -> list[Slot]:
        return [s for s in self.template.slots if self.kinds[s.name] in kinds]

    def contacts(self) -> None:
        """Phone numbers, email addresses and street addresses, wherever they are (only for
        a template that has such a slot: elsewhere their digits are other things)."""
        phones = self.slots_of("phone")
        found: list[tuple[str, int, int, str]] = []
        # a kind's reader is imported by the first template that has it (start-up)
        if phones:
            from .contacts import regions, scan_phones

            order = regions(self.language, phones[0].region)
            found += [("phone", f.start, f.end, f.value) for f in scan_phones(self.text, order)]
        if self.slots_of("email"):
            from .contacts import scan_emails

            found += [("email", f.start, f.end, f.value) for f in scan_emails(self.text)]
        if self.slots_of("address"):
            from .addresses import scan_addresses

            found += [("address", a.start, a.end, a.value) for a in scan_addresses(self.text)]
        for kind, start, end, value in found:
            if not overlaps(start, end, self.taken()):
                self.items.append(_Item(kind, start, end, value))

    def times(self) -> None:
        """Times of day, before dates read "12点" or "19:30" as anything else."""
        slots = self.slots_of("time")
        if not slots:
            return
        from .times import scan_times, settle

        held = self.held.get(slots[0].name)
        for c in scan_times(self.text):
            if overlaps(c.start, c.end, self.taken()):
                continue
            value = settle(c, self.text, held if isinstance(held, str) else None, about=self.about)
            self.items.append(
                _Item("time", c.start, c.end, value, reason="bare" if c.bare else None)
            )

    def names(self) -> None:
        """A person's name said in free phrasing ("病人叫刘洋", "姓李", "王先生", "under
        Garcia"): the one person slot's value."""
        people = self.slots_of("person")
        if len(people) != 1 or people[0].pattern is not None:
            return
        from .names import scan_names

        for c in scan_names(self.text):
            if not overlaps(c.start, c.end, self.taken()):
                self.add(people[0], c.value, c.start, c.end)
                self.claim(c.start, c.end)
                self.anchors += 1

    def counts(self) -> None:
        """Numbers said with what a count slot counts ("3 nights", "两位", "just me")."""
        units = {u: name for name, u in self.units.items()}
        if not units:
            return
        if "people" in units and "tickets" not in units:  # "2 train tickets", 两张票: people
            units["tickets"] = units["people"]
        from .counts import scan_counts

        for c in scan_counts(self.text, list(units)):
            if not overlaps(c.start, c.end, self.taken()):
                self.items.append(_Item("count", c.start, c.end, c.value, slot=units[c.unit]))

    def choices(self) -> None:
        for slot in self.template.slots:
            if self.kinds[slot.name] != "choice":
                continue
            terms = _choice_terms(slot)
            words = [w for w in slot.name.lower().split("_") if len(w) >= 3]
            around = re.compile(rf"\s*(?:{'|'.join(map(re.escape, words))})(?![a-z])")
            for m in phrases(terms).finditer(self.folded):
                start, end = m.start(), m.end()
                if overlaps(start, end, self.taken()):
                    continue
                term = " ".join(m.group().split())
                if term in ADVERBS and self._adverb(start, end, slot):
                    continue
                if term.isascii():
                    following = re.match(r"\s+([a-z]+)", self.folded[end:])
                    after = following.group(1) if following else ""
                    if after in NOT_CHOICE_NEXT or (term in ORDINALS and after in ORDINAL_NOT_NEXT):
                        continue
                tail = around.match(self.folded, end) if words else None
                if tail:
                    end = tail.end()
                self.items.append(_Item("choice", start, end, terms[term], slot=slot.name))
            if any(i.kind == "choice" and i.slot == slot.name for i in self.items):
                continue
            asked = self.expecting is not None and self.expecting.name == slot.name
            slips = fuzzy.latin(self.folded, terms, asked=asked)
            if asked:
                slips += fuzzy.chinese(self.folded, terms)
            for start, end, value in slips:
                if not overlaps(start, end, self.taken()):
                    self.items.append(_Item("choice", start, end, value, slot=slot.name))

    def _adverb(self, start: int, end: int, slot: Slot) -> bool:
        """Whether the choice word opens the sentence as an adverb: "First, I need..." does
        not choose first class."""
        if self.expecting is not None and self.expecting.name == slot.name:
            return False
        opening = not self.folded[:start].strip() or self.folded[:start].rstrip()[-1] in ".!?"
        rest = self.folded[end:].lstrip()
        return opening and rest.startswith(",") and bool(rest[1:].strip())

    def amounts(self) -> None:
        for slot in self.template.slots:  # words that stand for a value: "全退" -> "all"
            if slot.kind != "number" or not slot.synonyms:
                continue
            terms = {" ".join(fold(k).split()): v for k, v in slot.synonyms.items()}
            for m in phrases(terms).finditer(self.folded):
                if not overlaps(m.start(), m.end(), self.taken()):
                    self.add(slot, terms[" ".join(m.group().split())], m.start(), m.end())
                    self.claim(m.start(), m.end())
                    self.anchors += 1
        relevant = any(kind in ("amount", "number") for kind in self.kinds.values())
        for n in find_numbers(self.text):
            if overlaps(n.start, n.end, self.taken()):
                continue
            self.numbers.append(n)
            if n.currency:
                self.items.append(_Item("money", n.start, n.end, n.value, relevant=relevant))

    def blockers(self) -> None:
        for m in BLOCKERS.finditer(self.folded):
            if not overlaps(m.start(), m.end(), self.taken()):
                self.items.append(_Item("block", m.start(), m.end(), relevant=False))

    def cues(self) -> None:
        table, pattern = _cue_table(self.template, self.kinds)
        if not table:
            return
        for m in pattern.finditer(self.folded):
            if overlaps(m.start(), m.end(), self.taken()) or self._in_a_place(m.start(), m.end()):
                continue
            self.hits.append(_Hit(m.start(), m.end(), table[" ".join(m.group("cue").split())]))
        for hit in list(self.hits):
            for direction in (True, False):
                for slot, kind, before in hit.roles:
                    if before != direction:
                        continue
                    found = (
                        self.capture_before(hit, kind)
                        if before
                        else self.capture_after(hit, slot, kind)
                    )
                    if found is None:
                        continue
                    value, start, end = found
                    start, end = min(start, hit.start), max(end, hit.end)
                    hit.used = True
                    self.add(slot, value, start, end)
                    self.claim(start, end)
                    self.anchors += 1
                    break

    def _in_a_place(self, start: int, end: int) -> bool:
        """Whether a cue word is part of a city's name ("city" in "the Windy City", "to" in
        "Toronto" is not a word): then it introduces nothing."""
        if not self.slots_of("place"):
            return False
        found = places.gazetteer()
        for m in re.finditer(r"(?<![^\W\d_])[^\W\d_]", self.text[max(0, start - 24) : start]):
            begin = max(0, start - 24) + m.start()
            hit = found.at(self.text, begin)
            if hit is not None and hit[1] >= end:
                return True
        return False

    def _item_after(self, pos: int, kind: str, slot: Slot) -> _Item | None:
        skip = _CONNECTOR.match(self.folded, pos)
        start = skip.end() if skip else pos
        for item in self.items:
            if item.kind == kind and item.start == start and not item.used:
                if kind in ("choice", "count") and item.slot != slot.name:
                    continue
                return item
        return None

    def capture_after(self, hit: _Hit, slot: Slot, kind: str) -> tuple[Any, int, int] | None:
        if kind in ("date", "choice", "time", "phone", "email", "address", "count"):
            item = self._item_after(hit.end, kind, slot)
            if item is not None and item.value is not None:
                item.used = True
                return item.value, item.start, item.end
            if kind in ("date", "choice", "time", "phone", "email"):
                return None
        if kind in ("amount", "number", "count"):
            skip = _CONNECTOR.match(self.folded, hit.end)
            start = skip.end() if skip else hit.end
            me = re.compile(r"(?:给)?我|me\s+").match(self.folded, start)  # 退我三十, refund me 30
            start = me.end() if me else start
            for n in self.numbers:
                if n.start == start:
                    for item in self.items:
                        if item.kind == "money" and item.start == n.start:
                            item.used = True
                    return n.value, n.start, n.end
            return None
        if slot.pattern is not None:
            kind = "order_id"  # a code: one token with a digit, checked by the pattern
        stop = self.next_stop(hit.end, free=kind == "text")
        found = _read_after(self, hit.end, stop, kind)
        cue = " ".join(self.folded[hit.start : hit.end].split())
        # "I'm Li Lei" names someone, "I'm tired" does not.
        weak = cue in WEAK_CUES
        words = str(found[0]).split() if found is not None else []
        capitalised = all(w[:1].isupper() for w in words)
        # in a message typed all in lower case, "for marcus johnson" still names someone
        # (among other values of the Task: "somewhere famous for soup dumplings" is no name)
        values = len(self.claims) + sum(i.kind in ("date", "choice") for i in self.items)
        lower_name = not self.cased and kind == "person" and len(words) >= 2 and values >= 2
        if found is not None and weak and not capitalised and not lower_name:
            return None
        if found is not None and weak and kind == "person":
            after = self.text[found[2] : found[2] + 2]
            items = [(i.start, i.end) for i in self.items]
            if (
                _is_place(str(found[0]))
                or re.match(r"[\w\-#]\d|\d", after)
                or overlaps(found[1], found[2], items)
            ):
                return None  # "a flight for Beijing", "back for ORD-10002"
        if found is not None and _says_nothing(str(found[0]), kind):
            return None  # "原因啊", "目的地是哪里", "back to ORD-10003"
        return found

    def capture_before(self, hit: _Hit, kind: str) -> tuple[Any, int, int] | None:
        if kind not in ("place", "person", "text"):
            return None
        return _read_before(self, self.prev_stop(hit.start), hit.start, kind)

    def loose(self) -> None:
        self.spans()
        self.loose_items()
        self.anywhere_places()
        date_slots = [s for s in self.template.slots if self.kinds[s.name] == "date"]
        free = [s for s in date_slots if not self.cands[s.name]]
        dates = [i for i in self.items if i.kind == "date" and not i.used and i.value is not None]
        settled = all(s.name in self.held and s != self.expecting for s in free)
        if settled and not self.correction:  # "it was a Christmas present": not a new date
            dates = [i for i in dates if not holidays.find(self.text[i.start : i.end])]
        if len(dates) == 1 and self.expecting in free:
            free = [self.expecting]  # "tuesday", asked when the car comes back
        if len(free) == 1:
            for item in dates:
                self.add(free[0], item.value, item.start, item.end, loose=True)
        else:
            for slot, item in zip(free, dates, strict=False):
                self.add(slot, item.value, item.start, item.end, loose=True)
        for item in self.items:
            if item.kind == "choice" and not item.used and item.slot is not None:
                slot = self.template.slot(item.slot)
                self.add(slot, item.value, item.start, item.end, loose=True)
                self.anchors += 1
        money = [s for s in self.template.slots if self.kinds[s.name] == "amount"]
        money = [s for s in money if not self.cands[s.name]]
        if money:
            for item in self.items:
                if item.kind == "money" and not item.used:
                    # "49 bucks", "¥80": an amount by its currency, which only this slot takes
                    self.add(money[0], item.value, item.start, item.end, source="number")
                    back = _BACK.match(self.folded, item.end)
                    if back:
                        self.claim(item.start, back.end())
        numeric = [s for s in self.template.slots if self.kinds[s.name] in ("amount", "number")]
        asked_other = self.expecting is not None and self.expecting.name not in (
            s.name for s in numeric
        )
        asked_other = asked_other and not self.correction  # "wait, make that 90"
        if len(numeric) == 1 and not self.cands[numeric[0].name] and not asked_other:
            # A bare number changes the one number slot at the confirmation ("150"), and
            # anywhere when it stands as a clause of its own ("refund ORD-10003, broken, 100").
            for n in self.numbers:
                if overlaps(n.start, n.end, self.taken()):
                    continue
                back = _BACK.match(self.folded, n.end)  # "two hundred back", "my 49 bucks back"
                if self.confirming or back or self._own_clause(n.start, n.end):
                    self.add(numeric[0], n.value, n.start, n.end, source="number")
                    self.claim(n.start, back.end() if back else n.end)
            loose = [n for n in self.numbers if not overlaps(n.start, n.end, self.taken())]
            held = self.held.get(numeric[0].name)
            if self.correction and held is not None and not self.cands[numeric[0].name]:
                fresh = [n for n in loose if n.value != held and not self.negated(n.start)]
                if len(fresh) == 1:  # "actually more like 4,200", "金额不对，是1800"
                    n = fresh[0]
                    self.add(numeric[0], n.value, n.start, n.end, source="number")
                    self.claim(n.start, n.end)
            if self.opening and len(loose) == 1 and not self.cands[numeric[0].name]:
                # "refund ORD-10001 three hundred, they're defective": the message's one
                # number, unless it counts things ("3 items") or names a model ("Pixel 8")
                n = loose[0]
                counts = _COUNTED.match(self.folded, n.end)
                if not counts and not _part_of_a_name(self.text, n.start):
                    self.add(numeric[0], n.value, n.start, n.end, loose=True)
                    self.claim(n.start, n.end)
        for slot in date_slots:
            bad = [i for i in self.items if i.kind == "date" and i.value is None and not i.used]
            if not self.cands[slot.name] and bad and bad[0].reason:
                self.errors[slot.name] = Problem(
                    "invalid_date", bad[0].reason, value=self.text[bad[0].start : bad[0].end]
                )
                break

    def loose_items(self) -> None:
        """Times, phones, emails, addresses and counts nobody introduced: each to the free
        slot of its kind (a count to the slot that counts its unit), in order."""
        for kind in ("time", "phone", "email", "address"):
            free = [s for s in self.slots_of(kind) if not self.cands[s.name]]
            items = [i for i in self.items if i.kind == kind and not i.used]
            if kind == "time" and any(i.reason != "bare" for i in items):
                items = [i for i in items if i.reason != "bare"]  # "at 7" only when alone
            if self.correction and len(free) == 1:
                items = items[-1:]  # "不是7点半，是8点": the last is meant
            for slot, item in zip(free, items, strict=False):
                self.add(slot, item.value, item.start, item.end, source="loose")
                item.used = True
                self.anchors += 1
        for item in self.items:
            if item.kind == "count" and not item.used and item.slot is not None:
                slot = self.template.slot(item.slot)
                if not self.cands[slot.name] or self.correction:
                    self.add(slot, item.value, item.start, item.end, source="loose")
                    item.used = True
                    self.anchors += 1
        people = [n for n, u in self.units.items() if u == "people" and not self.cands[n]]
        if len(people) == 1:  # "a table for 4 tomorrow": a number for whom
            for m in re.finditer(r"(?<![a-z])(?:for|of)\s+", self.folded):
                n = next((n for n in self.numbers if n.start == m.end()), None)
                if n is None:
                    found = find_numbers(self.text[m.end() : m.end() + 12])
                    n = found[0] if found and found[0].start == 0 else None
                    if n is not None:
                        n = NumberMatch(n.value, m.end() + n.start, m.end() + n.end, n.currency)
                if n is None or n.currency or overlaps(n.start, n.end, self.taken()):
                    continue
                if _COUNTED.match(self.folded, n.end):
                    continue  # "for 2 nights" counts nights
                self.add(self.template.slot(people[0]), n.value, n.start, n.end, source="loose")
                self.claim(n.start, n.end)
                break

    def spans(self) -> None:
        """A stay or a rental said as a span: "from the 15th to the 18th" gives the first day
        and the nights between them (or the days, for a slot counting days); "for a week
        starting Monday" gives the day back for a second date slot."""
        dates = [i for i in self.items if i.kind == "date" and not i.used and i.value]
        date_slots = [s for s in self.slots_of("date") if not self.cands[s.name]]
        spans = [n for n, u in self.units.items() if u in ("nights", "days")]
        if len(dates) == 2 and len(date_slots) == 1 and spans:
            first, second = dates
            between = self.folded[first.end : second.start]
            if _RANGE.fullmatch(between):
                gap = (date.fromisoformat(second.value) - date.fromisoformat(first.value)).days
                if gap > 0:
                    self.add(date_slots[0], first.value, first.start, first.end, source="loose")
                    first.used = second.used = True
                    if not self.cands[spans[0]] or self.units[spans[0]] == "nights":
                        count = gap if self.units[spans[0]] == "nights" else gap + 1
                        self.cands[spans[0]] = [_Candidate(count, second.start, second.end, False)]
                        self.cands[spans[0]][0].source = "loose"
                    self.anchors += 1
            return
        if len(dates) == 1 and len(date_slots) == 2:
            m = _DURATION.search(self.folded)
            if m:
                days = _days(m)
                if days:
                    start, back = date_slots
                    day = date.fromisoformat(dates[0].value)
                    self.add(start, dates[0].value, dates[0].start, dates[0].end, source="loose")
                    self.add(back, (day + timedelta(days=days)).isoformat(), m.start(), m.end())
                    self.cands[back.name][-1].source = "loose"
                    dates[0].used = True
                    self.claim(m.start(), m.end())

    def anywhere_places(self) -> None:
        """A known city named anywhere is the value of the one place slot that has no role
        (a hotel's city, where a car is picked up), when nothing else gave it one."""
        slots = [s for s in self.slots_of("place") if s.pattern is None]
        free = [s for s in slots if not self.cands[s.name]]
        if len(free) != 1 or (len(slots) > 1 and _role(free[0]) is not None):
            return
        cities = self._cities() or self._near_cities()
        if cities:
            city, start, end = cities[-1] if self.correction else cities[0]
            self.add(free[0], city, start, end, source="loose")
            self.claim(start, end)
            self.anchors += 1

    def _own_clause(self, start: int, end: int) -> bool:
        """Whether the span is all of its clause but for currency words and spaces."""
        head = re.search(r"[^,，;；。!！?？\n]*$", self.text[:start])
        tail = re.match(r"[^,，;；。!！?？\n]*", self.text[end:])
        around = (head.group() if head else "") + " " + (tail.group() if tail else "")
        return not re.sub(
            r"[\s¥$€£元块人民币吧啊呀了的]|dollars?|bucks|rmb|yuan|please|like|about|around"
            r"|maybe|roughly|just|only|back|make (?:it|that)|change (?:it |that )?to|wait|actually"
            r"|worth|valued at|大概|大约|差不多|估计|就|只|值|改成|改为|换成",
            "",
            around.lower(),
        )

    def masked(self, *, free: bool = False) -> str:
        """The text with every value and cue blotted out (``free``: only the cues that gave
        a value, since "headache for three days" is one symptom, not a name after "for")."""
        chars = list(self.text)
        spans = [*self.claims, *((i.start, i.end) for i in self.items if i.kind != "block")]
        spans += [(h.start, h.end) for h in self.hits if h.used or not free or not self._weak(h)]
        for start, end in spans:
            for i in range(start, end):
                chars[i] = "\x00"
        return "".join(chars)

    def swapped(self) -> None:
        """ "to Chengdu, no, Chongqing": the word after a taken-back value, with no cue of its
        own, is a new value for the slot of the value just before it."""
        if not self.correction:
            return
        for m in _SWAP.finditer(self.folded):
            before = [
                (c.end, name)
                for name, cands in self.cands.items()
                for c in cands
                if c.end and c.end <= m.start()
            ]
            if not before:
                continue
            name = max(before)[1]
            if any(c.start >= m.end() for c in self.cands[name]):
                continue  # "Friday, no, Saturday": the date is read already
            slot = self.template.slot(name)
            kind = self.kinds[name]
            if kind not in ("place", "person") or slot.pattern is not None:
                continue
            found = _read_after(self, m.end(), self.next_stop(m.end()), kind)
            if found is not None and not _says_nothing(str(found[0]), kind):
                self.add(slot, found[0], found[1], found[2])
                self.claim(found[1], found[2])

    def replaced(self) -> None:
        """A held value named as the old one ("JFK instead of Newark", "不是苏州，是杭州",
        "change Newark to JFK", "把张伟改成张玮"): the new value said with it replaces that
        slot's value, whichever slot is being asked."""
        if not self.correction or not self.held:
            return
        for slot in self.template.slots:
            kind = self.kinds[slot.name]
            held = self.held.get(slot.name)
            if kind not in ("place", "person", "text") or not isinstance(held, str):
                continue
            if slot.pattern is not None or len(held) < 2:
                continue
            if any(fold(str(c.value)) != fold(held) for c in self.cands[slot.name]):
                continue
            at = self.folded.find(fold(held))
            if at < 0:
                continue
            end = at + len(held)
            found = None
            marker = _OLD_BEFORE.search(self.folded[:at])
            after = _NEW_AFTER.match(self.folded, end)
            if marker and marker["then"] is None:  # "JFK instead of Newark"
                found = _read_before(self, self.prev_stop(marker.start()), marker.start(), kind)
            elif after and (marker or after["to"]):  # "不是苏州，是杭州", "Newark to JFK"
                found = _read_after(self, after.end(), self.next_stop(after.end()), kind)
            if (
                found is not None
                and not _says_nothing(str(found[0]), kind)
                and fold(str(found[0])) != fold(held)
            ):
                for name, cands in self.cands.items():  # "to Boston" read by its cue
                    keep = [c for c in cands if not overlaps(c.start, c.end, [found[1:]])]
                    self.cands[name] = keep if name != slot.name else []
                self.add(slot, found[0], found[1], found[2])
                self.claim(min(found[1], at), max(found[2], end))

    def named(self) -> None:
        """A clause that is nothing but a capitalised name ("for my mom, Li Fang, from
        Guangzhou", "economy, Tom Hughes") is the one person slot's value, when no cue gave
        one; a place or a choice is not a name."""
        people = [s for s in self.template.slots if self.kinds[s.name] == "person"]
        if len(people) != 1 or self.cands[people[0].name] or not self.cased:
            return
        slot = people[0]
        masked = self.masked()
        for m in re.finditer(r"[^,;:!?\n\x00]+", masked):
            clause = m.group().strip()
            words = clause.split()
            if not 2 <= len(words) <= 4 or not all(_WORD.fullmatch(w) for w in words):
                continue
            if not all(w[0].isupper() for w in words) or any(
                fold(w) in EN_NAME_STOP for w in words
            ):
                continue
            if _is_place(clause) or _shape_problem(clause, "person") is not None:
                continue
            start = m.start() + m.group().index(clause)
            self.add(slot, clause, start, start + len(clause), source="loose")
            self.claim(start, start + len(clause))
            return

    def fragments(self, *, free: bool) -> list[str]:
        """What is left of the utterance once every value read from it is taken out, in
        pieces, trimmed of filler; ``free`` text keeps its clauses together."""
        masked = self.masked(free=free)
        pieces = []
        for m in re.finditer(r"[^\x00]+", masked):
            piece = m.group()
            if m.end() < len(masked):  # "on the train in [Seattle]": the place was its object
                piece = _CUT_PREPOSITION.sub("", piece)
            pieces.append(piece)
        if not free:
            pieces = [p for piece in pieces for p in re.split(_CLAUSE_SPLIT, piece)]
        out: list[str] = []
        for piece in pieces:
            piece = _trim(piece, free=free)
            if not free:  # "osaka not tokyo" corrects; "the printer is not working" describes
                piece = _not_but(piece)
            if piece and not _starts_negated(piece):
                out.append(piece)
        return out

    def leftover(self) -> None:
        """In the message that starts a task, what is left once its values, its trigger
        words and the request are taken out is the one free-text slot's value (the reason in
        "refund ORD-10003, the screen scratches too easily"). Later, a message that answers
        nothing asked and describes what happened fills the opening slot if it is still empty
        (a claim opened with "insurance claim please", then "my laptop was stolen")."""
        if not self.opening:
            self._late_description()
            return
        free = [
            s
            for s in self.template.slots
            if self.kinds[s.name] == "text"
            and s.pattern is None
            and s.name != self.template.opening_slot
        ]
        names = template_words(self.template)
        opening = self.template.opening_slot
        if opening is not None and not self.cands[opening]:
            # what the message says happened: its clauses that say more than the request and
            # the task's name ("I want to file a claim, my car was rear-ended yesterday")
            plain = _naming_words(self.template)
            clauses = [
                _trim(part, free=True)
                for piece in self.fragments(free=True)
                for part in _CLAUSE.split(_TRAILING_VERB.sub("", piece))
                if _meaningful(_drop(part, plain))
            ]
            if clauses:
                value = ("，" if self.language == "zh" else ", ").join(clauses)
                self.cands[opening].append(_Candidate(value, 0, 0, False, source="rest"))
            return
        if len(free) != 1 or self.cands[free[0].name]:
            return
        names = [*names, *_naming_words(self.template)]  # "furniture" of "furniture delivery"
        pieces = [_drop(p, names) for p in self.fragments(free=True)]
        pieces = [p for p in pieces if _meaningful(p)]
        if pieces:
            value = max(pieces, key=len)
            self.cands[free[0].name].append(_Candidate(value, 0, 0, False, source="rest"))

    def _late_description(self) -> None:
        opening = self.template.opening_slot
        asked = self.expecting
        if opening is None or opening in self.held or asked is None or asked.name == opening:
            return
        if any(self.cands.values()) or self.kinds[opening] != "text":
            return
        if is_yes(self.text) or control_word(self.text) or is_question(self.text):
            return
        if _UNSURE.search(self.folded):
            return  # "I don't know my policy number" says nothing that happened
        if self.text.isascii() and len(self.text.split()) < 3:
            return  # "li.ting@example": a bad answer to what was asked, not a story
        plain = _naming_words(self.template)
        clauses = [
            _trim(part, free=True)
            for piece in self.fragments(free=True)
            for part in _CLAUSE.split(piece)
            if _meaningful(_drop(part, plain)) and len(_drop(part, plain)) >= 6
        ]
        if clauses:
            value = ("，" if self.language == "zh" else ", ").join(clauses)
            self.cands[opening].append(_Candidate(value, 0, 0, False, source="rest"))
            self.errors.pop(asked.name, None)

    def fallback(self) -> None:
        slot = self.expecting
        if slot is None or self.cands[slot.name] or slot.name in self.errors:
            return
        others = [c for n, cs in self.cands.items() if n != slot.name for c in cs if not c.negated]
        if self.correction and others:
            return  # "有点贵，换成经济舱吧": its other words are comment, not this answer
        kind = self.kinds[slot.name]
        if kind in ("amount", "number", "count"):
            from .counts import counts_other

            for n in self.numbers:
                if _part_of_a_name(self.text, n.start):
                    continue  # "苹果15", "my iphone 15 won't charge": a model, not an amount
                own = self.units.get(slot.name)
                counted = [u for name, u in self.units.items() if name != slot.name]
                if kind == "count" and counts_other(self.folded, n.end, own, counted):
                    continue  # "for 2 nights" answers no "how many people?"
                if not overlaps(n.start, n.end, self.taken()):
                    self.add(slot, n.value, n.start, n.end, source="number")
            if self.cands[slot.name]:
                return
        if kind == "time" and self._bare_hour(slot):
            return
        if is_yes(self.text, strict=True) or control_word(self.text) or is_question(self.text):
            return
        pieces = self.fragments(free=kind in ("text", "address"))
        if not pieces:
            return
        if kind in _SHAPED:
            given = ", ".join(pieces)
            code, what = _SHAPED[kind]
            self.errors[slot.name] = Problem(code, f"{given!r} is not {what}", value=given)
            return
        if kind == "place" and slot.pattern is None:
            named = self._cities()  # "oops i meant osaka not tokyo"
            if named:
                city, start, end = named[-1] if self.correction else named[0]
                self.add(slot, city, start, end, source="rest")
                return
        if kind in ("place", "person") and slot.pattern is None:
            # "it's for my son, Tom Hanks": the clause that reads as the answer, if one does
            if kind == "place":  # a known city, or nothing that reads as something else
                shaped = [p for p in pieces if _is_place(p)]
                if not shaped and not any(FALLBACK_STOP.search(fold(p)) for p in pieces):
                    shaped = pieces
            else:
                shaped = [p for p in pieces if _shape_problem(p, kind) is None]
                from .names import looks_chinese_name

                surnamed = [p for p in shaped if looks_chinese_name(p)]
                shaped = surnamed or shaped  # "是我自己，孙丽": the piece with a surname
            if not shaped:
                given = ", ".join(pieces)
                self.errors[slot.name] = _shape_problem(given, kind) or Problem(
                    kind if kind == "place" else "name",
                    f"{given!r} does not look like {'a place' if kind == 'place' else 'a name'}",
                    value=given,
                )
                return
            pieces = shaped
        if kind in ("text", "address"):
            # "my refund please" names the task, it does not answer the question
            names = template_words(self.template)
            said = [p for p in pieces if slot.pattern or _meaningful(_drop(p, names))]
            if said:
                self.cands[slot.name].append(
                    _Candidate(max(said, key=len), 0, 0, False, source="rest")
                )
            return
        if kind == "place":
            pieces = [places.canonical(p, self.language) for p in pieces]
        piece = pieces[-1] if self.correction else pieces[0]
        if kind == "choice":
            value = _choice_prefix(slot, piece)
            if value is not None:
                self.cands[slot.name].append(_Candidate(value, 0, 0, False, source="rest"))
            else:
                self.errors[slot.name] = _reason(slot, piece)
            return
        if kind == "date":
            self.errors[slot.name] = Problem(
                "date", f"{piece!r} is not a date I understand", value=piece
            )
            return
        if kind in ("amount", "number"):
            self.errors[slot.name] = Problem("number", f"{piece!r} is not a number", value=piece)
            return
        problem = _shape_problem(piece, kind) if slot.pattern is None else None
        if problem:
            self.errors[slot.name] = problem
            return
        self.cands[slot.name].append(_Candidate(piece, 0, 0, False, source="rest"))

    def _bare_hour(self, slot: Slot) -> bool:
        """A time asked for and answered by an hour alone ("7", "seven", "7 then")."""
        from .times import TimeCandidate, settle

        for n in self.numbers:
            if overlaps(n.start, n.end, self.taken()) or not float(n.value).is_integer():
                continue
            if 0 <= n.value <= 24:
                held = self.held.get(slot.name)
                bare = TimeCandidate(n.start, n.end, int(n.value) % 24, 0, n.value > 12)
                held_time = held if isinstance(held, str) else None
                value = settle(bare, self.text, held_time, about=self.about)
                self.add(slot, value, n.start, n.end, source="number")
                return True
        return False

    def _cities(self) -> list[tuple[str, int, int]]:
        """The known cities named anywhere in what is left of the message, but for those
        said not to be meant ("not Tokyo"), in order."""
        masked = self.masked()
        found: list[tuple[str, int, int]] = []
        pos = 0
        while pos < len(masked):
            starts_word = pos == 0 or not masked[pos - 1].isalpha() or is_cjk(masked[pos])
            hit = places.gazetteer().at(masked, pos) if starts_word else None
            if hit is None or "\x00" in masked[pos : hit[1]]:
                pos += 1
                continue
            end = hit[1]
            whole = end >= len(masked) or not masked[end].isalpha() or is_cjk(masked[pos])
            if whole and not self.negated(pos):
                found.append((self.text[pos:end], pos, end))
            pos = end
        return found

    def _near_cities(self) -> list[tuple[str, int, int]]:
        """Cities typed with a slip after a word that leads to a place ("a room in san
        fransisco"), as the data spells them."""
        masked = self.masked()
        found: list[tuple[str, int, int]] = []
        for m in _TO_A_PLACE.finditer(fold(masked)):
            near = places.gazetteer().near(masked, m.end(), len(masked))
            if near is not None and "\x00" not in masked[m.end() : near[1]]:
                found.append((near[0], m.end(), near[1]))
        return found

    def guard(self) -> None:
        """A question that no cue or choice ties to this task keeps its loose dates and
        amounts to itself ("what's the weather tomorrow?")."""
        if self.anchors or self.correction or not is_question(self.text):
            return  # "can we do the 17th instead?" asks for a change
        for name, cands in self.cands.items():
            if self.expecting is not None and name == self.expecting.name:
                continue
            self.cands[name] = [c for c in cands if not c.loose]

    def result(self) -> Extraction:
        out = Extraction(errors=dict(self.errors), correction=self.correction)
        for slot in self.template.slots:
            cands = self.cands[slot.name]
            if not cands:
                continue
            kept = [c for c in cands if not c.negated]
            if not kept:
                continue
            if self.kinds[slot.name] == "place":  # 上海 and 上海虹桥 from two cues: the city
                shorter = {str(c.value) for c in kept}
                kept = [
                    c
                    for c in kept
                    if not any(str(c.value).startswith(o) and str(c.value) != o for o in shorter)
                ]
            distinct = {repr(c.value): c.value for c in kept}
            if self.kinds[slot.name] == "place" and len(distinct) > 1:
                known = [c for c in kept if _city(str(c.value)) is not None]
                if known and len(known) < len(kept):  # 回趟家看爸妈…回蓉城: the city
                    kept = known
                    distinct = {repr(c.value): c.value for c in kept}
            if self.kinds[slot.name] == "place" and len(distinct) > 1:
                cities = {_city(str(v)) for v in distinct.values()}
                if len(cities) == 1 and None not in cities:  # 上海 and 虹桥: one city
                    distinct = dict(list(distinct.items())[:1])
                    kept = kept[:1]
            if len(distinct) > 1 and not self.correction:
                # "economy or business?", "明天或者后天": ask rather than guess.
                options = list(distinct.values())[:3]
                shown = ", ".join(str(v) for v in options)
                out.errors[slot.name] = Problem(
                    "ambiguous",
                    f"more than one value given ({shown}); which one?",
                    options=options,
                )
                continue
            chosen = kept[-1] if self.correction else kept[0]
            try:
                out.values[slot.name] = slot.validate(chosen.value)
            except InvalidSlot as exc:
                out.errors[slot.name] = exc.reason
            else:
                out.errors.pop(slot.name, None)
                out.sources[slot.name] = chosen.source
        return out


_CLAUSE_SPLIT = re.compile(r"[。！？!?；;\n，,、：:]+|\.(?:\s|$)")
_UNSURE = re.compile(
    r"(?<![a-z])(?:don'?t know|do not know|not sure|no idea|forgot|can'?t remember)(?![a-z])|"
    r"不知道|不清楚|忘了|不记得|记不得"
)
_CLAUSE = re.compile(r"[，,;；。!！?？：]+|:(?=\s)|\.(?:\s|$)")
"""Where a free-text message splits into clauses of its own."""
_SHAPED = {
    "time": ("time", "a time of day I understand"),
    "phone": ("phone", "a phone number"),
    "email": ("email", "an email address"),
    "count": ("number", "a number"),
}
"""A slot asked for and answered with words that are none of its kind: why it is refused."""
_RANGE = re.compile(
    r"\s*(?:-|–|—|~|to|till|until|through|thru|and|到|至|住到|直到|~)\s*(?:the\s+)?", re.IGNORECASE
)
"""What stands between the two days of a span ("the 15th to the 18th", "20号到23号")."""
_DURATION = re.compile(
    r"(?<![a-z])(?:for|staying|lasting)?\s*(?P<n>a|one|two|three|four|five|six|seven|\d{1,2})\s+"
    r"(?P<unit>weeks?|days?|nights?)(?![a-z])|(?P<zn>[一二两三四五六七1-9])(?:个)?(?P<zunit>星期|礼拜|周|天)"
)
_SMALL = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_SMALL_ZH = {"一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7}


def _days(m: re.Match[str]) -> int | None:
    """How many days a duration says ("a week" 7, "3 days" 3, "两周" 14)."""
    if m.group("n"):
        n = _SMALL.get(m.group("n")) or (int(m.group("n")) if m.group("n").isdigit() else 0)
        return n * (7 if m.group("unit").startswith("week") else 1)
    word = m.group("zn")
    n = int(word) if word.isdigit() else _SMALL_ZH[word]
    return n * (1 if m.group("zunit") == "天" else 7)


def _units(template: TaskTemplate, kinds: Mapping[str, str]) -> dict[str, str]:
    """Each count (or measured number) slot -> the unit it counts, when its words say."""
    out: dict[str, str] = {}
    for slot in template.slots:
        if kinds[slot.name] in ("count", "number"):
            from .counts import unit_of

            unit = unit_of(slot, " ".join(slot.name.lower().split("_")), said_of(slot))
            if unit is not None:
                out[slot.name] = unit
    return out


def _date_item(c: DateCandidate, relevant: bool) -> _Item:
    value = c.value.isoformat() if c.value is not None else None
    return _Item("date", c.start, c.end, value, relevant=relevant, reason=c.reason)


_CUE_TABLES: weakref.WeakKeyDictionary[
    TaskTemplate, tuple[dict[str, list[tuple[Slot, str, bool]]], re.Pattern[str]]
] = weakref.WeakKeyDictionary()


def _cue_table(
    template: TaskTemplate, kinds: dict[str, str]
) -> tuple[dict[str, list[tuple[Slot, str, bool]]], re.Pattern[str]]:
    """Each cue phrase of a template's slots with the roles it plays, and one pattern for all
    of them; built once per template (a turn only matches it)."""
    known = _CUE_TABLES.get(template)
    if known is not None:
        return known
    table: dict[str, list[tuple[Slot, str, bool]]] = {}
    for slot in template.slots:
        kind = kinds[slot.name]
        for cue, before in _cues(slot, kind):
            key = " ".join(fold(cue).split())
            roles = table.setdefault(key, [])
            if not any(r[0].name == slot.name and r[2] == before for r in roles):
                roles.append((slot, kind, before))
    source = phrase_source(table)
    built = (table, re.compile(f"(?P<cue>{source}){_CUE_SUFFIX}?") if source else NEVER)
    _CUE_TABLES[template] = built
    return built


def _strip_phrases(text: str, head: re.Pattern[str] | None, tail: re.Pattern[str]) -> str:
    while True:
        before = text
        text = strip_punct(text)
        folded = fold(text)
        if head is not None:
            m = head.match(folded)
            if m and m.end() > 0:
                text = text[m.end() :]
                continue
        for m in tail.finditer(folded):
            if m.end() == len(folded) and m.start() > 0:
                text = text[: m.start()]
                break
        if text == before:
            return text


def _trim(text: str, *, free: bool = False) -> str:
    """``text`` without filler around it; free text ("wrong color") keeps all but
    hesitations and politeness."""
    if free:
        text = _DANGLING.sub("", text)  # "the left bud crackles - and get"
        return _strip_phrases(text, FREE_HEAD, POLITE_TAIL).strip()
    return _strip_phrases(text, FILLER_HEAD, FILLER_TAIL).strip()


def _not_but(text: str) -> str:
    for pattern in _NOT_BUT:
        m = pattern.match(text)
        if m:
            return _trim(m.group("new"))
    return text


def _starts_negated(text: str) -> bool:
    return bool(re.match(r"(?:not|no|never)(?![a-z])|不是|不要|别", fold(text)))


@once_per_template
def template_words(template: TaskTemplate) -> list[str]:
    """The words that name or ask for a task of ``template``: never a slot's value."""
    words = [
        *template.titles.values(),
        *(w for ws in template.triggers.values() for w in ws),
        *(w for ws in template.keywords.values() for w in ws),
    ]
    return sorted({fold(w) for w in words if w}, key=len, reverse=True)


@once_per_template
def _naming_words(template: TaskTemplate) -> list[str]:
    """The words that only name a task (its titles and their words, its keywords), not its
    triggers, which may describe it ("keeps dying", "屏幕碎了")."""
    words = [*template.titles.values(), *(w for ws in template.keywords.values() for w in ws)]
    words += [w for t in template.titles.values() for w in fold(t).split() if len(w) >= 3]
    return sorted({fold(w) for w in words if w}, key=len, reverse=True)


def _drop(piece: str, words: Sequence[str]) -> str:
    """``piece`` without the request and the task's own words, trimmed of filler."""
    folded = fold(piece)
    keep = [True] * len(piece)
    for word in words:  # "deliver" drops "delivered" too
        pattern = (
            rf"(?<![a-z]){re.escape(word)}(?:s|es|d|ed|ing)?(?![a-z])"
            if word.isascii()
            else re.escape(word)
        )
        for m in re.finditer(pattern, folded):
            keep[m.start() : m.end()] = [False] * (m.end() - m.start())
    for m in REQUEST.finditer(folded):
        keep[m.start() : m.end()] = [False] * (m.end() - m.start())
    text = "".join(ch if k else " " for ch, k in zip(piece, keep, strict=True))
    text = _GREETING.sub("", " ".join(text.split()))
    return _trim(text, free=True)


_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|yo|good (?:morning|afternoon|evening)|你好|您好|嗨|哈喽)"
    r"(?![a-z])[\s,!.，！。]*)+",
    re.IGNORECASE,
)
"""A greeting that opens the message: says nothing of the task."""


def _meaningful(piece: str) -> bool:
    """More than filler: two Chinese characters, or an English word that says something."""
    if sum(map(is_cjk, piece)) >= 2:
        return True
    words = [w for w in re.findall(r"[a-z']+", fold(piece)) if w not in LEFTOVER_STOP]
    return len(words) >= 2 or any(len(w) >= 4 for w in words)


def _choice_prefix(slot: Slot, piece: str) -> str | None:
    try:
        value: str = slot.validate(piece)
        return value
    except InvalidSlot:
        pass
    folded = " ".join(fold(piece).split())
    if len(folded) < 2:
        return None
    found = {c for term, c in _choice_terms(slot).items() if term.startswith(folded)}
    return found.pop() if len(found) == 1 else None


def _reason(slot: Slot, piece: str) -> str:
    try:
        slot.validate(piece)
    except InvalidSlot as exc:
        return exc.reason
    return Problem("custom", f"{piece!r} is not understood", value=piece)


def _shape_problem(value: str, kind: str) -> Problem | None:
    folded = fold(value)
    if kind == "place":
        odd = any(ch.isdigit() for ch in value) or FALLBACK_STOP.search(folded)
        if odd or len(value.split()) > 6 or sum(map(is_cjk, value)) > 12:
            return Problem("place", f"{value!r} does not look like a place", value=value)
    if kind == "person" and (FALLBACK_STOP.search(folded) or not _looks_like_name(value)):
        return Problem("name", f"{value!r} does not look like a name", value=value)
    if kind == "order_id" and not re.search(r"\d", value):
        return Problem("order", f"{value!r} does not look like an order number", value=value)
    return None


_EMPTY_VALUE = re.compile(
    r"[\W_啊吗呢吧呀哦嘛了的来着]*"
    r"|(?:哪里|哪儿|哪|什么|多少|谁|啥|what|where|who|which|how)[\W_啊吗呢吧呀哦嘛了的来着]*"
)


def _says_nothing(value: str, kind: str) -> bool:
    """A value read after a cue that is no value: particles or a question word ("原因啊",
    "目的地是哪里来着"), or for a place or a name, something with digits or doubt in it."""
    if _EMPTY_VALUE.fullmatch(fold(value).strip()):
        return True
    if kind == "place" and _city(value) is not None:
        return False  # CAN is Guangzhou's code, not "can"
    if kind in ("place", "person"):
        return any(ch.isdigit() for ch in value) or bool(FALLBACK_STOP.search(fold(value)))
    return False


def _city(value: str) -> places.Place | None:
    """The city ``value`` names in full (by a name, an alias or a code), if it names one."""
    found = places.gazetteer()
    code = found.code(value.strip())
    if code is not None:
        return code
    known = found.at(value, 0)
    return known[0] if known is not None and known[1] >= len(value.rstrip(".' ")) else None


def _is_place(value: str) -> bool:
    return _city(value) is not None


def _looks_like_name(value: str) -> bool:
    cjk = sum(map(is_cjk, value))
    if cjk:
        return cjk == len(value.replace("·", "")) and 2 <= cjk <= 6
    words = value.split()
    if any(
        fold(w) in EN_NAME_STOP and (i == 0 or not w[:1].isupper()) for i, w in enumerate(words)
    ):
        return False  # "the", "that's too pricey" (but "Nguyen Van An")
    return 1 <= len(words) <= 4 and all(_WORD.fullmatch(w) for w in words)


def _read_after(reader: _Reader, pos: int, stop: int, kind: str) -> tuple[Any, int, int] | None:
    text, folded = reader.text, reader.folded
    skip = _CONNECTOR.match(folded, pos, stop)
    start = skip.end() if skip else pos
    if start >= stop:
        return None
    if kind in ("text", "address"):
        end = start
        while end < stop and text[end] not in SENTENCE_END:
            if text[end] == "." and (end + 1 >= len(text) or text[end + 1].isspace()):
                break
            end += 1
        value = _strip_phrases(text[start:end], None, POLITE_TAIL).strip()
        return (value, start, start + len(value)) if value else None
    if kind == "order_id":
        m = _TOKEN.match(reader.plain, start, stop)
        if m and re.search(r"\d", m.group()):
            return m.group(), m.start(), m.end()
        return None
    if kind == "place":
        token = re.match(r"[A-Z]{3}(?![A-Za-z])", text[start:stop])
        if token and places.gazetteer().code(token.group()):
            return token.group(), start, start + 3
        known = places.gazetteer().at(text, start)
        if known is not None and known[1] <= stop:
            end = known[1]
            airport = re.match(r"[\u3400-\u9fff]{1,4}?(?:国际)?机场", text[end:stop])
            if airport:  # 上海虹桥机场: the airport, not only its city
                end += airport.end()
            return text[start:end], start, end
        near = places.gazetteer().near(text, start, stop)
        typed = text[start : near[1]] if near is not None else ""
        # "from san fransisco", "to Chicgo": a city typed with a slip; "to change" is a verb
        if near is not None and (" " in typed or typed[:1].isupper() or len(typed) >= 9):
            return near[0], start, near[1]
    if is_cjk(text[start]):
        end = start
        while end < stop and (is_cjk(text[end]) or text[end] == "·"):
            end += 1
        cut = (ZH_PLACE_STOP if kind == "place" else ZH_NAME_STOP).search(folded, start, end)
        end = cut.start() if cut else end
        value = text[start:end]
        if not value or not _fits(value, kind):
            return None
        return value, start, end
    if kind == "person":  # "for my daughter Chloe Kim", "for Dr. Aisha Bello"
        skip = _RELATION.match(folded, start, stop)
        start = skip.end() if skip else start
        if start >= stop:
            return None
    end = _english_words(reader, start, stop, kind)
    if end <= start:
        return None
    value = text[start:end].rstrip(".'-")
    return value, start, start + len(value)


_RELATION = re.compile(
    r"(?:(?:my|our|his|her)\s+(?:wife|husband|son|daughter|mom|mum|mother|dad|father|boss|"
    r"colleague|friend|brother|sister|grandma|grandmother|grandpa|grandfather|kid|child|"
    r"partner|girlfriend|boyfriend|aunt|uncle|cousin|niece|nephew|client|guest)\s*,?\s+)?"
    r"(?:(?:mr|mrs|ms|miss|dr|prof|sir|madam)\.?\s+)?"
)
"""Who the passenger is to the user, and a title, said before the name itself."""


def _name_word(word: str, cased: bool, first: bool) -> bool:
    """Whether ``word`` can be part of a place or a name. In a text that uses capitals
    ("Li Lei", "New York") they start with one, but for particles ("Rio de Janeiro")."""
    if not cased or word[0].isupper():
        return True
    return not first and fold(word) in NAME_PARTICLES


def _english_words(reader: _Reader, start: int, stop: int, kind: str) -> int:
    """End of the run of name-like words from ``start``, before a stop word."""
    limit = 5 if kind == "place" else 4
    stops = EN_STOP if kind == "place" else EN_NAME_STOP
    end = start
    count = 0
    pos = start
    while pos < stop and count < limit:
        m = _WORD.match(reader.text, pos, stop)
        if m is None:
            break
        word = fold(m.group()).rstrip(".")
        if word in stops or any(is_cjk(ch) for ch in word):
            break
        if not _name_word(m.group(), reader.cased, count == 0):
            break
        end = m.end()
        count += 1
        gap = re.compile(r"[ \t]+").match(reader.text, end, stop)
        if gap is None:
            break
        pos = gap.end()
    while count and reader.text[start:end].split()[-1] in NAME_PARTICLES:
        end = start + reader.text[start:end].rstrip().rfind(" ")
        count -= 1
    return end if count else start


def _read_before(reader: _Reader, floor: int, pos: int, kind: str) -> tuple[Any, int, int] | None:
    text, folded = reader.text, reader.folded
    end = pos
    while end > floor and text[end - 1] in " \t":
        end -= 1
    if end <= floor:
        return None
    if kind == "place":
        token = re.search(r"(?<![A-Za-z])[A-Z]{3}$", text[floor:end])
        if token and places.gazetteer().code(token.group()):
            return token.group(), end - 3, end
        known = places.gazetteer().before(text, end)
        if known is not None and known[1] >= floor:
            return text[known[1] : end], known[1], end
        if floor > 0 and any(e == floor for _, e in reader.claims) and is_cjk(text[end - 1]):
            return None  # 上海虹桥出发: 虹桥 only says where in 上海, already read
    if is_cjk(text[end - 1]):
        start = end
        while start > floor and is_cjk(text[start - 1]):
            start -= 1
        if start > 0 and text[start - 1].isascii() and text[start - 1].isalnum():
            return None  # "3号线到...": the words belong to "3号线", not a place of their own
        stops = ZH_PLACE_STOP if kind == "place" else ZH_NAME_STOP
        for m in stops.finditer(folded, start, end):
            start = max(start, m.end())
        value = text[start:end]
        if not value or not _fits(value, kind):
            return None
        return value, start, end
    words = list(_WORD.finditer(text, floor, end))
    kept: list[re.Match[str]] = []
    for m in reversed(words):
        if fold(m.group()).rstrip(".") in EN_STOP or len(kept) >= 4:
            break
        if kept and text[m.end() : kept[-1].start()].strip():
            break
        kept.append(m)
    if not kept or text[kept[0].end() : end].strip():
        return None
    first = kept[-1]
    if not all(_name_word(m.group(), reader.cased, m is first) for m in kept):
        return None
    before = [m for m in words if m.end() <= first.start()]
    if before and fold(before[-1].group()) in NOT_BEFORE_ORIGIN:
        return None  # "a flight for Li Lei to Tokyo": Li Lei is not where it starts
    return text[first.start() : end], first.start(), end


def _fits(value: str, kind: str) -> bool:
    cjk = sum(map(is_cjk, value))
    if kind == "person":
        return 2 <= cjk <= 6 if cjk else True
    if kind == "place":
        return cjk <= 10
    return True


def extract(
    template: TaskTemplate,
    text: str,
    *,
    language: str | None = None,
    today: date,
    expecting: str | None = None,
    confirming: bool = False,
    opening: bool = False,
    held: Mapping[str, Any] | None = None,
) -> Extraction:
    """Read ``text`` (one user utterance) for ``template``'s slots.

    ``today`` resolves relative dates (see :func:`relaystate.conversation.clock.now`);
    ``expecting`` names the slot the task just asked for, so a bare answer ("上海", "Li Lei")
    fills it; ``confirming`` (the task asked for a confirmation) lets a bare number change the
    one number slot ("150"); ``held`` (the values the Task holds) reads a correction against
    them ("8 instead of 7" after 19:00 is 20:00). ``language`` ("zh"/"en") is accepted as a
    hint only: both languages are always read, since people mix them ("从Beijing到Shanghai",
    "book 商务舱").
    """
    reader = _Reader(
        template,
        text,
        today=today,
        expecting=expecting,
        correction=is_correction(text),
        confirming=confirming,
        opening=opening,
        language=language,
        held=held,
    )
    reader.patterns()
    reader.contacts()
    reader.times()
    reader.dates()
    reader.counts()
    reader.names()
    reader.choices()
    reader.amounts()
    reader.blockers()
    reader.cues()
    reader.loose()
    reader.swapped()
    reader.replaced()
    reader.named()
    reader.guard()
    reader.fallback()
    reader.leftover()
    found = reader.result()
    for slot in template.slots:  # an approval, a decision: never the user's to give
        if slot.filled_by != "user":
            found.values.pop(slot.name, None)
            found.errors.pop(slot.name, None)
            found.sources.pop(slot.name, None)
    return found


__all__ = ["DEFAULT_CUES", "EXTRACTORS", "ROLE_CUES", "Extraction", "extract", "extractor_of"]
