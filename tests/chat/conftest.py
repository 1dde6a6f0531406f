"""Conversations with the demo agents on a pinned Sunday, over a real SQLite file and a
real ledger: the fixtures of the chat tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import Runtime, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates

NOW = "2026-11-29T10:00:00"  # a Sunday: next Wednesday is 2026-12-02


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", NOW)


@pytest.fixture
def conv(tmp_path: Path) -> Iterator[Conversation]:
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/chat.db"), templates(tmp_path / "ledger.db"))
    yield Conversation(rt)
    rt.close()
