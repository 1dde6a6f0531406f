"""Holidays people name as dates (元旦, 国庆, 春节, Christmas, Thanksgiving), from the
``holidays`` library, plus the shopping days it does not list (双十一, Black Friday).

The library is imported only when a message has a holiday word in it, so a turn without one
pays nothing. Which country's calendar a name comes from is part of the name: 春节 and 国庆 are
China's, Thanksgiving the United States'.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import date, timedelta

from .text import fold

#: Name -> (country, the library's English name, days after it). The library's own Chinese
#: and English names are added to these when it is loaded.
_ALIASES: dict[str, tuple[str, str, int]] = {
    "元旦": ("CN", "New Year's Day", 0),
    "new year's day": ("US", "New Year's Day", 0),
    "new years day": ("US", "New Year's Day", 0),
    "new year's": ("US", "New Year's Day", 0),
    "春节": ("CN", "Chinese New Year (Spring Festival)", 0),
    "过年": ("CN", "Chinese New Year (Spring Festival)", 0),
    "大年初一": ("CN", "Chinese New Year (Spring Festival)", 0),
    "除夕": ("CN", "Chinese New Year's Eve", 0),
    "年三十": ("CN", "Chinese New Year's Eve", 0),
    "chinese new year": ("CN", "Chinese New Year (Spring Festival)", 0),
    "spring festival": ("CN", "Chinese New Year (Spring Festival)", 0),
    "清明": ("CN", "Tomb-Sweeping Day", 0),
    "五一": ("CN", "Labor Day", 0),
    "劳动节": ("CN", "Labor Day", 0),
    "端午": ("CN", "Dragon Boat Festival", 0),
    "中秋": ("CN", "Mid-Autumn Festival", 0),
    "国庆": ("CN", "National Day", 0),
    "圣诞": ("US", "Christmas Day", 0),
    "平安夜": ("US", "Christmas Day", -1),
    "christmas": ("US", "Christmas Day", 0),
    "xmas": ("US", "Christmas Day", 0),
    "christmas eve": ("US", "Christmas Day", -1),
    "thanksgiving": ("US", "Thanksgiving Day", 0),
    "感恩节": ("US", "Thanksgiving Day", 0),
    "black friday": ("US", "Thanksgiving Day", 1),
    "黑色星期五": ("US", "Thanksgiving Day", 1),
    "独立日": ("US", "Independence Day", 0),
    "independence day": ("US", "Independence Day", 0),
    "fourth of july": ("US", "Independence Day", 0),
    "4th of july": ("US", "Independence Day", 0),
    "memorial day": ("US", "Memorial Day", 0),
    "labor day": ("US", "Labor Day", 0),
}
#: Days that are on the calendar but in no holiday law: (month, day).
_FIXED: dict[str, tuple[int, int]] = {
    "双十一": (11, 11),
    "双11": (11, 11),
    "双十二": (12, 12),
    "双12": (12, 12),
    # 618 (the June shopping festival) only where it reads as a day, not as a number
    "六一八": (6, 18),
    "618那天": (6, 18),
    "618当天": (6, 18),
    "618的时候": (6, 18),
    "618活动": (6, 18),
    "618大促": (6, 18),
    "618期间": (6, 18),
    "618买": (6, 18),
    "new year's eve": (12, 31),
    "new years eve": (12, 31),
    "跨年夜": (12, 31),
    "christmas eve": (12, 24),
    "平安夜": (12, 24),
    "boxing day": (12, 26),
    "情人节": (2, 14),
    "valentine's day": (2, 14),
    "valentines day": (2, 14),
    "halloween": (10, 31),
    "万圣节": (10, 31),
}


def phrases() -> list[str]:
    """Every holiday name this reads, longest first (a regex alternation's order)."""
    return sorted({*_ALIASES, *_FIXED}, key=len, reverse=True)


_PATTERN = re.compile(
    r"(?<![a-z])(?:"
    + "|".join(re.escape(p) for p in phrases())
    + r")(?:节|节日|那天|当天)?(?![a-z])"
)


def find(text: str) -> list[tuple[int, int, str]]:
    """The holiday names in ``text``: (start, end, name)."""
    folded = fold(text)
    out = []
    for m in _PATTERN.finditer(folded):
        name = re.sub(r"(?:节|节日|那天|当天)$", "", m.group())
        if name not in _ALIASES and name not in _FIXED:
            name = m.group()
        if name in _ALIASES or name in _FIXED:
            out.append((m.start(), m.end(), name))
    return out


def on(name: str, year: int) -> date | None:
    """The date of holiday ``name`` in ``year`` (the first day of a several-day holiday)."""
    if name in _FIXED:
        month, day = _FIXED[name]
        return date(year, month, day)
    country, official, shift = _ALIASES[name]
    found = _calendar(country, year).get(official)
    return None if found is None else found + timedelta(days=shift)


def resolve(name: str, today: date, *, past: bool, year: int | None = None) -> date | None:
    """The holiday's date: in ``year`` when one was said ("去年双十一"), else the next one on
    or after today, or for a past-looking slot the last one on or before today."""
    if year is not None:
        return on(name, year)
    years = range(today.year - 1, today.year + 2)
    dates = [d for d in (on(name, y) for y in years) if d is not None]
    if past:
        earlier = [d for d in dates if d <= today]
        return earlier[-1] if earlier else None
    later = [d for d in dates if d >= today]
    return later[0] if later else None


@functools.cache
def _calendar(country: str, year: int) -> dict[str, date]:
    """English name -> first date, from the library (imported here, once, when needed)."""
    import holidays as library

    make: Callable[..., dict[date, str]] = library.country_holidays
    first: dict[str, date] = {}
    for day, names in sorted(make(country, years=year).items()):
        for official in names.split("; "):
            first.setdefault(official, day)
    return first
