"""Dates in Chinese and English, absolute and relative, resolved against a given ``today``.

Rules, so that every phrase has one answer:

* A month and day without a year ("1月22日", "Jan 22") is the next occurrence on or after
  today; a day of the month alone ("22号", "the 22nd") likewise.
* A bare weekday, and "this"/"on"/"coming" in English ("Friday", "this Friday", "周五") is
  the next such day on or after today. 这周五/本周五 is the Friday of the current week (weeks
  start on Monday), even when it has passed: on Sunday 2026-11-29 it is 2026-11-27.
* "next Wednesday" and 下周三/下星期三/下礼拜三 are the Wednesday of next week (weeks start on
  Monday): on Sunday 2026-11-29 both mean 2026-12-02, on Monday 2026-11-30 both mean
  2026-12-09. 下下周三 is the week after, 上周五 the previous week's; "last Friday" is the
  latest Friday before today.
* "in 3 days", "3 days from now", "3天后", "过3天" are today plus three days; "3 days ago" and
  "3天前" today minus three.
* Numbers: 12/31 and 12/31/2026 are month/day(/year); 12.31 is month.day when the day has two
  digits and no currency follows (12.50元 stays an amount).
* 去年/今年/明年 and "last/this/next year" around a month-day (or a holiday) set its year.
* Holidays by name (元旦, 国庆, 春节, 双十一, Christmas, Thanksgiving...): see :mod:`.holidays`.
* For a slot that looks back (``past=True``: when was it bought?) every phrase without a year
  goes back instead: the latest such day on or before today ("on Monday", "this Monday"
  too: the Monday gone).

A phrase that looks like a date but is not one ("2月30日", "2027-13-01") is reported by
:func:`scan_dates` with a reason instead of a value.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import NamedTuple

from . import holidays
from .numbers import EN_SMALL, cn_to_number
from .text import fold, needs_non_ascii

Span = tuple[int, int]


class DateMatch(NamedTuple):
    """A date found in a text and where: ``text[span[0]:span[1]]`` is the phrase."""

    value: date
    span: Span


@dataclass(frozen=True)
class DateCandidate:
    """A date-like phrase: ``value`` when it is a real date, else ``reason`` says why not."""

    start: int
    end: int
    text: str
    value: date | None
    reason: str | None = None


MONTHS = {
    "january": 1,
    "jan": 1,
    "february": 2,
    "feb": 2,
    "march": 3,
    "mar": 3,
    "april": 4,
    "apr": 4,
    "may": 5,
    "june": 6,
    "jun": 6,
    "july": 7,
    "jul": 7,
    "august": 8,
    "aug": 8,
    "september": 9,
    "sept": 9,
    "sep": 9,
    "october": 10,
    "oct": 10,
    "november": 11,
    "nov": 11,
    "december": 12,
    "dec": 12,
}
WEEKDAYS = {
    "monday": 0,
    "mon": 0,
    "tuesday": 1,
    "tues": 1,
    "tue": 1,
    "wednesday": 2,
    "wed": 2,
    "thursday": 3,
    "thurs": 3,
    "thur": 3,
    "thu": 3,
    "friday": 4,
    "fri": 4,
    "saturday": 5,
    "sat": 5,
    "sunday": 6,
    "sun": 6,
}
_FULL_WEEKDAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}
ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "七": 6}
EN_COUNTS = {
    **{word: n for word, n in EN_SMALL.items() if 1 <= n <= 10},
    "a": 1,
    "an": 1,
    "a couple of": 2,
    "a few": 3,
}
EN_RELATIVE = {
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "tomorrow": 1,
    "tmrw": 1,
    "tmr": 1,
    "day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "yesterday evening": -1,
    "day before yesterday": -2,
}
ZH_RELATIVE = {
    "今天": 0,
    "今日": 0,
    "今儿": 0,
    "今晚": 0,
    "今早": 0,
    "明天": 1,
    "明日": 1,
    "明儿": 1,
    "明早": 1,
    "明晚": 1,
    "后天": 2,
    "後天": 2,
    "大后天": 3,
    "大後天": 3,
    "昨天": -1,
    "昨日": -1,
    "昨晚": -1,
    "昨儿": -1,
    "前天": -2,
    "大前天": -3,
}

_NUM = r"\d{1,2}|[一二三四五六七八九十]{1,3}"
_COUNT = r"\d+|[零〇一二两三四五六七八九十百千万]+"
_NOT_AFTER_NUMERAL = r"(?<![\d零〇一二两三四五六七八九十百千万亿])"
_MON = "|".join(sorted(MONTHS, key=len, reverse=True))
_WD = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_EN_COUNT = r"\d+|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten"
_EN_REL = "|".join(sorted((re.escape(k) for k in EN_RELATIVE), key=len, reverse=True))
_ZH_REL = "|".join(sorted(ZH_RELATIVE, key=len, reverse=True))
_DAY_SUFFIX = r"(?:st|nd|rd|th)?"
_NOT_ALNUM = r"(?![a-z\d])"
_NOT_A_DAY = (
    r"(?:floor|fl|storey|story|time|times|row|grade|place|year|anniversary|birthday|edition|"
    r"century|gen|generation|percentile|round|house|door|street|avenue|ave|st)(?![a-z])"
)
"""What an English ordinal counts when it is not a day: "the 5th floor", "the 3rd time"."""
_ZH_NOT_DAY = "线楼门座位口房床车厅机码店台窗院室航桌柜仓包游箱"


def _int(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    value = cn_to_number(text)
    return int(value) if isinstance(value, int) else None


def _make(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _month_day(today: date, month: int, day: int) -> date | None:
    """The next ``month``/``day`` on or after ``today`` (up to eight years on, for 2月29日)."""
    for year in range(today.year, today.year + 9):
        found = _make(year, month, day)
        if found is not None and found >= today:
            return found
    return None


def _day_of_month(today: date, day: int, months_ahead: int | None = None) -> date | None:
    """Day ``day`` of a month: the next one on or after today, or ``months_ahead`` on."""
    start = 0 if months_ahead is None else months_ahead
    stop = 13 if months_ahead is None else months_ahead + 1
    for ahead in range(start, stop):
        index = today.month - 1 + ahead
        found = _make(today.year + index // 12, index % 12 + 1, day)
        if found is not None and (months_ahead is not None or found >= today):
            return found
    return None


def _upcoming(today: date, weekday: int) -> date:
    return today + timedelta(days=(weekday - today.weekday()) % 7)


def _in_week(today: date, weekday: int, weeks: int) -> date:
    monday = today - timedelta(days=today.weekday())
    return monday + timedelta(days=7 * weeks + weekday)


# Each handler gets the match and today, and returns a date, a reason (str) why the phrase
# is not a real date, or None when the match is not a date after all.
Result = date | str | None
Handler = Callable[[re.Match[str], date], Result]


def _explicit(year: int | None, month: int | None, day: int | None, today: date) -> Result:
    if month is None or day is None or not 1 <= month <= 12 or not 1 <= day <= 31:
        return "no such month or day"
    if year is not None:
        return _make(year, month, day) or "no such day in that month"
    return _month_day(today, month, day) or "no such day in that month"


def _iso(m: re.Match[str], today: date) -> Result:
    return _explicit(int(m["y"]), int(m["m"]), int(m["d"]), today)


def _zh_ymd(m: re.Match[str], today: date) -> Result:
    year = _int(m["y"]) if m["y"] else None
    return _explicit(year, _int(m["m"]), _int(m["d"]), today)


def _en_md(m: re.Match[str], today: date) -> Result:
    year = int(m["y"]) if m["y"] else None
    return _explicit(year, MONTHS[m["mon"]], int(m["d"]), today)


def _md(m: re.Match[str], today: date) -> Result:
    year = int(m["y"]) if m.groupdict().get("y") else None
    if year is not None and year < 100:
        year += 2000
    return _explicit(year, int(m["m"]), int(m["d"]), today)


def _zh_month_rel(m: re.Match[str], today: date) -> Result:
    rel = m["rel"]
    ahead = 2 if rel.startswith("下下") else 1 if rel.startswith("下") else 0
    if rel.startswith("上"):
        ahead = -1
    day = _int(m["d"])
    if day is None or not 1 <= day <= 31:
        return "no such day"
    return _day_of_month(today, day, ahead) or "no such day in that month"


def _day_only(m: re.Match[str], today: date) -> Result:
    day = _int(m["d"])
    if day is None or not 1 <= day <= 31:
        return None
    ahead = {"this": 0, "next": 1}.get(m.groupdict().get("rel") or "")
    return _day_of_month(today, day, ahead)


def _zh_year_today(m: re.Match[str], today: date) -> Result:
    """去年的今天: this day of the month, a year (or two) away."""
    shift = {"前年": -2, "去年": -1, "今年": 0, "明年": 1}[m["rel"]]
    return _make(today.year + shift, today.month, today.day) or _make(
        today.year + shift, today.month, 28
    )


def _en_relative(m: re.Match[str], today: date) -> Result:
    phrase = " ".join(m["rel"].split())
    return today + timedelta(days=EN_RELATIVE[phrase])


def _zh_relative(m: re.Match[str], today: date) -> Result:
    return today + timedelta(days=ZH_RELATIVE[m["rel"]])


def _en_weekday(m: re.Match[str], today: date) -> Result:
    word = m["wd"]
    pre = " ".join((m["pre"] or "").split())
    post = " ".join((m["post"] or "").split())
    if word not in _FULL_WEEKDAYS and not pre and not post:
        return None  # "sat", "sun", "wed" alone are too often other words
    weekday = WEEKDAYS[word]
    if pre.startswith("next") or post == "next week":
        return _in_week(today, weekday, 1)
    if post == "after next":
        return _in_week(today, weekday, 2)
    if post == "last week":
        return _in_week(today, weekday, -1)
    if pre == "last":
        return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    if post == "this week":
        return _in_week(today, weekday, 0)
    return _upcoming(today, weekday)


def _zh_weekday(m: re.Match[str], today: date) -> Result:
    char = m["wd"]
    weekday = ZH_WEEKDAYS[char] if char in ZH_WEEKDAYS else int(char) - 1
    pre = m["pre"] or ""
    if pre.startswith("下下"):
        return _in_week(today, weekday, 2)
    if pre.startswith("下"):
        return _in_week(today, weekday, 1)
    if pre.startswith("上上"):
        return _in_week(today, weekday, -2)
    if pre.startswith("上"):
        return _in_week(today, weekday, -1)
    if pre:
        return _in_week(today, weekday, 0)
    return _upcoming(today, weekday)


HORIZON_DAYS = 36_525
"""How far "N days/weeks/months/years from now" may reach: 100 years. Beyond it the phrase
is not a date anyone books or remembers, so it is refused, never shortened."""
_TOO_FAR = "more than 100 years away"
_OFF_CALENDAR = "before year 1 or after 9999"


def _count(text: str) -> int | None:
    """How many days, weeks... a phrase counts: the whole number as written (1000天后,
    一千天后), never its last digits. None for a run of bare digits said in Chinese (两三天:
    two or three days, not 23) and a lone unit (百日: no count given)."""
    text = " ".join(text.split())
    if text in EN_COUNTS:
        return EN_COUNTS[text]
    if text.isdigit():
        return int(text) if len(text) <= 7 else 10**7  # 10**7 days: past any horizon
    if len(text) > 1 and all(ch in "零〇一二两三四五六七八九" for ch in text):
        return None
    value = _int(text)
    if value == 0 and text not in ("零", "〇"):
        return None
    return value


def _offset(m: re.Match[str], today: date) -> Result:
    n = _count(m["n"])
    if n is None:
        return None
    unit = m["unit"]
    back = (m["dir"] or "").strip() in ("ago", "前", "以前", "之前")
    if unit == "月" and "个" not in m.group(0):
        return None  # 3月前 is "before March", not three months ago
    if unit.startswith(("month", "月", "year", "年")):
        months = n * 12 if unit.startswith(("year", "年")) else n
        if months * 30 > HORIZON_DAYS:
            return _TOO_FAR
        return _add_months(today, -months if back else months)
    days = n * 7 if unit.startswith(("week", "周", "星期", "礼拜")) else n
    if days > HORIZON_DAYS:
        return _TOO_FAR
    return today + timedelta(days=-days if back else days)


def _add_months(day: date, months: int) -> date:
    """``day`` moved by whole months, kept within the month it lands in (Mar 31 - 1 month
    is Feb 28)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    if not 1 <= year <= 9999:
        raise OverflowError("date value out of range")
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def _month_end(m: re.Match[str], today: date) -> Result:
    """月底, 下个月底, "the end of the month", "end of next month": the month's last day."""
    ahead = 1 if (m["rel"] or "").strip().startswith(("下", "next")) else 0
    first = _add_months(today.replace(day=1), ahead)
    return first.replace(day=calendar.monthrange(first.year, first.month)[1])


