"""Counts of things wherever they are said: "3 nights", "住两晚", "2 guests", "十个人", "3位",
"four of us", "party of 6", "just me", "me and my wife", "一家三口", "两张", "三居".

What a count slot counts (its unit) comes from how the template names and asks for it:
"How many nights?" and "住几晚？" say nights, "几位用餐？" people, "要几张？" tickets. A
number followed by one of the unit's words is that slot's value wherever it is in the
message; a few phrases count people without a number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..task.templates import Slot
from .numbers import find_numbers
from .text import fold

UNITS: Mapping[str, tuple[Sequence[str], Sequence[str]]] = {
    # unit: (English words, Chinese words), longest first where one holds another
    "people": (
        [
            "people",
            "persons",
            "person",
            "guests",
            "guest",
            "adults",
            "adult",
            "pax",
            "diners",
            "of us",
            "passengers",
            "passenger",
            "riders",
            "rider",
            "ppl",
            "heads",
            "travellers",
            "travelers",
            "attendees",
            "participants",
            "grown-ups",
            "visitors",
            "patients",
            "members",
            "players",
        ],
        ["个大人", "位客人", "个人", "口人", "大人", "成人", "客人", "人", "位", "口", "名"],
    ),
    "nights": (["nights", "night"], ["个晚上", "晚上", "晚", "夜"]),
    "days": (["days", "day"], ["天", "日"]),
    "weeks": (["weeks", "week"], ["个星期", "个礼拜", "星期", "礼拜", "周"]),
    "hours": (["hours", "hour", "hrs", "hr"], ["个小时", "个钟头", "小时", "钟头", "个钟"]),
    "rooms": (["rooms", "room"], ["间房", "个房间", "间"]),
    "bedrooms": (
        ["bedrooms", "bedroom", "beds", "bed", "br", "bdr", "bed flat"],
        ["居室", "居", "室", "房"],
    ),
    "tickets": (
        ["tickets", "ticket", "seats", "seat", "passes", "pass"],
        ["张票", "张", "个座位", "座"],
    ),
    "items": (
        [
            "items",
            "item",
            "pieces",
            "piece",
            "pcs",
            "units",
            "unit",
            "boxes",
            "box",
            "bags",
            "bag",
            "packages",
            "parcels",
            "copies",
            "bottles",
            "pairs",
        ],
        ["件", "个", "箱", "包", "份", "瓶", "双", "台"],
    ),
    "floor": (["floor", "fl", "storey", "story"], ["楼", "层"]),
    "kg": (["kg", "kgs", "kilos", "kilo", "kilograms", "kilogram"], ["公斤", "千克"]),
    "lb": (["lbs", "lb", "pounds"], ["磅"]),
    "jin": ([], ["斤"]),
    "km": (["km", "kilometres", "kilometers", "kms"], ["公里", "千米"]),
    "m2": (["square meters", "square metres", "sqm", "m2", "m²"], ["平方米", "平米", "平方"]),
}
"""A unit and the words said after a number of it."""

_UNIT_OF_NAME = {
    "people": (
        "guests",
        "guest",
        "people",
        "persons",
        "party",
        "adults",
        "pax",
        "diners",
        "travellers",
        "travelers",
        "passengers",
        "riders",
        "attendees",
        "participants",
        "size",
        "visitors",
        "players",
        "headcount",
        "人数",
        "几位",
        "几个人",
        "多少人",
        "多少位",
        "几人",
    ),
    "nights": ("nights", "night", "几晚", "晚数", "几个晚上", "住几"),
    "days": ("days", "duration", "几天", "天数", "多少天"),
    "weeks": ("weeks", "几周", "几个星期"),
    "hours": ("hours", "几个小时", "几小时", "时长", "多久"),
    "rooms": ("rooms", "几间", "间数"),
    "bedrooms": ("bedrooms", "bedroom", "beds", "几居", "几室", "卧室"),
    "tickets": ("tickets", "ticket", "seats", "几张", "张数", "票数"),
    "items": (
        "items",
        "pieces",
        "quantity",
        "qty",
        "bags",
        "boxes",
        "copies",
        "units",
        "件数",
        "几件",
        "几个",
        "数量",
    ),
    "floor": ("floor", "storey", "楼层", "几楼", "几层", "哪层", "哪一层"),
    "kg": ("kg", "kilos", "kilograms", "公斤", "千克", "weight", "重量", "多重", "heavy"),
    "km": ("km", "kilometres", "kilometers", "公里", "distance"),
    "m2": ("square", "sqm", "平米", "面积"),
}
"""Words of a slot's name, label or question -> the unit it counts (or measures)."""

