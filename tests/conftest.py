"""Session-wide servers: PostgreSQL and Redis, started by the suite itself.

Where a server cannot run here the tests that need it skip with the reason; under
``CI=true`` a missing server fails the run instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate.demo.ledger import Ledger

from . import services

# Servers and CLI runs of the suite embed with the hash embedder (instant, deterministic)
# unless a test says otherwise: the default, the best one installed, is tested on its own
# (tests/memory/test_embed.py) with an explicit environment.
os.environ.setdefault("RELAYSTATE_EMBEDDER", "hash")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs this server: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of the maintenance database of a throwaway PostgreSQL cluster."""
    try:
        with services.postgres() as url:
            yield url
    except services.Unavailable as exc:
        _unavailable(str(exc))


@pytest.fixture
def pg_cluster() -> Iterator[services.PostgresCluster]:
    """A PostgreSQL cluster of one test's own, to stop and start under load."""
    try:
        found = services.PostgresCluster()
    except services.Unavailable as exc:
        _unavailable(str(exc))
        raise AssertionError("unreachable") from exc
    try:
        found.start()
        yield found
    finally:
        found.remove()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    try:
        with services.redis() as url:
            yield url
    except services.Unavailable as exc:
        _unavailable(str(exc))


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database in the session's cluster, for one test."""
    import uuid

    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def pgbouncer_server(postgres_server: str) -> Iterator[services.PgBouncer]:
    """PgBouncer in transaction mode in front of the session's PostgreSQL."""
    try:
        bouncer = services.PgBouncer(postgres_server)
        bouncer.start()
    except services.Unavailable as exc:
        _unavailable(str(exc))
        raise AssertionError("unreachable") from exc
    try:
        yield bouncer
    finally:
        bouncer.remove()


@pytest.fixture
def pgbouncer_url(postgres_url: str, pgbouncer_server: services.PgBouncer) -> str:
    """A fresh database (as ``postgres_url``) reached through PgBouncer in transaction mode."""
    return pgbouncer_server.url(postgres_url.rsplit("/", 1)[1])


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The session's Redis, emptied for one test."""
    import redis

    client = redis.Redis.from_url(redis_server)
    client.flushdb()
    client.close()
    return redis_server


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    """The demo's stand-in downstream, a SQLite file of one test's own."""
    return Ledger(tmp_path / "ledger.db")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite store URL of a file of one test's own (not created yet)."""
    return f"sqlite:///{tmp_path}/store.db"


@pytest.fixture(params=["sqlite", "postgres"])
def sql_store_url(request: pytest.FixtureRequest) -> str:
    """A store URL of each SQL backend in turn: a SQLite file, then a PostgreSQL database."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store_url(request: pytest.FixtureRequest) -> str:
    """A store URL of each backend in turn: ``memory://``, a SQLite file, a PostgreSQL db."""
    if request.param == "memory":
        return "memory://"
    return str(request.getfixturevalue(f"{request.param}_url"))