_ORDINALS = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3}
_ORDINALS |= {"fourth": 4, "4th": 4, "last": -1}


def _nth_weekday(m: re.Match[str], today: date) -> Result:
    """ "the last Friday of the month", "the first Monday of next month / of March": the
    month named, or this month while that day is still ahead (else next month)."""
    weekday, nth = WEEKDAYS[m["wd"]], _ORDINALS[m["nth"]]
    rel, mon = (m["rel"] or "").strip(), m["mon"]

    def pick(year: int, month: int) -> date | None:
        days = [
            date(year, month, d)
            for d in range(1, calendar.monthrange(year, month)[1] + 1)
            if date(year, month, d).weekday() == weekday
        ]
        return days[nth - 1 if nth > 0 else nth] if nth <= len(days) else None

    if mon:
        month = MONTHS[mon]
        year = today.year if month >= today.month else today.year + 1
        found = pick(year, month)
        if found is not None and found < today:
            found = pick(year + 1, month)
        return found
    start = _add_months(today.replace(day=1), 1 if rel == "next" else 0)
    found = pick(start.year, start.month)
    if found is not None and found < today and rel != "next":
        later = _add_months(start, 1)
        found = pick(later.year, later.month)
    return found


def _offset_from(m: re.Match[str], today: date) -> Result:
    """ "a week from tomorrow", "3 days after Friday": a count of days or weeks from a day."""
    n = _count(m["n"])
    if n is None:
        return None
    days = n * 7 if m["unit"].startswith("week") else n
    base = m["base"]
    start = today + timedelta(days=EN_RELATIVE[base]) if base in EN_RELATIVE else None
    if start is None:
        start = _upcoming(today, WEEKDAYS[base])
    return start + timedelta(days=days)


