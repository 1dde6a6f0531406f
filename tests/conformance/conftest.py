"""Every store backend the conformance suite runs against.

A backend joins by adding a factory here; the tests themselves never name a backend.
PostgreSQL and Redis come from the session servers in tests/conftest.py (skipped where they
cannot run, a failure under CI=true).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from relaystate.store import InMemoryStore, SQLiteStore, Store, open_store

BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Store]] = {
    "memory": lambda request: InMemoryStore(),
    "sqlite": lambda request: SQLiteStore(request.getfixturevalue("tmp_path") / "conformance.db"),
    "postgres": lambda request: open_store(request.getfixturevalue("postgres_url")),
    "postgres+redis": lambda request: open_store(
        request.getfixturevalue("postgres_url"), cache=request.getfixturevalue("redis_url")
    ),
}


@pytest.fixture(params=list(BACKENDS))
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    backend = BACKENDS[request.param](request)
    yield backend
    backend.close()