_ALONE = re.compile(
    r"(?<![a-z])(?:just|only)\s+(?:me|myself|one|1)(?![a-z])(?!\s+and)|"
    r"(?<![a-z])(?:me alone|myself only|"
    r"solo|by myself|on my own|for one|table for one|party of one)(?![a-z])|"
    r"就?我一个人?|我自己|就我自己|只有我|一个人"
)
_RELATION = (
    r"wife|husband|partner|girlfriend|boyfriend|fiance|fiancee|friend|son|daughter|mom|mum|dad|"
    r"mother|father|colleague|boss|brother|sister|kid|child|baby|grandma|grandpa|cousin|roommate"
)
_TWO = re.compile(
    rf"(?<![a-z])(?:(?:me|myself) and my (?:{_RELATION})(?!s)|my (?:{_RELATION}) and (?:i|me)|"
    r"the two of us|both of us|a couple|us two)(?![a-z])|"
    r"我和我?(?:老婆|老公|爱人|太太|先生|男朋友|女朋友|朋友|同事|妈妈|爸爸|孩子|儿子|女儿)(?![们俩])|"
    r"我们俩|我们两个(?!人)|两口子|俩人"
)
_AND_MORE = re.compile(
    rf"(?<![a-z])(?:me|myself|i) and (?:my |our )?(?P<n>\d{{1,2}}|two|three|four|five|six|seven|"
    rf"eight|nine|ten) (?:{_RELATION}|people|others|guests|kids|children|friends|colleagues)"
    r"(?:s|ren)?(?![a-z])|我和(?P<zn>[两二三四五六七八九])个(?:朋友|同事|孩子|家人|同学)"
)
"""Me and N others: N + 1 people."""
_FAMILY = re.compile(r"一家([三四五六七八九])口")
_PARTY = re.compile(
    r"(?<![a-z])(?:party|group|table|family|team)\s+(?:of|for)\s+(?P<n>\d{1,3}|[a-z]+)(?![a-z0-9])"
)


_ORDINAL = re.compile(r"(?<![\w.])(?P<n>\d{1,3})(?:st|nd|rd|th)\s+(?P<unit>[a-z]+)(?![a-z])")
_GLUED = re.compile(r"(?<![\w.])(?P<n>\d+(?:\.\d+)?)(?P<unit>[a-z]+)(?![a-z])")


@dataclass(frozen=True)
class CountCandidate:
    start: int
    end: int
    value: float
    unit: str


def unit_of(slot: Slot, english_name: str, said: str) -> str | None:
    """What a count (or measured number) slot counts, from its name, labels and question."""
    for words in (english_name, said):
        for unit, names in _UNIT_OF_NAME.items():
            for n in names:
                if (n.isascii() and re.search(rf"(?<![a-z]){re.escape(n)}(?![a-z])", words)) or (
                    not n.isascii() and n in words
                ):
                    return unit
    ask = " ".join(fold(a) for a in slot.ask.values())
    m = re.search(r"how many (\w+)", ask)
    if m:
        for unit, (en, _) in UNITS.items():
            if m.group(1) in en:
                return unit
    m = re.search(r"几(?:个)?([\u4e00-\u9fff]{1,2})", ask)
    if m:
        for unit, (_, zh) in UNITS.items():
            if any(m.group(1).startswith(w) for w in zh):
                return unit
    return None