_PATTERNS: list[tuple[re.Pattern[str], Handler]] = [
    (
        re.compile(
            r"(?<![\d.])(?P<y>\d{4})(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})(?!\d)"
        ),
        _iso,
    ),
    (
        re.compile(
            rf"(?:(?P<y>\d{{4}}|[零〇一二三四五六七八九]{{4}})\s*年\s*)?(?<![\d一二三四五六七八九十])"
            rf"(?P<m>{_NUM})\s*月\s*(?P<d>{_NUM})\s*(?:[日号號]|(?![\d一二三四五六七八九十]))"
        ),
        _zh_ymd,
    ),
    (
        re.compile(rf"(?P<rel>下下个?月|下个?月|这个?月|本月|上个?月)\s*(?P<d>{_NUM})\s*[日号號]"),
        _zh_month_rel,
    ),
    (
        re.compile(
            r"(?<![\d/.])(?P<m>1[0-2]|0?[1-9])/(?P<d>3[01]|[12]\d|0?[1-9])"
            r"(?:/(?P<y>\d{4}|\d{2}))?(?![\d/])"
        ),
        _md,
    ),
    (
        re.compile(
            r"(?<![\d/.])(?P<d>1[3-9]|2\d|3[01])/(?P<m>1[0-2]|0?[1-9])"
            r"(?:/(?P<y>\d{4}|\d{2}))?(?![\d/])"
        ),
        _md,  # 24/12: day first, read only when the first number cannot be a month
    ),
    (
        re.compile(
            r"(?<![\d.¥$€£])(?P<m>1[0-2]|0?[1-9])\.(?P<d>3[01]|[12]\d|0[1-9])(?![\d.%])"
            r"(?!\s*(?:元|块|刀|美元|dollars?|bucks|yuan|rmb|%))"
        ),
        _md,
    ),
    (
        re.compile(
            rf"(?<![\d月一二三四五六七八九十路街道巷弄里])(?P<d>{_NUM})\s*[日号號](?![{_ZH_NOT_DAY}])"
            r"(?!\s*(?:后|以后|之后|前|以前|之前))"
        ),
        _day_only,
    ),
    (
        re.compile(
            rf"(?<![a-z])(?P<mon>{_MON})\.?\s*(?P<d>\d{{1,2}}){_DAY_SUFFIX}{_NOT_ALNUM}"
            rf"(?:,?\s*(?P<y>\d{{4}})(?!\d))?"
        ),
        _en_md,
    ),
    (
        re.compile(
            rf"(?<![a-z\d])(?:the\s+)?(?P<d>\d{{1,2}}){_DAY_SUFFIX}\s*(?:of\s+)?"
            rf"(?P<mon>{_MON})\.?(?![a-z])(?:,?\s*(?P<y>\d{{4}})(?!\d))?"
        ),
        _en_md,
    ),
    (
        re.compile(
            r"(?<![a-z])(?:on\s+)?the\s+(?P<d>\d{1,2})(?:st|nd|rd|th)(?![a-z])"
            rf"(?!\s+{_NOT_A_DAY})(?:\s+of\s+(?P<rel>this|next)\s+month)?"
        ),
        _day_only,
    ),
    (  # "12th" on its own, as an answer: not "the 5th time"
        re.compile(
            r"(?<![a-z\d])(?P<d>\d{1,2})(?:st|nd|rd|th)"
            r"(?=\s*(?:$|[,.!?;]|please|pls|then|instead|works)(?![a-z]))"
        ),
        _day_only,
    ),
    (re.compile(r"(?P<rel>前年|去年|今年|明年)的?今天"), _zh_year_today),
    (re.compile(rf"(?<![a-z])(?:the\s+)?(?P<rel>{_EN_REL})(?![a-z])"), _en_relative),
    (re.compile(rf"(?P<rel>{_ZH_REL})"), _zh_relative),
    (
        re.compile(
            r"(?<![a-z])(?:(?P<pre>next\s+week(?:\s+on)?|on\s+next|on\s+this|this\s+coming|"
            r"next|this|coming|on|last|by|until)\s+)?"
            rf"(?P<wd>{_WD})\.?(?![a-z])"
            r"(?:\s+(?P<post>next\s+week|this\s+week|last\s+week|after\s+next))?"
        ),
        _en_weekday,
    ),
    (
        re.compile(
            r"(?P<pre>下下个?|下一个?|下个?|这一?个?|本|上上个?|上一?个?)?\s*"
            r"(?:周|星期|礼拜|週)\s*(?P<wd>[一二三四五六日天七1-7])"
        ),
        _zh_weekday,
    ),
    (
        re.compile(
            rf"(?<![a-z])in\s+(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?|months?|years?)(?![a-z])"
            r"(?:\s+time)?(?P<dir>)"
        ),
        _offset,
    ),
    (
        re.compile(
            rf"(?<![a-z\d])(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?|months?|years?)\s*"
            r"(?P<dir>from\s+(?:now|today)|later|ago|以后|之后|后|以前|之前|前)(?![a-z])"
        ),
        _offset,
    ),
    (
        re.compile(
            rf"{_NOT_AFTER_NUMERAL}(?P<n>{_COUNT})\s*个?\s*(?P<unit>天|日|周|星期|礼拜|月|年)\s*"
            r"(?P<dir>以后|之后|后|以前|之前|前)"
        ),
        _offset,
    ),
    (re.compile(rf"过\s*(?P<n>{_COUNT})\s*(?P<unit>天)(?P<dir>)"), _offset),
    (re.compile(r"(?P<rel>下下?个?|这个?|本)?月(?:底|末)"), _month_end),
    (
        re.compile(
            r"(?<![a-z])(?:the\s+)?end\s+of\s+(?:the\s+)?(?P<rel>this\s+|next\s+)?month(?![a-z])"
        ),
        _month_end,
    ),
    (
        re.compile(
            rf"(?<![a-z])(?:the\s+)?(?P<nth>{'|'.join(_ORDINALS)})\s+(?P<wd>{_WD})\s+"
            rf"(?:of|in)\s+(?:(?:the\s+)?(?P<rel>this|next)?\s*month|(?P<mon>{_MON}))(?![a-z])"
        ),
        _nth_weekday,
    ),
    (
        re.compile(
            rf"(?<![a-z\d])(?P<n>{_EN_COUNT})\s+(?P<unit>days?|weeks?)\s+(?:from|after)\s+"
            rf"(?P<base>tomorrow|today|{'|'.join(sorted(_FULL_WEEKDAYS))})(?![a-z])"
        ),
        _offset_from,
    ),
]

