"""The session clock: the current time in a timezone, pinnable with RELAYSTATE_NOW."""

from __future__ import annotations

import os
from datetime import date, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

ENV = "RELAYSTATE_NOW"


def zone(tz: str) -> ZoneInfo:
    """The ZoneInfo named ``tz``, or ValueError naming the bad zone."""
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {tz!r}") from None


def now(tz: str = "UTC") -> datetime:
    """The current time in ``tz`` (an IANA name such as "Asia/Shanghai").

    When RELAYSTATE_NOW holds an ISO datetime (or date) the clock is pinned to it, for tests
    and scripts; a value without an offset is read as a wall-clock time in ``tz``.
    """
    where = zone(tz)
    pinned = os.environ.get(ENV, "").strip()
    if not pinned:
        return datetime.now(where)
    try:
        moment = datetime.fromisoformat(pinned)
    except ValueError:
        raise ValueError(f"{ENV}={pinned!r} is not an ISO datetime") from None
    if moment.tzinfo is None:
        return moment.replace(tzinfo=where)
    return moment.astimezone(where)


def today(tz: str = "UTC") -> date:
    """The current date in ``tz``, honouring RELAYSTATE_NOW."""
    return now(tz).date()
