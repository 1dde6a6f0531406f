"""One clock for every host that shares a store: the database server's.

Leases, claims and heartbeats are compared across processes: a worker judges another's
lease by comparing its expiry with "now". If each host used its own wall clock, a host
running 60 s ahead would take a live Action from a healthy worker (and run its side effect
again), and one running behind would hold abandoned work for as long as it lags. So a
runtime over a shared store reads the time the database server keeps, once, and from then
on adds the time its own monotonic clock has measured since (a host's clock being set,
stepped or skewed does not move it); it reads the server again every ``RESAMPLE`` seconds
so that two oscillators' drift stays far below a lease. A store without a shared clock
(SQLite, one host; in-memory, one process) keeps the local clock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from ..model import utcnow

log = logging.getLogger("relaystate.clock")
RESAMPLE = 60.0
"""Seconds between two readings of the database server's clock."""
RETRY = 5.0
"""Seconds before reading again after a failed reading (the server away)."""


class SharedClock:
    """Callable like ``utcnow``: the database server's time, as measured from here."""

    def __init__(
        self,
        read: Callable[[], datetime | None],
        *,
        monotonic: Callable[[], float] = time.monotonic,
        local: Callable[[], datetime] = utcnow,
    ) -> None:
        self._read, self._monotonic, self._local = read, monotonic, local
        self._lock = threading.Lock()
        self._base: tuple[datetime, float] | None = None  # server time at a monotonic instant
        self._due = 0.0  # monotonic time of the next reading
        self._shared = True  # False once the store said it has no clock of its own
        self._last: datetime | None = None

    @property
    def offset(self) -> timedelta | None:
        """How far the server's clock is ahead of this host's (None before a reading)."""
        base = self._base
        if base is None:
            return None
        return base[0] + timedelta(seconds=self._monotonic() - base[1]) - self._local()

    def __call__(self) -> datetime:
        if not self._shared:
            return self._local()
        now = self._monotonic()
        if now >= self._due:
            self._sample(now)
        base = self._base
        if base is None:  # no reading yet (the server away at start): this host's clock
            return self._local()
        at = base[0] + timedelta(seconds=now - base[1])
        with self._lock:  # never backwards, even when a reading corrects the drift
            if self._last is not None and at < self._last:
                at = self._last
            self._last = at
        return at

    def _sample(self, due: float) -> None:
        with self._lock:
            if due < self._due:
                return  # another thread read the server meanwhile
            self._due = due + RETRY
        before = self._monotonic()
        try:
            server = self._read()
        except Exception as exc:  # the store is away: keep measuring from the last reading
            log.warning("cannot read the database server's clock: %s", exc)
            return
        after = self._monotonic()
        if server is None:
            self._shared = False
            return
        with self._lock:
            # the server read its clock somewhere in the round trip: take the middle
            self._base = (server, (before + after) / 2)
            self._due = after + RESAMPLE
