"""Times of day in both languages: "7pm", "7:45 pm", "19:30", "noon", "half past seven",
"晚上七点半", "下午3点", "中午12点", "10点一刻", "18:00".

A time said with its part of the day (pm, 晚上, in the evening) or in 24 hours is certain; a
bare hour ("7点", "at 7") is read as said, and :func:`settle` moves it to the afternoon when
the rest of the message or the value it corrects says so (dinner at 7, "8 instead of 7"
after 19:00).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .numbers import CN_DIGITS, EN_SMALL
from .text import fold

_CN_NUM = "零〇一二两三四五六七八九十"
_EN_HOURS = {word: n for word, n in EN_SMALL.items() if 1 <= n <= 12}
_EN_HOUR = rf"(?:\d{{1,2}}|{'|'.join(_EN_HOURS)})"
_AMPM = r"(?P<ampm>a\.?\s?m\.?|p\.?\s?m\.?)(?![a-z])"
_ZH_PART = (
    r"(?P<part>凌晨|清晨|早上|早晨|上午|中午|午后|下午|傍晚|晚上|夜里|夜间|今晚|明晚|晚间|晚)"
)

_PATTERNS = (
    # 19:30, 7:45 pm, 7.45pm, 19：30
    re.compile(
        rf"(?<![\d.:/\-])(?P<h>[01]?\d|2[0-3])\s*[:：]\s*(?P<m>[0-5]\d)(?![\d:/])\s*(?:{_AMPM})?"
    ),
    re.compile(rf"(?<![\d.:/\-])(?P<h>1[0-2]|0?[1-9])\.(?P<m>[0-5]\d)\s*{_AMPM}"),
    # 7pm, 7 p.m., seven pm, 7 o'clock
    re.compile(rf"(?<![\w.:])(?P<h>{_EN_HOUR})\s*(?:{_AMPM}|(?P<oclock>o'?\s?clock)(?![a-z]))"),
    # half past seven, quarter past 7, quarter to 8
    re.compile(
        rf"(?<![a-z])(?P<frac>half|quarter)\s+(?P<dir>past|to)\s+(?P<h>{_EN_HOUR})(?![\w:])"
        rf"(?:\s*{_AMPM})?"
    ),
    # 晚上七点半, 下午3点15分, 10点一刻, 8点钟
    re.compile(
        rf"{_ZH_PART}?\s*(?P<h>[0-2]?\d|[{_CN_NUM}]{{1,3}})\s*(?:点钟|点|時|时)"
        rf"(?:\s*(?P<zhm>半|一刻|三刻|(?:[0-5]?\d|[{_CN_NUM}]{{1,3}})\s*分?))?"
    ),
)
_WORDS = re.compile(
    r"(?<![a-z])(?P<word>noon|midday|midnight)(?![a-z])|(?P<zh>中午十二点|正午|午夜)"
)
_BARE = re.compile(
    rf"(?<![a-z])(?:at|around|about|by|from|till|until|after|before)\s+(?:about\s+)?"
    rf"(?P<h>{_EN_HOUR})(?![\w:.,/]|\s*(?:%|percent|people|persons|guests|of us|nights?|days?|"
    rf"hours?|kg|kilos?|pm|am|p\.m|a\.m|tickets?|rooms?|bedrooms?|adults?|kids|children))"
)
"""A bare hour after a preposition ("at 7", "around 6"): read only for a time slot."""
_EVENING = re.compile(
    r"(?<![a-z])(?:evening|tonight|night|dinner|supper|afternoon|pm)(?![a-z])|晚饭|晚餐|晚上|今晚|"
    r"明晚|夜宵|下午|傍晚"
)
_MORNING = re.compile(r"(?<![a-z])(?:morning|breakfast|am)(?![a-z])|早上|上午|早餐|凌晨")


@dataclass(frozen=True)
class TimeCandidate:
    """A time of day in the text; ``certain`` when its half of the day was said."""

    start: int
    end: int
    hour: int
    minute: int
    certain: bool
    bare: bool = False
    """Read from a bare hour after a preposition ("at 7"): weak evidence."""

    @property
    def value(self) -> str:
        return f"{self.hour:02d}:{self.minute:02d}"


def _number(word: str) -> int | None:
    word = word.strip()
    if word.isdigit():
        return int(word)
    if word in _EN_HOURS:
        return _EN_HOURS[word]
    if word and all(ch in _CN_NUM for ch in word):
        if word == "十":
            return 10
        if word.startswith("十"):
            return 10 + CN_DIGITS.get(word[1:], 0)
        if "十" in word:
            tens, _, ones = word.partition("十")
            return CN_DIGITS.get(tens, 0) * 10 + (CN_DIGITS.get(ones, 0) if ones else 0)
        return CN_DIGITS.get(word) if len(word) == 1 else None
    return None


def _with_half(hour: int, ampm: str | None, part: str | None) -> tuple[int, bool] | None:
    """The 24-hour hour for ``hour`` said with am/pm or a Chinese part of the day."""
    if ampm:
        pm = ampm.replace(".", "").replace(" ", "").startswith("p")
        if not 1 <= hour <= 12:
            return None
        return (hour % 12 + (12 if pm else 0), True)
    if part:
        if part in ("下午", "午后", "傍晚", "晚上", "夜里", "夜间", "今晚", "明晚", "晚间", "晚"):
            if hour == 12 and part not in ("下午", "午后"):
                return (0, True)
            return (hour + 12 if hour < 12 else hour, True)
        if part == "中午":
            return (hour + 12 if 1 <= hour <= 2 else hour, True)
        return (hour, True)  # 早上, 上午, 凌晨
    return (hour, hour == 0 or hour > 12)


def scan_times(text: str) -> list[TimeCandidate]:
    """Every time of day in ``text``, in order, none overlapping another."""
    folded = fold(text)
    found: list[TimeCandidate] = []

    def free(start: int, end: int) -> bool:
        return all(end <= c.start or start >= c.end for c in found)

    for pattern in _PATTERNS:
        for m in pattern.finditer(folded):
            groups = m.groupdict()
            hour = _number(groups["h"])
            if hour is None or hour > 24 or not free(m.start(), m.end()):
                continue
            minute = 0
            if groups.get("m"):
                minute = int(groups["m"])
            zhm = groups.get("zhm")
            if zhm:
                minute = {"半": 30, "一刻": 15, "三刻": 45}.get(zhm.strip(), -1)
                if minute < 0:
                    minute = _number(zhm.strip().rstrip("分")) or 0
            if groups.get("frac"):
                minute = 30 if groups["frac"] == "half" else 15
                if groups["dir"] == "to":
                    hour, minute = (hour - 1) % 24 or 12, 60 - minute if minute == 15 else 30
            if minute > 59:
                continue
            halved = _with_half(hour % 24, groups.get("ampm"), groups.get("part"))
            if halved is None:
                continue
            hour, certain = halved
            if groups.get("oclock") or groups.get("m") or groups.get("frac"):
                certain = certain or hour > 12
            start = m.start()
            found.append(TimeCandidate(start, m.end(), hour, minute, certain))
    for m in _WORDS.finditer(folded):
        if free(m.start(), m.end()):
            hour = 0 if (m.group("word") == "midnight" or m.group("zh") == "午夜") else 12
            found.append(TimeCandidate(m.start(), m.end(), hour, 0, True))
    for m in _BARE.finditer(folded):
        start = m.start("h")
        hour = _number(m.group("h"))
        if hour is not None and 0 < hour <= 24 and free(start, m.end()):
            found.append(TimeCandidate(start, m.end(), hour % 24, 0, hour > 12, bare=True))
    return sorted(found, key=lambda c: c.start)


_DINING = re.compile(
    r"(?<![a-z])(?:restaurant|dinner|supper|table|bar|pub|party|banquet|show|concert)s?"
    r"(?![a-z])|餐|饭|桌|宴|酒吧|聚会|演出"
)
"""What a task is about when its times are in the evening unless said otherwise."""


def settle(candidate: TimeCandidate, text: str, held: str | None = None, *, about: str = "") -> str:
    """HH:MM for ``candidate``, a bare hour from 1 to 11 read as people mean it: in the
    afternoon when the message speaks of the evening (dinner, tonight, 晚上) and not of the
    morning; in the half of the day of the value it replaces (``held``, HH:MM: "8 instead of
    7" after 19:00 is 20:00, "5:30 not 5" after 05:00 is 05:30); in the afternoon when it is
    1 to 6 (nobody books at 3 in the night; 凌晨 and "am" say so), and from 5 to 10 when the
    task is ``about`` an evening thing (a restaurant table: "7点" is 19:00)."""
    if candidate.certain or not 1 <= candidate.hour <= 11:
        return candidate.value
    folded = fold(text)
    if _MORNING.search(folded):
        return candidate.value
    evening = bool(_EVENING.search(folded))
    held_hour = int(held[:2]) if held is not None and re.fullmatch(r"\d{2}:\d{2}", held) else None
    if held_hour is not None and not evening and held_hour < 12:
        return candidate.value  # "5:30 not 5" after 05:00: the morning still
    held_pm = held_hour is not None and held_hour >= 13
    dining = 5 <= candidate.hour <= 10 and bool(_DINING.search(fold(about)))
    if evening or held_pm or candidate.hour <= 6 or dining:
        return f"{candidate.hour + 12:02d}:{candidate.minute:02d}"
    return candidate.value
