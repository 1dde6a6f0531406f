"""Long-term memory through its front door: checked input, scoped by user, hybrid search
(keyword and vector lists fused by reciprocal rank), filters, embedding once per item."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from relaystate import Scope
from relaystate.errors import InvalidInput
from relaystate.memory.embed import HashEmbedder, Kind, Vector
from relaystate.memory.longterm import LongTermMemory, fuse
from relaystate.model import MemoryItem
from relaystate.store import Stores
from relaystate.store.roles import MemoryFilter

T0 = datetime(2026, 3, 1, tzinfo=UTC)
ALICE, BOB = Scope.user("alice"), Scope.user("bob")


class Counting(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__(dimension=256)
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str], *, kind: Kind) -> list[Vector]:
        self.seen.extend(texts)
        return super().embed(texts, kind=kind)


def memory(stores: Stores, embedder: HashEmbedder | None = None) -> LongTermMemory:
    return LongTermMemory(stores.memories, clock=lambda: T0, embedder=embedder)


def item(item_id: str, text: str, days: int = 0, **kw: object) -> MemoryItem:
    # user and namespace are the caller's, whatever the item says
    return MemoryItem(item_id, "ignored", "ignored", text, T0 + timedelta(days=days), **kw)  # type: ignore[arg-type]


NOTES = [
    item("n1", "Alice booked a window seat on the flight to Tokyo"),
    item("n2", "The hotel in Kyoto has a view of the garden", source="doc"),
    item("n3", "Her passport expires in June", days=3),
    item("n4", "She prefers vegetarian meals on long flights", days=5, task_id="trip-1"),
]


def test_keyword_search_finds_and_ranks_without_any_embedder(stores: Stores) -> None:
    mem = memory(stores)
    assert mem.add(ALICE, "notes", NOTES) == 4
    hits = mem.search(ALICE, "notes", "Which seat on the Tokyo flight?", k=3)
    assert hits[0].item.id == "n1" and hits[0].ranks == {"keyword": 1}
    assert hits[0].item.user_id == "alice" and hits[0].item.namespace == "notes"
    assert [h.item.id for h in mem.search(ALICE, "notes", "garden view")] == ["n2"]
    with pytest.raises(InvalidInput, match="embedder"):
        mem.search(ALICE, "notes", "seat", mode="vector")


def test_hybrid_search_fuses_both_lists_and_vectors_find_what_words_miss(stores: Stores) -> None:
    embedder = Counting()
    mem = memory(stores, embedder)
    mem.add(ALICE, "notes", NOTES)
    assert mem.embed_pending(ALICE, "notes") == 4
    assert mem.embed_pending(ALICE, "notes") == 0  # each item is embedded once
    assert sorted(embedder.seen) == sorted(n.text for n in NOTES)
    hits = mem.search(ALICE, "notes", "vegetarian flights", k=4)
    assert hits[0].item.id == "n4" and set(hits[0].ranks) == {"keyword", "vector"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # "passports" shares no indexed word after stemming with n3? It does: the vector list
    # alone must still rank n3 first for a near-spelling the index does not stem
    vector = mem.search(ALICE, "notes", "passportt expiry", mode="vector", k=1)
    assert [h.item.id for h in vector] == ["n3"] and vector[0].ranks == {"vector": 1}
    assert mem.search(ALICE, "notes", "passportt expiry", mode="keyword") == []


def test_an_item_rewritten_is_embedded_again(stores: Stores) -> None:
    embedder = Counting()
    mem = memory(stores, embedder)
    mem.add(ALICE, "notes", NOTES[:2])
    mem.embed_pending(ALICE, "notes")
    mem.search(ALICE, "notes", "seat", mode="vector")  # caches the namespace's vectors
    mem.add(ALICE, "notes", [item("n1", "Alice changed to an aisle seat")])
    assert mem.embed_pending(ALICE, "notes") == 1
    assert embedder.seen[-1] == "Alice changed to an aisle seat"
    top = mem.search(ALICE, "notes", "aisle seat", mode="vector", k=1)
    assert top[0].item.text == "Alice changed to an aisle seat"  # not a stale cached vector


def test_filters_reach_both_lists(stores: Stores) -> None:
    mem = memory(stores, HashEmbedder(dimension=256))
    mem.add(ALICE, "notes", NOTES)
    mem.embed_pending(ALICE, "notes")
    later = MemoryFilter(since=T0 + timedelta(days=1))
    for mode in ("keyword", "vector", "hybrid"):
        found = {
            h.item.id for h in mem.search(ALICE, "notes", "flight passport", where=later, mode=mode)
        }  # type: ignore[arg-type]
        assert found and found <= {"n3", "n4"}, mode
    assert [
        h.item.id
        for h in mem.search(ALICE, "notes", "flights", where=MemoryFilter(task_ids=("trip-1",)))
    ] == ["n4"]
    assert [
        h.item.id
        for h in mem.search(ALICE, "notes", "garden", where=MemoryFilter(sources=("doc",)))
    ] == ["n2"]


def test_every_call_is_scoped_to_one_user(stores: Stores) -> None:
    mem = memory(stores, HashEmbedder(dimension=256))
    mem.add(ALICE, "notes", NOTES)
    mem.add(BOB, "notes", [item("n1", "Bob's own note about a Tokyo flight")])
    mem.embed_pending(ALICE, "notes")
    mem.embed_pending(BOB, "notes")
    for mode in ("keyword", "vector", "hybrid"):
        bob = mem.search(BOB, "notes", "Tokyo flight window seat", mode=mode)  # type: ignore[arg-type]
        assert [h.item.text for h in bob] == ["Bob's own note about a Tokyo flight"], mode
    assert mem.get(BOB, "notes", ["n2", "n3"]) == []
    with pytest.raises(InvalidInput, match="user scope"):
        mem.search(Scope.admin("ops"), "notes", "seat")


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (item("", "text"), "id"),
        (item("a\nb", "text"), "id"),
        (item("ok", "   "), "text"),
        (item("ok", "nul \x00"), "NUL"),
        (MemoryItem("ok", "u", "n", "t", metadata={"x": float("nan")}), "metadata"),
    ],
)
def test_bad_items_are_refused_and_nothing_is_written(
    stores: Stores, bad: MemoryItem, match: str
) -> None:
    mem = memory(stores)
    with pytest.raises(InvalidInput, match=match):
        mem.add(ALICE, "notes", [NOTES[0], bad])
    assert mem.count(ALICE, "notes") == 0


def test_bad_searches_are_refused(stores: Stores) -> None:
    mem = memory(stores)
    for kwargs, match in (({"k": 0}, "k"), ({"k": 10_001}, "k"), ({"mode": "fuzzy"}, "mode")):
        with pytest.raises(InvalidInput, match=match):
            mem.search(ALICE, "notes", "seat", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="namespace"):
        mem.add(ALICE, "bad\tname", NOTES)


def test_reciprocal_rank_fusion_weights_and_ties() -> None:
    fused = fuse(
        {"keyword": ["a", "b", "c"], "vector": ["c", "d"]}, {"keyword": 2.0, "vector": 1.0}
    )
    scores = dict(fused)
    assert [i for i, _ in fused][:2] == ["c", "a"]  # in both lists beats first in one
    assert scores["a"] == pytest.approx(2 / 61) and scores["d"] == pytest.approx(1 / 62)
    assert fuse({}, {}) == []
