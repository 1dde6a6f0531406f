"""PostgreSQL connections that fail fast while the server is away and come back at once.

A bare pool handles an outage badly for a service: every call waits the full pool timeout
for a connection that cannot come (a server answering 503 after 10 s per request), and the
pool retries its connections with an exponential backoff that is not capped, so after a
few minutes down it may wait another minute or two before it tries again: the server is
back but the service is not. So a pool is wrapped here:

- a call waits at most ``QUICK_WAIT`` for a pooled connection; past that, one direct
  connection attempt tells a busy pool (the server answers: keep waiting, up to
  ``WAIT_FOR_CONNECTION`` in all) from an unreachable server (fail now, with libpq's
  reason);
- once the server is known to be away, calls fail at once, and at most one direct attempt
  per ``PROBE_INTERVAL`` checks whether it is back; the first that succeeds replaces the
  pool with a fresh one (the old one, stuck in its backoff, is closed), so service resumes
  within ``PROBE_INTERVAL`` of the server accepting connections.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from ...errors import StoreUnavailable
from .url import PostgresURL

Conn = psycopg.Connection[tuple[Any, ...]]

WAIT_FOR_CONNECTION = 10.0
"""Seconds a call waits for a connection from a busy pool before it fails."""
QUICK_WAIT = 1.0
"""Seconds a call waits for a pooled connection before it checks the server directly."""
PROBE_INTERVAL = 0.5
"""Seconds between direct checks of a server known to be away."""
PROBE_TIMEOUT = 3
"""libpq connect_timeout of a direct check (whole seconds), for a server that drops packets."""


class ConnectionLost(StoreUnavailable):
    """The server went away while a statement ran: a write may or may not have committed
    (its COMMIT may have been applied before the answer was lost). Nothing else is known:
    what committed is read back before anything is written again."""


def server_gone(exc: psycopg.OperationalError) -> bool:
    """A lost or refused connection (no SQLSTATE, class 08, or the server shutting down),
    as opposed to an error of the statement itself."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class Connections:
    """The pool of one store, and what is known of the server's reachability."""

    def __init__(self, url: PostgresURL, where: str, *, first: Conn | None = None) -> None:
        self._conninfo, self._where, self._size = url.conninfo, where, url.pool_size
        self._prepare = url.prepare_threshold
        self._lock = threading.Lock()
        self._away: str | None = None  # why the server is known to be unreachable
        self._probed = 0.0  # monotonic time of the last direct check
        self._spare = first
        """The store's first (direct) connection, lent to one call at a time: the first
        statements need not wait for the pool to connect (it opens in the background)."""
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool[Conn]:
        return ConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._size,
            kwargs={"autocommit": True, "prepare_threshold": self._prepare},
            open=True,
            name="relaystate",
            # a connection is checked before it is handed out: after the server restarted,
            # the first call gets a new connection instead of a dead one
            check=ConnectionPool.check_connection,
            timeout=WAIT_FOR_CONNECTION,
        )

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A pooled connection; the server being down or gone is StoreUnavailable (what was
        being written is not committed, unless the server went away during its COMMIT)."""
        spare = self._lend()
        if spare is not None:
            with self._lent(spare) as conn:
                yield conn
            return
        pool, conn = self._get(self._usable_pool())
        try:
            yield conn
        except psycopg.OperationalError as exc:
            if not server_gone(exc):
                raise  # a deadlock, a serialisation failure...: handled by the caller
            self._mark_away(_one_line(exc))
            raise ConnectionLost(f"{self._where} stopped answering: {_one_line(exc)}") from None
        finally:
            try:
                pool.putconn(conn)
            except PoolClosed:  # replaced meanwhile: this connection is not needed any more
                conn.close()

    def _lend(self) -> Conn | None:
        """The spare connection, if no other call holds it and it is healthy."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and (spare.closed or spare.info.transaction_status != 0):
            spare.close()  # broken, or left inside a transaction: not lent again
            return None
        return spare

    @contextmanager
    def _lent(self, conn: Conn) -> Iterator[Conn]:
        try:
            yield conn
        except psycopg.OperationalError as exc:
            conn.close()
            if not server_gone(exc):
                raise
            self._mark_away(_one_line(exc))
            raise ConnectionLost(f"{self._where} stopped answering: {_one_line(exc)}") from None
        except BaseException:
            conn.close()
            raise
        with self._lock:
            kept = self._spare is None and not conn.closed
            if kept:
                self._spare = conn
        if not kept:
            conn.close()

    def _get(self, pool: ConnectionPool[Conn]) -> tuple[ConnectionPool[Conn], Conn]:
        """A connection and the pool it must go back to."""
        started = time.monotonic()
        try:
            return pool, pool.getconn(timeout=QUICK_WAIT)
        except PoolTimeout:
            pass
        except PoolClosed:  # another call replaced the pool while this one waited
            return self._get(self._usable_pool())
        why = self._probe()
        if why is not None:
            raise StoreUnavailable(f"cannot connect to {self._where}: {why}")
        # The server answers: the pool is busy, or still backing off from an outage.
        if pool.get_stats().get("pool_size", 0) == 0:
            pool = self._replace(pool)
        left = max(0.1, WAIT_FOR_CONNECTION - (time.monotonic() - started))
        try:
            return pool, pool.getconn(timeout=left)
        except (PoolTimeout, PoolClosed):
            raise StoreUnavailable(
                f"{self._where} had no free connection within {WAIT_FOR_CONNECTION:g} s: "
                "is the database server overloaded?"
            ) from None

    def _usable_pool(self) -> ConnectionPool[Conn]:
        """The pool, unless the server is known to be away: then fail at once, but check
        directly (at most once per PROBE_INTERVAL) whether it is back."""
        with self._lock:
            away, pool = self._away, self._pool
            due = away is not None and time.monotonic() - self._probed >= PROBE_INTERVAL
            if due:
                self._probed = time.monotonic()
        if away is None:
            return pool
        if not due:
            raise StoreUnavailable(f"cannot connect to {self._where}: {away}")
        why = self._attempt()
        if why is not None:
            self._mark_away(why)
            raise StoreUnavailable(f"cannot connect to {self._where}: {why}")
        return self._replace(pool)

    def _probe(self) -> str | None:
        """Whether the server accepts a connection now: None if so, else libpq's reason
        (and the server is marked away)."""
        with self._lock:
            if self._away is None and time.monotonic() - self._probed < PROBE_INTERVAL:
                return None  # checked a moment ago: one check serves the calls waiting now
            self._probed = time.monotonic()
        why = self._attempt()
        if why is not None:
            self._mark_away(why)
        return why

    def _attempt(self) -> str | None:
        try:
            psycopg.connect(self._conninfo, connect_timeout=PROBE_TIMEOUT).close()
        except psycopg.OperationalError as exc:
            return _one_line(exc)
        return None

    def _mark_away(self, why: str) -> None:
        with self._lock:
            if self._away is None:
                self._probed = time.monotonic()
            self._away = why

    def _replace(self, stale: ConnectionPool[Conn]) -> ConnectionPool[Conn]:
        """A fresh pool instead of ``stale`` (unless another call replaced it already); the
        server is known to answer again."""
        with self._lock:
            self._away = None
            if self._pool is not stale:
                return self._pool
            self._pool = self._new_pool()
            fresh = self._pool
        stale.close(timeout=0)
        return fresh

    def close(self) -> None:
        with self._lock:
            pool, spare, self._spare = self._pool, self._spare, None
        if spare is not None:
            spare.close()
        pool.close()
