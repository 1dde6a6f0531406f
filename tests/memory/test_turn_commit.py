"""A turn with memory on is still one write transaction: its memory items, their keyword
index rows and the task's facts ride in the turn's commit, on SQLite and PostgreSQL, and the
turn reads nothing of memory. Counted from outside the runtime (SQLite's statement trace;
PostgreSQL's transaction ids), over a template declared here, as a user would write one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import (
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    open_store,
    user_confirmed,
)
from relaystate.conversation import Conversation
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.recorder import CONVERSATION, MemoryLayers, Recorder
from relaystate.store import SQLiteStore

from ..services import PostgresCluster
from ..support import Clock
from ..tracing import Traced

ALICE = Scope.user("alice")
FIRST = "I need a hotel in Lisbon"
FILL = "3 nights for Ana Costa"


def hotel() -> TaskTemplate:
    """A user's own template: three slots, a confirmation, no action (so a confirming yes
    is one commit)."""
    return TaskTemplate(
        "hotel_stay",
        slots=[
            Slot("city", kind="place", ask={"en": "Which city?"}),
            Slot("nights", kind="count", minimum=1, maximum=30, ask={"en": "How many nights?"}),
            Slot("guest", kind="person", ask={"en": "Who is staying?"}),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("done"),
        ],
        goal="Book a hotel stay",
        triggers={"en": ["hotel", "room"]},
    )


def conversation(
    url: str, clock: Clock, embedder: HashEmbedder | None = None
) -> tuple[Conversation, MemoryLayers]:
    rt = Runtime(open_store(url), [hotel()], clock=clock)
    layers = MemoryLayers.of(rt, embedder=embedder)
    return Conversation(rt, memory=Recorder(layers, clock=rt.clock)), layers


@pytest.fixture(autouse=True)
def pinned_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Conversation, MemoryLayers, Traced, Clock]]:
    clock = Clock()
    conv, layers = conversation(f"sqlite:///{tmp_path}/m.db", clock)
    assert isinstance(conv.runtime.stores.tasks, SQLiteStore)
    yield conv, layers, Traced(conv.runtime.stores.tasks), clock
    conv.runtime.close()


def kinds(traced: Traced, tx: list[str]) -> Counter[str]:
    return Counter(traced.kind(s) for s in tx)


def test_first_fill_and_confirm_turns_are_one_transaction_each_on_sqlite(
    traced: tuple[Conversation, MemoryLayers, Traced, Clock],
) -> None:
    conv, layers, trace, clock = traced
    first = conv.handle(ALICE, FIRST, "s1")
    assert first.state is not None and first.state.task.slots["city"] == "Lisbon"
    (tx,) = trace.writes()
    wrote = kinds(trace, tx)
    assert wrote["INSERT tasks"] == 1 and wrote["INSERT messages"] == 2
    assert wrote["INSERT memories"] == 2 and wrote["INSERT memories_fts"] == 2
    assert wrote["INSERT facts"] == 1  # city; the missing slots have no value to keep
    assert FIRST in " ".join(tx) and first.reply in " ".join(tx)

    for said, then in ((FILL, "confirming"), ("yes", "done")):
        clock.advance(minutes=2)
        trace.clear()
        turn = conv.handle(ALICE, said, "s1")
        assert turn.state is not None and turn.state.task.stage == then, turn.reply
        (tx,) = trace.writes()  # one write transaction: task, journal, messages, memory
        wrote = kinds(trace, tx)
        assert wrote["UPDATE tasks"] == wrote["INSERT journal"] == 1
        assert wrote["INSERT memories"] == wrote["INSERT memories_fts"] == 2
        assert wrote["INSERT facts"] == (2 if said == FILL else 0)  # nights, guest; yes: none
        # nothing of memory is read outside the commit: no summaries, no recent turns
        (read,) = trace.reads()
        assert "memories" not in read and "summaries" not in read and "facts" not in read

    state = conv.runtime.task(ALICE, first.state.task.id)
    assert layers.tasks is not None and layers.longterm is not None
    assert layers.tasks.entities(state.task) == {
        "city": "Lisbon",
        "nights": 3,
        "guest": "Ana Costa",
    }
    kept = layers.longterm.memories.latest_memories(
        "alice", CONVERSATION, task_id=state.task.id, limit=10
    )
    assert [k.text for k in kept][::2] == [FIRST, FILL, "yes"]
    assert [k.id for k in kept] == [f"s1:{n}" for n in range(1, 7)]
    hits = layers.longterm.search(ALICE, CONVERSATION, "Ana Costa nights", k=1, mode="keyword")
    assert hits and hits[0].item.text == FILL


def test_a_turn_that_changes_no_task_keeps_its_words_in_its_one_transaction(
    traced: tuple[Conversation, MemoryLayers, Traced, Clock],
) -> None:
    conv, layers, trace, _ = traced
    turn = conv.handle(ALICE, "hello there", "s1")
    assert turn.state is None
    (tx,) = trace.writes()
    wrote = kinds(trace, tx)
    assert wrote["INSERT messages"] == wrote["INSERT memories"] == 2
    assert "INSERT facts" not in wrote
    assert layers.longterm is not None
    assert layers.longterm.count(ALICE, CONVERSATION) == 2


def test_a_changed_value_closes_the_old_fact_in_the_same_commit(
    traced: tuple[Conversation, MemoryLayers, Traced, Clock],
) -> None:
    conv, layers, trace, _ = traced
    first = conv.handle(ALICE, FIRST, "s1")
    conv.handle(ALICE, FILL, "s1")
    trace.clear()
    turn = conv.handle(ALICE, "actually make it Porto", "s1")
    assert turn.state is not None and turn.state.task.slots["city"] == "Porto", turn.reply
    (tx,) = trace.writes()
    wrote = kinds(trace, tx)
    assert wrote["UPDATE facts"] == 1 and wrote["INSERT facts"] == 1  # Lisbon closed, Porto
    assert first.state is not None and layers.tasks is not None
    history = layers.tasks.history(first.state.task, "city")
    assert [f.object for f in history] == ["Lisbon", "Porto"]
    assert history[0].valid_to is not None and history[1].valid_to is None


def test_memory_on_adds_no_transaction_to_a_turn_that_runs_actions(tmp_path: Path) -> None:
    """The demo's flight booking runs two actions on yes: 1 + 2 commits with memory on or
    off; the words ride in the first, the reply in the last."""
    from relaystate.demo import templates

    counts = {}
    for memory in (False, True):
        rt = Runtime(
            open_store(f"sqlite:///{tmp_path}/{memory}.db"), templates(tmp_path / f"{memory}.l")
        )
        layers = MemoryLayers.of(rt)
        conv = Conversation(rt, memory=Recorder(layers, clock=rt.clock) if memory else None)
        for text in ("book a flight from Beijing to Shanghai", "next Wednesday, business"):
            conv.handle(ALICE, text, "s1")
        conv.handle(ALICE, "Alice Wang", "s1")
        assert isinstance(rt.stores.tasks, SQLiteStore)
        trace = Traced(rt.stores.tasks)
        turn = conv.handle(ALICE, "yes", "s1")
        assert len(turn.actions) == 2
        txs = trace.writes()
        counts[memory] = len(txs)
        if memory:
            first, last = " ".join(txs[0]), " ".join(txs[-1])
            assert "INSERT INTO memories" in first and "'yes'" in first
            assert "INSERT INTO memories" in last and turn.reply in last
            assert not any("INSERT INTO memories" in " ".join(tx) for tx in txs[1:-1])
        rt.close()
    assert counts[True] == counts[False] == 3


def test_first_fill_and_confirm_turns_are_one_transaction_each_on_postgres(
    pg_cluster: PostgresCluster,
) -> None:
    """On a cluster of its own: transaction ids are counted cluster-wide."""
    import psycopg

    clock = Clock()
    conv, layers = conversation(pg_cluster.url, clock, HashEmbedder())
    with psycopg.connect(pg_cluster.url, autocommit=True) as pg:

        def next_xid() -> int:
            row = pg.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
            assert row is not None
            return int(row[0])

        task_id = ""
        for n, (said, then) in enumerate(
            ((FIRST, "collecting"), (FILL, "confirming"), ("yes", "done"))
        ):
            clock.advance(minutes=2)
            before = next_xid()
            turn = conv.handle(ALICE, said, "s1")
            assert turn.state is not None and turn.state.task.stage == then, turn.reply
            assert next_xid() - before == 1, said  # one transaction wrote; reads get no id
            task_id = turn.state.task.id
            words, reply = f"s1:{2 * n + 1}", f"s1:{2 * n + 2}"
            writers = pg.execute(
                "SELECT xmin::text FROM tasks WHERE id = %(t)s"
                " UNION ALL SELECT xmin::text FROM messages WHERE session_id = 's1'"
                "   AND id > %(n)s"
                " UNION ALL SELECT xmin::text FROM memories WHERE id IN (%(w)s, %(r)s)"
                " UNION ALL SELECT xmin::text FROM memory_generations WHERE user_id = 'alice'"
                " UNION ALL SELECT v.xmin::text FROM memory_vectors v JOIN memories m USING (n)"
                "   WHERE m.id IN (%(w)s, %(r)s)",
                {"t": task_id, "n": 2 * n, "w": words, "r": reply},
            ).fetchall()
            assert len(writers) == 8 and len({w[0] for w in writers}) == 1, said
        facts = pg.execute(
            "SELECT predicate, object, valid_to IS NULL FROM facts WHERE subject = %s ORDER BY seq",
            (f"task:{task_id}",),
        ).fetchall()
        assert facts == [
            ("city", "Lisbon", True),
            ("guest", "Ana Costa", True),
            ("nights", 3, True),
        ]
    assert layers.longterm is not None
    hits = layers.longterm.search(ALICE, CONVERSATION, "Ana Costa nights", k=1, mode="keyword")
    assert hits and hits[0].item.text == FILL
    hits = layers.longterm.search(ALICE, CONVERSATION, "Ana Costa nights", k=1, mode="vector")
    assert hits and hits[0].item.text == FILL
    conv.runtime.close()


def test_a_cheap_embedders_vectors_ride_in_the_commit_on_sqlite(tmp_path: Path) -> None:
    clock = Clock()
    conv, layers = conversation(f"sqlite:///{tmp_path}/v.db", clock, HashEmbedder())
    assert isinstance(conv.runtime.stores.tasks, SQLiteStore)
    trace = Traced(conv.runtime.stores.tasks)
    conv.handle(ALICE, FIRST, "s1")
    (tx,) = trace.writes()
    assert kinds(trace, tx)["INSERT memory_vectors"] == 2
    assert layers.longterm is not None and layers.longterm.embedder is not None
    name = layers.longterm.embedder.name
    assert layers.longterm.memories.unembedded("alice", CONVERSATION, name, limit=9) == []
    hits = layers.longterm.search(ALICE, CONVERSATION, "hotel Lisbon", k=1, mode="vector")
    assert hits and hits[0].item.text == FIRST
    conv.runtime.close()


def test_a_backend_without_memory_in_its_commit_gets_it_right_after(tmp_path: Path) -> None:
    """A user's own backend that does not declare ``MEMORY_IN_COMMIT``: the bundle writes
    the turn's memory through the roles after the commit, complete all the same."""
    from relaystate.store import Stores

    store = SQLiteStore(tmp_path / "own.db")
    stores = Stores(store, store, store, store, store, store.memories, store.working)
    assert not stores.memory_in_commit
    rt = Runtime(stores, [hotel()])
    layers = MemoryLayers.of(rt)
    conv = Conversation(rt, memory=Recorder(layers, clock=rt.clock))
    conv.handle(ALICE, FIRST, "s1")
    trace = Traced(store)
    turn = conv.handle(ALICE, FILL, "s1")
    txs = trace.writes()
    assert [any("INSERT INTO tasks" in s or "UPDATE tasks" in s for s in tx) for tx in txs] == [
        True,
        False,
        False,
    ]  # the turn, then its items, then its facts
    assert turn.state is not None and layers.tasks is not None and layers.longterm is not None
    assert layers.tasks.entities(turn.state.task) == {
        "city": "Lisbon",
        "nights": 3,
        "guest": "Ana Costa",
    }
    assert layers.longterm.count(ALICE, CONVERSATION) == 4
    rt.close()
