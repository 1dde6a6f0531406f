"""Every store backend the conformance suite runs against.

A backend joins by adding a factory here; the tests themselves never name a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from relaystate.store import MemoryStore, SQLiteStore, Store

BACKENDS: dict[str, Callable[[Path], Store]] = {
    "memory": lambda tmp: MemoryStore(),
    "sqlite": lambda tmp: SQLiteStore(tmp / "conformance.db"),
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    backend = BACKENDS[request.param](tmp_path)
    yield backend
    backend.close()
