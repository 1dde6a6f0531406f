"""The store conformance suite (``relaystate.testing``) against every backend of this repo.

Each class names a backend and inherits the role suites it plays: the three stores play
every role (the SQL ones the schema role too); Redis plays the session role alone, in front
of a durable store, so its classes run the session and turn suites. PostgreSQL and Redis come
from the session servers in tests/conftest.py (skipped where they cannot run, a failure under
CI=true).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from relaystate.store import Stores, open_store
from relaystate.testing import SessionRoleTests, SQLStoreSuite, StoreSuite, TurnRoleTests

Opener = Callable[[], Stores]


class TestInMemory(StoreSuite):
    @pytest.fixture
    def open_stores(self) -> Opener:
        return lambda: open_store("memory://")  # each one a store of its own


class TestSQLite(SQLStoreSuite):
    @pytest.fixture
    def open_stores(self, sqlite_url: str) -> Opener:
        return lambda: open_store(sqlite_url)


class TestPostgres(SQLStoreSuite):
    @pytest.fixture
    def open_stores(self, postgres_url: str) -> Opener:
        return lambda: open_store(postgres_url)


class TestPostgresBehindPgBouncer(SQLStoreSuite):
    """Every role through PgBouncer in transaction mode: no state may live on a server
    connection across statements (no prepared statements, session locks, LISTEN or SET)."""

    @pytest.fixture
    def open_stores(self, pgbouncer_url: str) -> Opener:
        return lambda: open_store(pgbouncer_url)


class TestSQLiteWithRedis(SessionRoleTests, TurnRoleTests):
    @pytest.fixture
    def open_stores(self, sqlite_url: str, redis_url: str) -> Opener:
        return lambda: open_store(sqlite_url, cache=redis_url)


class TestPostgresWithRedis(SessionRoleTests, TurnRoleTests):
    @pytest.fixture
    def open_stores(self, postgres_url: str, redis_url: str) -> Opener:
        return lambda: open_store(postgres_url, cache=redis_url)
