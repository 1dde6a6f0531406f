"""Dates in both languages, absolute and relative, against a pinned today."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from relaystate.conversation import find_dates, now, parse_date, scan_dates, today

from .support import TODAY  # Sunday 2026-11-29

CASES = [
    # ISO and numeric forms
    ("2027-01-22", "2027-01-22"),
    ("2027/1/22", "2027-01-22"),
    ("2027.1.22", "2027-01-22"),
    ("fly on 2027-01-22 please", "2027-01-22"),
    # Chinese month-day, with and without a year
    ("1月22日", "2027-01-22"),
    ("1月22号", "2027-01-22"),
    ("1月22", "2027-01-22"),
    ("2027年1月22日", "2027-01-22"),
    ("二〇二七年一月二十二日", "2027-01-22"),
    ("十二月二十四日", "2026-12-24"),
    ("12月24号出发", "2026-12-24"),
    ("11月29日", "2026-11-29"),
    ("11月28日", "2027-11-28"),
    ("下个月5号", "2026-12-05"),
    ("下个月31号", "2026-12-31"),
    ("22号", "2026-12-22"),
    ("30号", "2026-11-30"),
    # English month-day
    ("Jan 22", "2027-01-22"),
    ("jan 22", "2027-01-22"),
    ("January 22nd", "2027-01-22"),
    ("January 22, 2028", "2028-01-22"),
    ("22 Jan", "2027-01-22"),
    ("the 22nd of January", "2027-01-22"),
    ("Dec. 3rd", "2026-12-03"),
    ("Sept 1", "2027-09-01"),
    ("Nov 29", "2026-11-29"),
    ("Feb 29", "2028-02-29"),
    ("on the 22nd", "2026-12-22"),
    ("the 1st of next month", "2026-12-01"),
    # relative days
    ("today", "2026-11-29"),
    ("tonight", "2026-11-29"),
    ("tomorrow", "2026-11-30"),
    ("Tomorrow morning", "2026-11-30"),
    ("tmr", "2026-11-30"),
    ("day after tomorrow", "2026-12-01"),
    ("the day after tomorrow", "2026-12-01"),
    ("yesterday", "2026-11-28"),
    ("今天", "2026-11-29"),
    ("明天", "2026-11-30"),
    ("明天上午", "2026-11-30"),
    ("后天", "2026-12-01"),
    ("大后天", "2026-12-02"),
    ("昨天", "2026-11-28"),
    ("前天", "2026-11-27"),
    # weekdays: today is a Sunday
    ("next Wednesday", "2026-12-02"),
    ("Next wednesday", "2026-12-02"),
    ("next wed", "2026-12-02"),
    ("this Friday", "2026-12-04"),
    ("on Friday", "2026-12-04"),
    ("Friday", "2026-12-04"),
    ("coming Monday", "2026-11-30"),
    ("on Sunday", "2026-11-29"),
    ("next Sunday", "2026-12-06"),
    ("on sat", "2026-12-05"),
    ("Wednesday next week", "2026-12-02"),
    ("next week on Friday", "2026-12-04"),
    ("last Friday", "2026-11-27"),
    ("下周三", "2026-12-02"),
    ("下星期三", "2026-12-02"),
    ("下礼拜三", "2026-12-02"),
    ("下周日", "2026-12-06"),
    ("下周一", "2026-11-30"),
    ("下下周一", "2026-12-07"),
    ("周五", "2026-12-04"),
    ("星期五", "2026-12-04"),
    ("礼拜五", "2026-12-04"),
    ("周日", "2026-11-29"),
    ("星期天", "2026-11-29"),
    ("这周五", "2026-11-27"),
    ("本周日", "2026-11-29"),
    ("上周五", "2026-11-20"),
    # offsets
    ("in 3 days", "2026-12-02"),
    ("in three days", "2026-12-02"),
    ("in a week", "2026-12-06"),
    ("in 2 weeks", "2026-12-13"),
    ("in a couple of days", "2026-12-01"),
    ("3 days from now", "2026-12-02"),
    ("5 days later", "2026-12-04"),
    ("3 days ago", "2026-11-26"),
    ("3 months ago", "2026-08-29"),
    ("三个月前", "2026-08-29"),
    ("两年前", "2024-11-29"),
    ("in 2 months", "2027-01-29"),
    ("3天后", "2026-12-02"),
    ("三天后", "2026-12-02"),
    ("3天以后", "2026-12-02"),
    ("两天之后", "2026-12-01"),
    ("过3天", "2026-12-02"),
    ("一周后", "2026-12-06"),
    ("两个星期后", "2026-12-13"),
    ("3天前", "2026-11-26"),
    # the whole count, never its last digits (1000天后 was 000 days: today)
    ("1000天后", "2029-08-25"),
    ("一千天后", "2029-08-25"),
    ("一百天后", "2027-03-09"),
    ("过1000天", "2029-08-25"),
    ("3000 days from now", "2035-02-15"),
    ("in 1000 days", "2029-08-25"),
    ("1200天前", "2023-08-17"),
    # inside sentences
    ("我想下周三从北京出发", "2026-12-02"),
    ("I'd like to fly next Wednesday morning", "2026-12-02"),
    ("明天的航班", "2026-11-30"),
    ("1月22日周五", "2027-01-22"),
    ("Friday, Jan 22", "2027-01-22"),
    ("book it for 22 Jan 2027, thanks", "2027-01-22"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_dates_resolve_against_today(text: str, expected: str) -> None:
    found = parse_date(text, today=TODAY)
    assert found is not None, text
    assert found.value.isoformat() == expected


@pytest.mark.parametrize(
    ("today_", "text", "expected"),
    [
        # On a Monday "next Wednesday" is the Wednesday of next week, like 下周三.
        (date(2026, 11, 30), "next Wednesday", "2026-12-09"),
        (date(2026, 11, 30), "下周三", "2026-12-09"),
        (date(2026, 11, 30), "this Wednesday", "2026-12-02"),
        (date(2026, 11, 30), "周三", "2026-12-02"),
        (date(2026, 11, 30), "这周三", "2026-12-02"),
        (date(2026, 12, 2), "Wednesday", "2026-12-02"),
        (date(2026, 12, 2), "next Wednesday", "2026-12-09"),
        (date(2026, 12, 3), "Wednesday", "2026-12-09"),
        (date(2026, 12, 3), "this Wednesday", "2026-12-09"),
        (date(2026, 12, 3), "这周三", "2026-12-02"),
        # Across the end of a month and a year.
        (date(2026, 12, 31), "明天", "2027-01-01"),
        (date(2026, 12, 31), "tomorrow", "2027-01-01"),
        (date(2026, 12, 31), "下周一", "2027-01-04"),
        (date(2026, 12, 31), "1月5日", "2027-01-05"),
        (date(2026, 12, 31), "12月30日", "2027-12-30"),
        (date(2026, 12, 31), "下个月5号", "2027-01-05"),
        (date(2027, 1, 31), "下个月28号", "2027-02-28"),
        (date(2027, 1, 31), "3天后", "2027-02-03"),
        (date(2027, 1, 31), "the 30th", "2027-03-30"),
        (date(2028, 2, 1), "Feb 29", "2028-02-29"),
    ],
)
def test_relative_dates_depend_on_the_day(today_: date, text: str, expected: str) -> None:
    found = parse_date(text, today=today_)
    assert found is not None and found.value.isoformat() == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "3 tickets",
        "300元",
        "¥300",
        "$30.50",
        "ORD-12345",
        "我要退款",
        "sat down",
        "c'mon",
        "2号航站楼",
        "3号线",
        "3月份",
        "next week",
        "下周",
        "a few days",
        "I may go",
        "the first time",
        "一日游",
        "Business class",
        "两三天后",  # two or three days: not a day (and never 23 days)
        "百日后",  # no count given
    ],
)
def test_text_without_a_date(text: str) -> None:
    assert parse_date(text, today=TODAY) is None


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("我想下周三出发", "下周三"),
        ("fly next Wednesday please", "next Wednesday"),
        ("on Friday at 9", "on Friday"),
        ("明天从北京走", "明天"),
        ("leaving Jan 22nd, 2027 early", "Jan 22nd, 2027"),
        ("2027年1月22日上午", "2027年1月22日"),
        ("in 3 days from Beijing", "in 3 days"),
    ],
)
def test_the_span_is_the_date_phrase(text: str, phrase: str) -> None:
    found = parse_date(text, today=TODAY)
    assert found is not None
    start, end = found.span
    assert text[start:end] == phrase


def test_full_width_text_keeps_its_spans() -> None:
    found = parse_date("日期：２０２７－０１－２２", today=TODAY)
    assert found is not None and found.value == date(2027, 1, 22)
    assert found.span == (3, 13)


def test_several_dates_are_found_left_to_right() -> None:
    found = find_dates("from Jan 22 to Jan 25, back 2月1日", today=TODAY)
    assert [d.value.isoformat() for d in found] == ["2027-01-22", "2027-01-25", "2027-02-01"]
    assert parse_date("from Jan 22 to Jan 25", today=TODAY) == found[0]


@pytest.mark.parametrize("text", ["2月30日", "2027-02-30", "13月1日", "Feb 30", "4月31号"])
def test_impossible_dates_are_reported_with_a_reason(text: str) -> None:
    assert parse_date(text, today=TODAY) is None
    [candidate] = scan_dates(text, today=TODAY)
    assert candidate.value is None
    assert candidate.reason is not None and "not a valid date" in candidate.reason


@pytest.mark.parametrize(
    "text",
    ["100000天后", "一万年以后", "in 99999 days", "50000 days ago", "200 years from now",
     "in 2000 months", "1" + "0" * 5000 + "天后"],
)  # fmt: skip
def test_a_count_beyond_100_years_is_not_a_date(text: str) -> None:
    """Not a date anyone books or remembers: refused with a reason, never cut short."""
    assert parse_date(text, today=TODAY) is None
    [candidate] = scan_dates(text, today=TODAY)
    assert candidate.value is None and candidate.reason is not None
    assert "not a valid date" in candidate.reason and len(candidate.reason) < 80


@pytest.mark.parametrize(
    ("today_", "text"),
    [
        (date(9999, 12, 31), "tomorrow"),
        (date(9999, 12, 31), "next Friday"),
        (date(9999, 12, 31), "3天后"),
        (date(9999, 12, 25), "in 2 months"),
        (date(1, 1, 1), "yesterday"),
        (date(1, 1, 3), "last Friday"),
        (date(1, 1, 3), "上周五"),
        (date(1, 6, 1), "2年前"),
    ],
)
def test_a_day_off_the_calendar_is_reported_not_raised(today_: date, text: str) -> None:
    """On 9999-12-31 there is no tomorrow: a reason, not an OverflowError."""
    [candidate] = scan_dates(text, today=today_)
    assert candidate.value is None and candidate.reason


def test_a_day_the_next_month_lacks_is_reported() -> None:
    [candidate] = scan_dates("下个月30号", today=date(2027, 1, 31))
    assert candidate.value is None and candidate.reason


def test_language_is_only_a_hint() -> None:
    assert parse_date("明天", today=TODAY, language="en") == parse_date("明天", today=TODAY)
    assert parse_date("tomorrow", today=TODAY, language="zh") is not None


# --- the clock --------------------------------------------------------------------------------


def test_clock_is_pinned_by_relaystate_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T23:30:00")
    moment = now("Asia/Shanghai")
    assert moment.isoformat() == "2026-11-29T23:30:00+08:00"
    assert today("Asia/Shanghai") == date(2026, 11, 29)
    # The same instant elsewhere, when the pinned time carries its offset.
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T23:30:00+08:00")
    assert now("UTC").isoformat() == "2026-11-29T15:30:00+00:00"
    assert today("America/New_York") == date(2026, 11, 29)
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T20:00:00Z")
    assert today("Asia/Shanghai") == date(2026, 11, 30)
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29")
    assert now("Europe/London").isoformat() == "2026-11-29T00:00:00+00:00"


def test_clock_runs_when_not_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RELAYSTATE_NOW", raising=False)
    moment = now("Asia/Shanghai")
    assert moment.utcoffset() == timedelta(hours=8)
    assert abs(moment - datetime.now(UTC)) < timedelta(seconds=5)
    assert now().tzinfo is not None


def test_clock_explains_bad_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", "next tuesday")
    with pytest.raises(ValueError, match="RELAYSTATE_NOW"):
        now("UTC")
    monkeypatch.delenv("RELAYSTATE_NOW")
    with pytest.raises(ValueError, match="unknown timezone"):
        now("Mars/Olympus_Mons")


@pytest.mark.parametrize(
    ("pattern", "needs"),
    [
        ("月", True),
        ("a?月", True),
        ("[一二三]+日", True),
        ("x{0,2}(?:周|星期)", True),
        ("(?:下个?|上)月", True),
        ("(?:月|th)", False),
        ("(?:年)?x", False),
        ("[一a]", False),
        ("[一二]*x", False),
        (r"(?<![a-z])next", False),
    ],
)
def test_patterns_that_need_non_ascii_are_told_apart(pattern: str, needs: bool) -> None:
    import re

    from relaystate.conversation.text import needs_non_ascii

    assert needs_non_ascii(re.compile(pattern)) is needs


def test_ascii_text_skips_only_patterns_that_cannot_match_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every English phrase of this file scans the same with every pattern as with the
    ASCII subset the scanner uses for ASCII text."""
    from relaystate.conversation import dates

    phrases = [str(c[0]) for c in CASES if str(c[0]).isascii()]
    phrases += ["no date here at all", "order 1234, item 22 of 30 on the 3rd", "in two weeks"]
    assert len(phrases) > 20
    fast = [scan_dates(p, today=TODAY) for p in phrases]
    monkeypatch.setattr(dates, "_ASCII_PATTERNS", dates._PATTERNS)
    assert [scan_dates(p, today=TODAY) for p in phrases] == fast


