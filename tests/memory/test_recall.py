"""Recall over a conversation: windows and sessions derived from its turns, the speaker and
date a question names, and the fused ranking, through LongTermMemory on a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from relaystate import Scope
from relaystate.memory.embed import HashEmbedder
from relaystate.memory.longterm import LongTermMemory
from relaystate.memory.recall import date_asked, derived
from relaystate.model import MemoryItem
from relaystate.store import Stores
from relaystate.store.roles import MemoryFilter

ME = Scope.user("u1")
SESSIONS = {
    "1": (
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        [
            ("Caroline", "Guess what, we finally went to the shelter last weekend."),
            ("Melanie", "Oh wow, did you bring someone home?"),
            ("Caroline", "Yes! A little beagle. We named him Oscar."),
            ("Melanie", "That's lovely. I've been painting a lot lately."),
        ],
    ),
    "2": (
        datetime(2023, 7, 2, 10, 0, tzinfo=UTC),
        [
            ("Melanie", "I finished the sunset painting for my sister."),
            ("Caroline", "Oscar chewed my running shoes again."),
            ("Melanie", "Ha, puppies! Did you run the marathon in the end?"),
            ("Caroline", "I did, in 4 hours 10 minutes."),
        ],
    ),
}


def turns() -> list[MemoryItem]:
    made = []
    for session, (when, said) in SESSIONS.items():
        for n, (who, text) in enumerate(said, start=1):
            made.append(
                MemoryItem(
                    f"D{session}:{n}",
                    "u1",
                    "chat",
                    f"{who}: {text}",
                    when,
                    None,
                    None,
                    {"session": session, "speaker": who},
                )
            )
    return made


@pytest.fixture(params=[None, "hash"])
def memory(request: pytest.FixtureRequest, stores: Stores) -> Iterator[LongTermMemory]:
    embedder = HashEmbedder(dimension=128) if request.param else None
    mem = LongTermMemory(
        stores.memories, clock=lambda: datetime(2024, 1, 1, tzinfo=UTC), embedder=embedder
    )
    mem.add(ME, "chat", turns())
    mem.embed_pending(ME, "chat")
    yield mem


def ids(mem: LongTermMemory, question: str, k: int = 3, **kw: object) -> list[str]:
    return [h.item.id for h in mem.search(ME, "chat", question, k=k, **kw)]  # type: ignore[arg-type]


def test_windows_and_sessions_cite_their_turns() -> None:
    docs = {(d.namespace, d.id): d for d in derived(turns(), "chat")}
    window = docs[("chat~window", "D1:2")]
    assert window.cites == ("D1:1", "D1:2", "D1:3") and "beagle" in window.text
    assert docs[("chat~window", "D1:1")].cites == ("D1:1", "D1:2")  # a session's first turn
    assert docs[("chat~window", "D2:1")].cites == ("D2:1", "D2:2")  # no window across sessions
    voice = docs[("chat~voice", "voice:1:caroline")]
    assert voice.cites == ("D1:1", "D1:3") and "beagle" in voice.text
    session = docs[("chat~session", "session:2")]
    assert session.cites == ("D2:1", "D2:2", "D2:3", "D2:4") and session.time == SESSIONS["2"][0]


def test_layers_find_the_answer_beside_the_words(memory: LongTermMemory) -> None:
    question = "What did Caroline bring home from the shelter?"
    assert memory.build_layers(ME, "chat") == 8 + 2 + 4  # windows, sessions, voices
    layered = ids(memory, question)
    assert "D1:3" in layered  # "A little beagle", which shares no word with the question
    assert layered[0] in ("D1:1", "D1:3")
    hits = {h.item.id: h for h in memory.search(ME, "chat", question, k=8)}
    assert "keyword" in hits["D1:1"].ranks  # its own words ("shelter", "caroline")
    assert "keyword" not in hits["D1:3"].ranks and "window" in hits["D1:3"].ranks
    assert hits["D1:3"].item.namespace == "chat"


def test_a_named_date_and_speaker_steer_the_ranking(memory: LongTermMemory) -> None:
    memory.build_layers(ME, "chat")
    assert ids(memory, "What did Melanie paint in July 2023?", k=1) == ["D2:1"]
    assert ids(memory, "What did Melanie paint in May 2023?", k=1) == ["D1:4"]
    assert {"D2:3", "D2:4"} & set(ids(memory, "When did Caroline run the marathon?", k=2))


def test_filters_and_plain_namespaces_search_items_as_they_are(memory: LongTermMemory) -> None:
    memory.build_layers(ME, "chat")
    only_may = MemoryFilter(until=datetime(2023, 6, 1, tzinfo=UTC))
    found = ids(memory, "Oscar", k=10, where=only_may)
    assert found and all(i.startswith("D1:") for i in found)
    plain = LongTermMemory(memory.memories, clock=memory.clock)
    plain.add(ME, "notes", [MemoryItem("n1", "u1", "notes", "Oscar is a beagle")])
    assert plain.build_layers(ME, "notes") == 0  # no sessions: nothing to derive
    assert [h.ranks for h in plain.search(ME, "notes", "beagle")] == [{"keyword": 1}]


TRIPS = [
    ("1", "Jon", "Just got back from Rome, the pasta was unreal."),
    ("1", "Gina", "Jealous! Did you see the Colosseum?"),
    ("1", "Jon", "Twice. Next up is the dance studio opening."),
    ("2", "Gina", "My store had its best week ever."),
    ("2", "Jon", "Chicago was windy but the jazz clubs were great."),
    ("2", "Gina", "You should visit my old city one day, it is tiny."),
    ("2", "Jon", "Deal, after the studio opens."),
]


def test_a_category_asked_for_finds_its_members(
    memory: LongTermMemory, wordnet: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items = [
        MemoryItem(
            f"T{n}",
            "u1",
            "trips",
            f"{who}: {text}",
            datetime(2023, int(s), 1, tzinfo=UTC),
            None,
            None,
            {"session": s, "speaker": who},
        )
        for n, (s, who, text) in enumerate(TRIPS, start=1)
    ]
    memory.add(ME, "trips", items)
    memory.embed_pending(ME, "trips")
    memory.build_layers(ME, "trips")
    question = "Which cities has Jon visited?"
    hits = memory.search(ME, "trips", question, k=7)
    ranks = {h.item.id: h.ranks for h in hits}
    # Rome and Chicago share no word with the question: the category found them
    assert "category" in ranks["T1"] and "keyword" not in ranks["T1"]
    assert "category" in ranks["T5"]
    assert all("category" not in r for i, r in ranks.items() if i not in ("T1", "T5"))
    with_wordnet = [h.item.id for h in hits]
    monkeypatch.setenv("RELAYSTATE_WORDNET", str(tmp_path / "switched-off"))
    without = [h.item.id for h in memory.search(ME, "trips", question, k=7)]
    # Rome: no keyword finds it, vectors (if any) rank it low
    assert with_wordnet.index("T1") < (without.index("T1") if "T1" in without else 7)
    assert with_wordnet.index("T5") <= without.index("T5")  # Chicago: its window found it too
    books = memory.search(ME, "trips", "What books has Jon read?", k=7)
    assert all("category" not in h.ranks for h in books)  # no book is named


@pytest.mark.parametrize(
    ("question", "fits", "misses"),
    [
        ("What happened on 8 May, 2023?", date(2023, 5, 9), date(2023, 5, 10)),
        ("What did she do on May 8, 2023?", date(2023, 5, 8), date(2022, 5, 8)),
        ("Where was he in June 2023?", date(2023, 7, 14), date(2023, 7, 15)),
        ("What did they plan in June?", date(2021, 6, 30), date(2021, 8, 1)),
        ("What changed in 2022?", date(2023, 1, 14), date(2023, 2, 1)),
    ],
)
def test_dates_a_question_names(question: str, fits: date, misses: date) -> None:
    asked = date_asked(question)
    assert asked is not None and asked(fits) and not asked(misses)


def test_may_the_verb_is_no_date() -> None:
    assert date_asked("May I ask what you painted?") is None
    assert date_asked("What is the capital of France?") is None


def test_a_kept_fact_credits_the_turn_it_cites(memory: LongTermMemory) -> None:
    """A fact a model extracted (words the turn itself may not have: "adopted" for "did you
    bring someone home?... a little beagle") finds its turn in layered search."""
    from relaystate.memory.extract import ExtractedFact, fact_items

    memory.build_layers(ME, "chat")
    question = "Who did Caroline adopt?"
    before = memory.search(ME, "chat", question, k=8)
    assert not before or before[0].item.id != "D1:3"  # no turn says "adopt"
    fact = ExtractedFact("Caroline", "adopted", "Oscar", None, None, "D1:3")
    assert memory.keep_facts(ME, "chat", fact_items([fact], "chat")) == 1
    after = memory.search(ME, "chat", question, k=8)
    assert after[0].item.id == "D1:3" and after[0].ranks["fact"] == 1
    assert all("fact" not in h.ranks for h in after[1:])
    # another user's facts are not this user's
    other = memory.search(Scope.user("u2"), "chat", question, k=8)
    assert all("fact" not in h.ranks for h in other)