_EXPLICIT = {_iso, _zh_ymd, _en_md, _md, _zh_month_rel, _day_only, _zh_year_today}
_NO_YEAR = {_zh_ymd, _en_md, _md}
"""Handlers whose phrase may leave the year out (then it is found from today)."""
_YEAR_BEFORE = re.compile(
    r"(?:(?P<zh>去年|今年|明年|前年)|(?<![a-z])(?P<en>last|this|next)\s+year(?:\s+(?:on|in))?)"
    r"[\s,，的]*$"
)
_YEAR_AFTER = re.compile(r"^[\s,，]*(?:(?P<en>last|this|next)\s+year|(?P<zh>去年|今年|明年))")
_YEAR_SHIFT = {"去年": -1, "前年": -2, "今年": 0, "明年": 1, "last": -1, "this": 0, "next": 1}


def _holiday(m: re.Match[str], today: date) -> Result:
    raise AssertionError("holidays are found by .holidays, not by a pattern")  # pragma: no cover


_JOIN = re.compile(r"[\s,，、()（）]*")


def _with_year(
    folded: str, start: int, end: int, result: date, handler: Handler, today: date
) -> tuple[int, int, date]:
    """A year said around a month-day (去年6月18号, "March 3rd last year") sets its year."""
    if handler not in _NO_YEAR:
        return start, end, result
    before = _YEAR_BEFORE.search(folded[max(0, start - 16) : start])
    after = _YEAR_AFTER.match(folded[end : end + 16])
    said = before or after
    if not said:
        return start, end, result
    year = today.year + _YEAR_SHIFT[said["zh"] or said["en"]]
    moved = _make(year, result.month, result.day)
    if moved is None:
        return start, end, result
    if before:
        start -= len(before.group())
    if after and not before:
        end += len(after.group())
    return start, end, moved