@pytest.mark.parametrize(
    ("text", "past", "expected"),
    [
        # numbers people type
        ("12/31", False, "2026-12-31"),
        ("8/8/2025", False, "2025-08-08"),
        ("12.31", False, "2026-12-31"),
        ("退12.50元", False, None),  # an amount, not December 50th
        # a year said around a month-day
        ("去年6月18号", False, "2025-06-18"),
        ("今年5月20号", True, "2026-05-20"),
        ("March 3rd last year", True, "2025-03-03"),
        ("last year on August 8", True, "2025-08-08"),
        # looking back (a purchase)
        ("3月5号买的", True, "2026-03-05"),
        ("December 20", True, "2025-12-20"),
        ("the 3rd", True, "2026-11-03"),
        ("Friday", True, "2026-11-27"),
        ("12/20", True, "2025-12-20"),
        # holidays, from the holidays library (2026 and 2027 calendars)
        ("元旦", False, "2027-01-01"),
        ("国庆节", False, "2027-10-01"),
        ("国庆节买的", True, "2026-10-01"),
        ("今年春节", True, "2026-02-17"),
        ("去年双十一", True, "2025-11-11"),
        ("on Christmas", False, "2026-12-25"),
        ("New Year's Day", True, "2026-01-01"),
        ("Thanksgiving", True, "2026-11-26"),
        ("Black Friday", True, "2026-11-27"),
    ],
)
def test_dates_as_people_say_them(text: str, past: bool, expected: str | None) -> None:
    found = [c for c in scan_dates(text, today=TODAY, past=past) if c.value is not None]
    if expected is None:
        assert found == []
    else:
        assert [c.value.isoformat() for c in found] == [expected], text