def _unit_after(folded: str, end: int, unit: str) -> int | None:
    """Where the words of ``unit`` after a number end, if they follow it: right after it
    ("3 nights", 两晚), after an ordinal's ending ("5th floor") or one word that says what
    kind ("2 train tickets", "3 large boxes")."""
    en, zh = UNITS[unit]
    rest = folded[end:]
    for word in zh:
        m = re.match(rf"\s*{re.escape(word)}", rest)
        if m:
            return end + m.end()
    for word in en:
        m = re.match(rf"(?:st|nd|rd|th)?\s*(?:{_KIND_WORD}\s+)?{re.escape(word)}(?![a-z])", rest)
        if m:
            return end + m.end()
    return None


SPANS = ("nights", "days", "weeks", "hours")
"""Units that measure time: a number of them never counts people or things."""


def counts_other(folded: str, end: int, unit: str | None, others: Sequence[str]) -> bool:
    """Whether the number ending at ``end`` counts something else than ``unit``: a span of
    time ("for 2 nights" is no party size) or what another of the template's slots counts."""
    return any(u != unit and _unit_after(folded, end, u) is not None for u in {*SPANS, *others})


_KIND_WORD = r"(?!(?:and|or|of|to|for|from|in|on|at|by|the|a|an|more|less)\b)[a-z]{3,12}"
"""One word between a number and its unit ("train" in "2 train tickets"), not a joiner."""


def scan_counts(text: str, units: Sequence[str]) -> list[CountCandidate]:
    """Every number said with one of ``units`` after it, and the phrases that count people
    without a number; in order, none overlapping."""
    folded = fold(text)
    found: list[CountCandidate] = []
    for m in _GLUED.finditer(folded):  # "5kg", "3hrs": find_numbers leaves digits glued to words
        unit = next((u for u in units if m.group("unit") in UNITS[u][0]), None)
        if unit is not None:
            n = m.group("n")
            found.append(CountCandidate(m.start(), m.end(), float(n) if "." in n else int(n), unit))
    for m in _ORDINAL.finditer(folded):  # "the 5th floor": find_numbers leaves "5th" alone
        unit = next((u for u in units if m.group("unit") in UNITS[u][0]), None)
        if unit is not None:
            found.append(CountCandidate(m.start(), m.end(), int(m.group("n")), unit))
    for n in find_numbers(text):
        if n.currency:
            continue
        for unit in units:
            end = _unit_after(folded, n.end, unit)
            if end is not None:
                found.append(CountCandidate(n.start, end, n.value, unit))
                break
    if "people" in units:
        for m in _PARTY.finditer(folded):
            numbers = find_numbers(m.group("n"))
            if numbers:
                found.append(CountCandidate(m.start(), m.end(), numbers[0].value, "people"))
        for m in _AND_MORE.finditer(folded):
            said = m.group("n") or m.group("zn")
            others = find_numbers(said)
            if others:
                found.append(CountCandidate(m.start(), m.end(), others[0].value + 1, "people"))
        for pattern, value in ((_ALONE, 1), (_TWO, 2)):
            for m in pattern.finditer(folded):
                found.append(CountCandidate(m.start(), m.end(), value, "people"))
        for m in _FAMILY.finditer(folded):
            found.append(
                CountCandidate(m.start(), m.end(), find_numbers(m.group(1))[0].value, "people")
            )
    if "nights" in units or "days" in units:
        for m in re.finditer(
            r"(?<![a-z])(?:a|one|1)\s+week(?![a-z])|一(?:个)?(?:星期|礼拜|周)", folded
        ):
            if not any(c.start <= m.start() < c.end for c in found):
                unit = "nights" if "nights" in units else "days"
                found.append(CountCandidate(m.start(), m.end(), 7, unit))
    found.sort(key=lambda c: (c.start, -(c.end - c.start)))
    out: list[CountCandidate] = []
    for c in found:
        if not any(c.start < o.end and o.start < c.end for o in out):
            out.append(c)
    return out
