"""The session clock: the current time in a timezone, pinnable with RELAYSTATE_NOW."""

from __future__ import annotations

import os
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import ConfigError

ENV = "RELAYSTATE_NOW"
MIN_YEAR = 1000
MAX_YEAR = 9000
"""A pinned clock must leave room on both sides: dates are read relative to it ("in 300
days", "last year") and times shifted between zones, and Python's dates end at years 1 and
9999. A clock outside these years is a typo, refused with a clear error instead of an
OverflowError in the middle of a turn."""


def zone(tz: str) -> ZoneInfo:
    """The ZoneInfo named ``tz``, or ValueError naming the bad zone."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {tz!r}") from None


def pinned() -> datetime | None:
    """The moment RELAYSTATE_NOW pins the clock to (naive when it gives no offset), or None
    when it is unset; ConfigError when it is not an ISO time within the years supported."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(f"{ENV}={value[:60]!r} is not an ISO datetime or date") from None
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        raise ConfigError(
            f"{ENV}={value[:60]!r} is out of range: pin the clock between the years "
            f"{MIN_YEAR} and {MAX_YEAR}"
        )
    return moment


def now(tz: str = "UTC") -> datetime:
    """The current time in ``tz`` (an IANA name such as "Asia/Shanghai").

    When RELAYSTATE_NOW holds an ISO datetime (or date) the clock is pinned to it, for tests
    and scripts; a value without an offset is read as a wall-clock time in ``tz``.
    """
    where = zone(tz)
    moment = pinned()
    if moment is None:
        return datetime.now(where)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=where)
    return moment.astimezone(where)


def today(tz: str = "UTC") -> date:
    """The current date in ``tz``, honouring RELAYSTATE_NOW."""
    return now(tz).date()
