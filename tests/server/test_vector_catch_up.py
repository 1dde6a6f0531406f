"""A server killed between a turn's commit and its vector pass loses no memory item: the
items committed with the turn, and the next server's start-up pass makes their vectors.

A real ``relaystate serve`` over a SQLite file with a model embedder (e5: too slow to make
vectors inside the commit, so a background pass does), SIGKILLed by the ``before_vectors``
failpoint in that pass, then started again without it. With feature hashing the vectors
ride in the commit itself: that case is the last test here."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from pathlib import Path

import httpx

from relaystate import Runtime, Scope, open_store
from relaystate.memory.embed import embedder_from_config
from relaystate.memory.longterm import LongTermMemory
from relaystate.memory.recorder import CONVERSATION

from .serving import Server

TEXT = "book a flight from Beijing to Shanghai"


def test_a_crash_before_the_vector_pass_loses_no_memory_item(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.db"
    embedder = embedder_from_config("e5")
    doomed = Server(store, tmp_path, env={"RELAYSTATE_FAILPOINTS": "before_vectors=crash"})
    key = json.loads(doomed.cli("users", "create", "alice", "--json"))["api_key"]
    doomed.start("--embedder", "e5")
    assert doomed.proc is not None
    with contextlib.suppress(httpx.TransportError):  # killed before the answer left, maybe
        httpx.post(
            f"{doomed.url}/v1/sessions/s1/messages",
            json={"text": TEXT},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
    assert doomed.proc.wait(timeout=20) == -signal.SIGKILL, doomed.output()

    rt = Runtime(open_store(store), [])
    memory = LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=embedder)
    alice = Scope.user("alice")
    kept = memory.memories.latest_memories("alice", CONVERSATION, limit=10)
    assert [k.text for k in kept][:1] == [TEXT] and len(kept) == 2  # the words and the reply
    pending = memory.memories.unembedded("alice", CONVERSATION, embedder.name, limit=10)
    assert [p.id for p in pending] == [k.id for k in kept]  # no vector made yet

    again = Server(store, tmp_path)
    again.start("--embedder", "e5")
    try:
        deadline = time.monotonic() + 20
        while memory.memories.unembedded("alice", CONVERSATION, embedder.name, limit=10):
            assert time.monotonic() < deadline, "the start-up pass did not catch up"
            time.sleep(0.1)
        vectors = memory.memories.load_vectors("alice", CONVERSATION, embedder.name)
        assert sorted(i for i, _ in vectors) == sorted(k.id for k in kept)
        hits = memory.search(alice, CONVERSATION, "flight Beijing Shanghai", k=1, mode="vector")
        assert hits and hits[0].item.text == TEXT
    finally:
        again.stop()
        rt.close()


def test_with_feature_hashing_the_vectors_ride_in_the_turns_commit(tmp_path: Path) -> None:
    """The same failpoint never fires: there is no pass after the turn to crash in."""
    store = f"sqlite:///{tmp_path}/store.db"
    embedder = embedder_from_config("hash")
    server = Server(store, tmp_path, env={"RELAYSTATE_FAILPOINTS": "before_vectors=crash"})
    key = json.loads(server.cli("users", "create", "alice", "--json"))["api_key"]
    server.start("--embedder", "hash")
    try:
        answer = httpx.post(
            f"{server.url}/v1/sessions/s1/messages",
            json={"text": TEXT},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        rt = Runtime(open_store(store), [])
        memory = LongTermMemory(rt.stores.memories, clock=rt.clock, embedder=embedder)
        assert memory.memories.unembedded("alice", CONVERSATION, embedder.name, limit=10) == []
        hits = memory.search(Scope.user("alice"), CONVERSATION, "flight Beijing", mode="vector")
        assert hits and hits[0].item.text == TEXT
        rt.close()
        assert server.proc is not None and server.proc.poll() is None  # never crashed
    finally:
        server.stop()
