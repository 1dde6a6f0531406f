"""Working memory of a task (entities with versions and validity, summaries that cite the
turns they cover and merge recursively) and the memory graph, on memory and SQLite stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relaystate.errors import InvalidInput
from relaystate.memory.graph import MemoryGraph, candidates
from relaystate.memory.summarize import Said, extractive
from relaystate.memory.working import TaskMemory
from relaystate.model import Task
from relaystate.store import Stores
from tests.llm.chat_server import Reply, completion, running


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def task(**slots: object) -> Task:
    return Task("t1", "flight", "alice", "collecting", slots=dict(slots))


def test_slots_become_entities_and_a_change_closes_the_old_value(stores: Stores) -> None:
    mem = TaskMemory(stores.working, clock=Clock())
    first = mem.observe(task(seat="window", origin="Paris", date=None), source="s:1")
    assert {f.predicate for f in first} == {"seat", "origin"}  # nothing said of date yet
    assert mem.observe(task(seat="window", origin="Paris"), source="s:3") == []  # unchanged
    mem.observe(task(seat="aisle", origin="Paris"), source="s:5")
    assert mem.entities(task()) == {"seat": "aisle", "origin": "Paris"}
    seat = mem.history(task(), "seat")
    assert [(f.object, f.source, f.valid_to is None) for f in seat] == [
        ("window", "s:1", False),
        ("aisle", "s:5", True),
    ]
    assert seat[0].valid_to == seat[1].valid_from
    assert mem.entities(task(), at=seat[0].valid_from) == {"seat": "window", "origin": "Paris"}
    mem.observe(task(seat=None, origin="Paris"), source="s:7")  # cleared
    assert mem.entities(task()) == {"origin": "Paris"}
    # an explicit update needs no model, and a value already held is no new version
    assert mem.note(task(), "meal", "vegetarian", source="s:9") is not None
    assert mem.note(task(), "meal", "vegetarian") is None
    assert mem.entities(Task("t1", "flight", "bob", "x")) == {}  # bob's task t1 is not alice's
    with pytest.raises(InvalidInput):
        mem.note(task(), "", "x")


def turns(start: int, count: int) -> list[Said]:
    return [
        Said(f"s:{i}", "user", f"Turn {i}: I'd like seat {i} please. Nice weather today.")
        for i in range(start, start + count)
    ]


def test_summaries_cite_their_turns_and_merge_recursively(stores: Stores) -> None:
    mem = TaskMemory(stores.working, clock=Clock(), max_live=3, merge=2)
    for n in range(16):
        made = mem.summarize(task(), turns(n * 4, 4))
        assert made is not None and made.cites == tuple(f"s:{i}" for i in range(n * 4, n * 4 + 4))
    assert mem.summarize(task(), turns(0, 4)) is None  # covered already
    live = mem.summaries(task())
    assert all(len([s for s in live if s.level == lvl]) <= 3 for lvl in {s.level for s in live})
    assert max(s.level for s in live) >= 2  # summaries of summaries of summaries
    # together, the live summaries still cite every turn, each once
    cited = [c for s in live for c in s.cites]
    assert sorted(cited, key=lambda c: int(c[2:])) == [f"s:{i}" for i in range(64)]
    top = max(live, key=lambda s: s.level)
    assert top.parts and all(line.startswith("[s:") for line in top.text.splitlines())


def test_extractive_summaries_keep_what_the_task_depends_on() -> None:
    said = [
        Said("s:1", "user", "Hello there. How are you today?"),
        Said("s:2", "user", "Book me a flight to Tokyo. I want a window seat."),
        Said("s:3", "agent", "Sure. The weather is lovely."),
        Said("s:4", "user", "Actually, change it to an aisle seat. My budget is 800 dollars."),
    ]
    text, cites = extractive(said, ["Tokyo", "aisle"], budget=160)
    assert cites == ("s:1", "s:2", "s:3", "s:4")
    assert "[s:2] user: Book me a flight to Tokyo." in text
    assert "[s:4] user: Actually, change it to an aisle seat." in text
    assert "weather" not in text and len(text) <= 160
    assert text.index("s:2") < text.index("s:4")  # in the order it was said


def test_the_graph_walks_from_what_a_text_mentions(stores: Stores) -> None:
    graph = MemoryGraph(stores.working, clock=Clock())
    graph.relate("alice", "Caroline", "friend of", "Melanie")
    graph.relate("alice", "Melanie", "has a dog named", "Oscar")
    graph.relate("alice", "Oscar", "likes", "the beach")
    graph.relate("alice", "Caroline", "lives in", "Sweden", single=True)
    graph.relate("alice", "Caroline", "lives in", "Norway", single=True)  # moved
    graph.relate("bob", "Caroline", "friend of", "Dave")
    assert graph.mentioned("alice", "What does Caroline's friend's dog like?") == ["caroline"]
    near = graph.around("alice", "Tell me about Caroline", hops=2)
    facts = {(r.fact.subject, r.fact.predicate, r.fact.object): r.hops for r in near}
    assert facts == {
        ("Caroline", "friend of", "Melanie"): 1,
        ("Caroline", "lives in", "Norway"): 1,  # the current value only
        ("Melanie", "has a dog named", "Oscar"): 2,
    }
    three = {r.fact.object for r in graph.around("alice", "Caroline", hops=3)}
    assert "the beach" in three and "Dave" not in three and "Sweden" not in three
    assert graph.around("alice", "nobody we know") == []
    assert graph.around("alice", "Caroline", limit=1)[0].hops == 1


def test_name_candidates_cover_words_and_chinese() -> None:
    found = candidates("Where does Mary Jane live? 我朋友住在北京")
    assert "mary jane" in found and "where does mary jane" in found and "北京" in found
    assert len(candidates("word " * 1000)) <= 400


# -- abstractive summaries from a configured model (its wire protocol, a local server) ------
def test_a_models_summary_is_kept_only_when_faithful_to_its_turns(stores: Stores) -> None:
    from relaystate.llm.openai import OpenAICompatibleModel

    with running() as chat:
        model = OpenAICompatibleModel(chat.url, "k", "m", timeout=2.0, retries=0, backoff=0.01)
        mem = TaskMemory(stores.working, clock=Clock(), model=model)
        said = [
            Said("s:1", "user", "I need a flight to Tokyo on June 3 for 2 people."),
            Said("s:2", "agent", "Economy or business?"),
            Said("s:3", "user", "Business, and my name is Alice Wang."),
        ]
        chat.script(Reply(completion("Alice Wang wants 2 business seats to Tokyo on June 3.")))
        kept = mem.summarize(task(), said)
        assert kept is not None and kept.text == (
            "[s:1…s:3] Alice Wang wants 2 business seats to Tokyo on June 3."
        )
        assert kept.cites == ("s:1", "s:2", "s:3")
        assert "Summarize" in chat.last.body["messages"][0]["content"]
        # an invented number or name: the extractive summary stands instead
        more = [Said("s:4", "user", "Please add a vegetarian meal."), Said("s:5", "agent", "Done.")]
        chat.script(Reply(completion("Bob asked for 3 vegetarian meals.")))
        fallback = mem.summarize(task(), more)
        assert fallback is not None and fallback.text.startswith("[s:4] user: Please add")


def test_summaries_keep_what_the_user_said_not_the_agents_read_back() -> None:
    said = [
        Said("s:1", "user", "Book a flight to Tokyo on Dec 9."),
        Said("s:2", "agent", "Please confirm: destination Tokyo, date Dec 9. (yes/no)"),
        Said("s:3", "user", "Actually make it Osaka."),
        Said("s:4", "agent", "Please confirm: destination Osaka, date Dec 9. Is that right?"),
    ]
    text, cites = extractive(said, ["Osaka", "Dec 9"], budget=400)
    assert cites == ("s:1", "s:2", "s:3", "s:4")  # every turn it read
    assert "Please confirm" not in text and "(yes/no)" not in text
    assert text.splitlines() == [
        "[s:1] user: Book a flight to Tokyo on Dec 9.",
        "[s:3] user: Actually make it Osaka.",
    ]
