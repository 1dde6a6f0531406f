"""A namespace followed by its changes: after writes, layered and vector search see what a
fresh process reading the whole store would, without reading the namespace again; and
build_layers makes again only the sessions whose turns changed. On every backend (memory://,
a SQLite file, PostgreSQL)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from relaystate import Scope
from relaystate.memory import recall
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.following import Rows
from relaystate.memory.longterm import ALL, LongTermMemory
from relaystate.model import MemoryItem
from relaystate.store import Stores

ME = Scope.user("u1")
T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
WORDS = [
    "dog",
    "beagle",
    "shelter",
    "painting",
    "sunset",
    "sister",
    "marathon",
    "shoes",
    "Lisbon",
    "Porto",
    "train",
    "hotel",
    "pasta",
    "garden",
    "piano",
    "exam",
    "birthday",
    "cake",
    "rain",
    "trip",
    "museum",
    "coffee",
]


def turn(n: int, session: int, who: str, rng: random.Random, *, minutes: int = 0) -> MemoryItem:
    text = f"{who}: " + " ".join(rng.choices(WORDS, k=6))
    when = T0 + timedelta(days=session, minutes=minutes or n)
    meta = {"session": str(session), "speaker": who}
    return MemoryItem(f"t{n}", "u1", "chat", text, when, metadata=meta)


def memory(stores: Stores, embedder: HashEmbedder | None) -> LongTermMemory:
    assert stores.memories is not None
    return LongTermMemory(stores.memories, clock=lambda: T0, embedder=embedder)


def same_conversation(a: recall.Conversation, b: recall.Conversation) -> None:
    assert a.ids == b.ids
    assert a.sessions == b.sessions and a.session_days == b.session_days
    assert a.speakers == b.speakers and a.texts == b.texts and a.voices == b.voices
    for name in ("session_of", "is_time", "voice_of"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("vectors", "context", "centroids"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.shape == y.shape and np.allclose(x, y, atol=1e-5), name


@pytest.fixture
def rng() -> Iterator[random.Random]:
    yield random.Random(7)


@pytest.mark.parametrize("inline", [True, False], ids=["vectors-with-turns", "vectors-later"])
def test_following_matches_a_fresh_read_after_every_kind_of_write(
    stores: Stores, rng: random.Random, inline: bool
) -> None:
    embedder = HashEmbedder(dimension=64)
    live = memory(stores, embedder)
    first = [turn(n, n // 5, ("ana", "ben")[n % 2], rng) for n in range(12)]
    live.add(ME, "chat", first)
    live.embed_pending(ME, "chat")
    live.build_layers(ME, "chat")
    live.search(ME, "chat", "beagle shelter")  # follows the namespace from here
    (followed_at_first,) = live._followed.values()
    rebuilt_at: list[int] = []
    build = followed_at_first.built

    def counted() -> recall.Conversation:
        rebuilt_at.append(step)
        return build()

    followed_at_first.built = counted  # type: ignore[method-assign]
    n, last = len(first), (len(first) - 1) // 5
    for step in range(14):
        kind = step % 4
        if kind in (0, 1):  # a turn at the end: the last session, or a new one
            last += kind
            new = [turn(n, last, ("ana", "ben")[n % 2], rng, minutes=10_000 + n)]
            n += 1
        elif kind == 2:  # a turn replaced with other words
            old = rng.randrange(n)
            new = [turn(old, old // 5, "ana", rng, minutes=old)]
        else:  # a turn added to an early session: rebuilt in memory
            new = [turn(n, 0, "ben", rng, minutes=500 + n)]
            n += 1
        live.add(ME, "chat", new)
        if inline or step % 3 == 2:
            live.embed_pending(ME, "chat")
        fresh = memory(stores, embedder)
        for question in ("beagle shelter", "Lisbon train hotel", "what did ana say of cake"):
            got = [(h.item.id, round(h.score, 9)) for h in live.search(ME, "chat", question)]
            want = [(h.item.id, round(h.score, 9)) for h in fresh.search(ME, "chat", question)]
            assert got == want, (step, question)
            vec = [h.item.id for h in live.search(ME, "chat", question, mode="vector")]
            assert vec == [h.item.id for h in fresh.search(ME, "chat", question, mode="vector")]
        followed = live._conversation("u1", "chat")
        rebuilt = fresh._conversation("u1", "chat")
        assert followed is not None and rebuilt is not None
        same_conversation(followed, rebuilt)
    # appended at the end (steps 0, 1 of 4) without a rebuild; the rest rebuilt in memory
    assert set(rebuilt_at) <= {s for s in range(14) if s % 4 in (2, 3)}
    assert {2, 3, 6, 7} <= set(rebuilt_at)
    # never read in full again: the same object, caught up by the changes alone
    (followed,) = live._followed.values()
    assert followed is followed_at_first


def test_build_layers_makes_again_only_the_sessions_that_changed(
    stores: Stores, rng: random.Random
) -> None:
    live = memory(stores, None)
    turns = [turn(n, n // 10, ("ana", "ben")[n % 2], rng) for n in range(40)]
    live.add(ME, "chat", turns)
    assert live.build_layers(ME, "chat") == 40 + 4 * 2 + 4  # windows, voices, sessions
    assert live.build_layers(ME, "chat") == 0  # nothing changed
    live.add(ME, "chat", [turn(40, 3, "ana", rng, minutes=10_000)])
    assert live.build_layers(ME, "chat") == 11 + 2 + 1  # the last session alone
    # and the layers a fresh process builds from scratch are the same documents
    assert stores.memories is not None
    mine = {
        (ns, d.id): (d.text, d.cites)
        for ns in ("chat~window", "chat~voice", "chat~session")
        for d in stores.memories.latest_memories("u1", ns, limit=ALL)
    }
    made = recall.derived(stores.memories.latest_memories("u1", "chat", limit=ALL), "chat")
    assert mine == {(d.namespace, d.id): (d.text, d.cites) for d in made}


def test_rows_grow_drop_and_compact() -> None:
    rows = Rows()
    for n in range(100):
        rows.put(f"i{n}", np.full(4, n, dtype=np.float32))
    assert len(rows) == 100 and rows.matrix.shape == (100, 4)
    view = rows.matrix
    rows.put("i3", np.full(4, -1, dtype=np.float32))
    assert view[3][0] == -1 and rows.at["i3"] == 3  # replaced in place
    for n in range(0, 60):
        rows.drop(f"i{n}")
    assert len(rows.at) == 40 and int(rows.alive.sum()) == 40
    assert len(rows) < 100  # compacted once most rows were tombstones
    assert all(rows.matrix[rows.at[f"i{n}"]][0] == n for n in range(60, 100))
    assert view.shape == (100, 4)  # a view taken before is still whole
