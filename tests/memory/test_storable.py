"""What memory backends refuse before SQL: text no backend stores, not long text (a
conversation layer is longer than any turn), alike on every backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from relaystate.errors import InvalidInput
from relaystate.model import MemoryItem
from relaystate.store import open_store

AT = datetime(2026, 1, 1, tzinfo=UTC)


def _item(text: str) -> MemoryItem:
    return MemoryItem("doc", "alice", "notes", text, AT, None, None, {})


def test_a_long_document_is_stored_and_a_nul_is_refused(any_store_url: str) -> None:
    stores = open_store(any_store_url)
    try:
        long = "a layer of many turns. " * 1_000  # 23,000 characters: more than a turn takes
        assert stores.memories.put_memories([_item(long)], at=AT) == 1
        (found,) = stores.memories.get_memories("alice", "notes", ["doc"])
        assert found.text == long
        with pytest.raises(InvalidInput, match=r"items\[0\]"):
            stores.memories.put_memories([_item("no\x00pe")], at=AT)
        (kept,) = stores.memories.get_memories("alice", "notes", ["doc"])
        assert kept.text == long  # the refused write changed nothing
    finally:
        stores.close()
