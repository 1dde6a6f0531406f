"""The stores the memory tests run on: memory://, a SQLite file and a PostgreSQL database
(from the session's cluster in tests/conftest.py; skipped where it cannot run, a failure
under CI=true)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import open_store
from relaystate.store import Stores


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/memory.db"
    else:
        url = str(request.getfixturevalue("postgres_url"))
    opened = open_store(url)
    yield opened
    opened.close()
