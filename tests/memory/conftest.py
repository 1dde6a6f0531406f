"""The stores the memory tests run on: memory://, a SQLite file and a PostgreSQL database
(from the session's cluster in tests/conftest.py; skipped where it cannot run, a failure
under CI=true), and WordNet for recall's category layer."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from relaystate import open_store
from relaystate.memory.lexicon import Lexicon
from relaystate.store import Stores


@pytest.fixture
def stores(any_store_url: str) -> Iterator[Stores]:
    opened = open_store(any_store_url)
    yield opened
    opened.close()


@pytest.fixture
def wordnet() -> Lexicon:
    """Debian's WordNet (package wordnet-base, which .ci/run installs): skipped where it is
    absent, a failure under CI=true."""
    found = Lexicon.find()
    if found is None:
        reason = "WordNet is not installed (apt-get install wordnet-base)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI needs it: {reason}")
        pytest.skip(reason)
    return found
