"""Memory through the turn path: a real conversation over a real SQLite file records its
turns and the task's entities in each turn's commit, and (past the recent window, when a
context asks) summaries; the task's context holds
the current values within the budget and never shows a replaced value as current."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystate import Runtime, Scope, open_store
from relaystate.conversation import Conversation
from relaystate.demo import templates
from relaystate.memory.assemble import task_context
from relaystate.memory.recorder import CONVERSATION, MemoryLayers, Recorder
from relaystate.memory.tokens import default_counter

ALICE = Scope.user("alice")
TALK = [
    "book a flight from Beijing to Shanghai",
    "Dec 9, economy, for Alice Wang",
    "actually make it business",
    "change the destination to Tokyo",
    "hmm",
    "let me check something",
    "and the passenger is Bob Li",
]


@pytest.fixture
def talk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Runtime, MemoryLayers, str]]:
    monkeypatch.setenv("RELAYSTATE_NOW", "2026-11-29T10:00:00")
    rt = Runtime(open_store(f"sqlite:///{tmp_path}/t.db"), templates(tmp_path / "l.db"))
    layers = MemoryLayers.of(rt)
    conv = Conversation(rt, memory=Recorder(layers, clock=rt.clock, recent=4, chunk=3))
    task_id = ""
    for text in TALK:
        turn = conv.handle(ALICE, text, "s1")
        assert turn.state is not None, turn.reply
        task_id = turn.state.task.id
    yield rt, layers, task_id
    rt.close()


def test_turns_entities_and_summaries_are_recorded(talk: tuple[Runtime, MemoryLayers, str]) -> None:
    rt, layers, task_id = talk
    assert layers.longterm is not None and layers.tasks is not None
    state = rt.task(ALICE, task_id)
    kept = layers.longterm.memories.latest_memories(
        "alice", CONVERSATION, task_id=task_id, limit=100
    )
    assert len(kept) == 2 * len(TALK)  # every user turn and every reply, in order
    assert [k.metadata["role"] for k in kept[:2]] == ["user", "assistant"] and kept[0].text == TALK[
        0
    ]
    assert layers.tasks.entities(state.task) == {
        k: v for k, v in state.task.slots.items() if v is not None
    }
    destination = layers.tasks.history(state.task, "destination")
    assert [f.object for f in destination] == ["Shanghai", "Tokyo"] and destination[0].valid_to
    assert layers.tasks.summaries(state.task) == []  # a turn makes none: context asks
    assert layers.catch_up(state.task) == 3  # 14 turns, 4 recent: three chunks of 3
    assert layers.catch_up(state.task) == 0  # caught up: nothing twice
    summaries = layers.tasks.summaries(state.task)
    covered = {c for s in summaries for c in s.cites}
    assert covered and covered <= {k.id for k in kept[:-4]}  # older turns only, never the recent
    hits = layers.longterm.search(ALICE, CONVERSATION, "passenger Bob Li", k=3)
    assert hits[0].item.text == TALK[-1]
    # another user's conversation memory is not there
    assert layers.longterm.search(Scope.user("bob"), CONVERSATION, "passenger Bob Li") == []


def test_the_context_holds_current_values_within_budget(
    talk: tuple[Runtime, MemoryLayers, str],
) -> None:
    rt, layers, task_id = talk
    state = rt.task(ALICE, task_id)
    counter = default_counter()
    for budget in (120, 250, 600, 4000):
        built = task_context(layers, state, budget=budget, counter=counter).context
        assert built.tokens <= budget and counter.count(built.prompt) == built.tokens
        assert len(built.explanation) == len({(d.id, d.layer) for d in built.explanation})
        entity_lines = [
            line for line in built.prompt.splitlines() if line.startswith("destination:")
        ]
        if budget >= 250:
            assert entity_lines and entity_lines[0].startswith("destination: Tokyo")
        for line in entity_lines:  # the old value only ever as the one replaced
            assert not line.startswith("destination: Shanghai")
    big = task_context(layers, state, budget=4000, counter=counter)
    assert big.query == TALK[-1]
    lines = big.context.prompt.rstrip().splitlines()
    assert lines[-2] == "User: " + TALK[-1] and lines[-1].startswith("Agent: ")  # in order, last
    assert big.context.prompt.startswith("Task state:")
    assert "Earlier in the conversation:" in big.context.prompt