def _said_year(folded: str, start: int, end: int) -> bool:
    return bool(_YEAR_BEFORE.search(folded[max(0, start - 16) : start + 6])) or bool(
        re.search(r"\d{4}|去年|今年|明年|前年|year", folded[start:end])
    )


def _back(result: date, handler: Handler, m: re.Match[str], today: date) -> date:
    """The same phrase read backwards: the latest such day on or before today."""
    if result <= today:
        return result
    groups = m.groupdict()
    if handler in _NO_YEAR:
        for year in range(result.year - 1, result.year - 9, -1):
            earlier = _make(year, result.month, result.day)
            if earlier is not None and earlier <= today:
                return earlier
    if handler is _day_only and not groups.get("rel"):
        for back in range(13):
            index = today.year * 12 + today.month - 1 - back
            earlier = _make(index // 12, index % 12 + 1, result.day)
            if earlier is not None and earlier <= today:
                return earlier
    pre = " ".join((groups.get("pre") or "").split())
    if (
        handler in (_en_weekday, _zh_weekday)
        and pre in ("", "on", "this")
        and not groups.get("post")
    ):
        return result - timedelta(days=7)  # "it broke on Monday": the Monday gone
    return result


_ASCII_PATTERNS = [(p, h) for p, h in _PATTERNS if not needs_non_ascii(p)]
"""The patterns that can match ASCII text (the others need 月, 日, 周, 明天...)."""


def scan_dates(text: str, *, today: date, past: bool = False) -> list[DateCandidate]:
    """Every date-like phrase in ``text``, left to right, longest first, not overlapping.

    ``past``: the date looked for is behind us (a purchase), so phrases without a year go
    back to the latest such day on or before today instead of forward.
    """
    folded = fold(text)
    found: list[tuple[int, int, Result, Handler]] = []
    for pattern, handler in _ASCII_PATTERNS if folded.isascii() else _PATTERNS:
        for m in pattern.finditer(folded):
            if m.end() == m.start():
                continue
            start, end = m.start(), m.end()
            try:
                result = handler(m, today)
                if result is None:
                    continue
                if isinstance(result, date) and not m.groupdict().get("y"):
                    start, end, result = _with_year(folded, start, end, result, handler, today)
                    if past and not _said_year(folded, start, end):
                        result = _back(result, handler, m, today)
            except OverflowError:  # "tomorrow" on 9999-12-31: before year 1 or after 9999
                result = _OFF_CALENDAR
            found.append((start, end, result, handler))
    for start, end, name in holidays.find(text):
        before = _YEAR_BEFORE.search(folded[max(0, start - 16) : start])
        year = None
        if before:
            year = today.year + _YEAR_SHIFT[before["zh"] or before["en"]]
            start -= len(before.group())
        try:
            day = holidays.resolve(name, today, past=past, year=year)
        except OverflowError:
            continue
        if day is not None:
            found.append((start, end, day, _holiday))
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    chosen: list[tuple[int, int, Result, Handler]] = []
    for item in found:
        if chosen and item[0] < chosen[-1][1]:
            continue
        chosen.append(item)
    # A weekday right next to an explicit date ("1月22日周五", "Friday, Jan 22") only
    # restates it: fold it into the date's span.
    merged: list[tuple[int, int, Result, Handler]] = []
    for item in chosen:
        if merged:
            prev = merged[-1]
            gap = folded[prev[1] : item[0]]
            weekdays = {_en_weekday, _zh_weekday}
            if _JOIN.fullmatch(gap) and (
                (prev[3] in _EXPLICIT and item[3] in weekdays)
                or (prev[3] in weekdays and item[3] in _EXPLICIT)
            ):
                keep = prev if prev[3] in _EXPLICIT else item
                merged[-1] = (prev[0], item[1], keep[2], keep[3])
                continue
        merged.append(item)
    out: list[DateCandidate] = []
    for start, end, result, _ in merged:
        phrase = text[start:end]
        if isinstance(result, date):
            out.append(DateCandidate(start, end, phrase, result))
        else:
            shown = phrase if len(phrase) <= 40 else phrase[:36] + "..."
            out.append(DateCandidate(start, end, phrase, None, f"{shown!r} is not a valid date"))
    return out


def find_dates(text: str, *, today: date, language: str | None = None) -> list[DateMatch]:
    """Every real date in ``text``, left to right. ``language`` is a hint; both are read."""
    return [
        DateMatch(c.value, (c.start, c.end))
        for c in scan_dates(text, today=today)
        if c.value is not None
    ]


def parse_date(text: str, *, today: date, language: str | None = None) -> DateMatch | None:
    """The first date in ``text`` and its span, or None.

    >>> parse_date("下周三出发", today=date(2026, 11, 29))
    DateMatch(value=datetime.date(2026, 12, 2), span=(0, 3))
    """
    found = find_dates(text, today=today, language=language)
    return found[0] if found else None
