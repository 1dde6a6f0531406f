"""The memory role: items per user and namespace, found by their words (English and
Chinese), filtered, with vectors per embedder; one user never sees another's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

import numpy as np
import pytest

from ..errors import InvalidInput
from ..model import MemoryItem
from ..store import Memories, Stores
from ..store.roles import MemoryChanges, MemoryFilter
from ..store.scripts import unfolded
from ..store.terms import query_terms
from ..store.turn_memory import InlineVectors, Remember
from .fixtures import Conformance, required
from .records import T0, create, new_task, said, session


def item(
    item_id: str, text: str, *, user: str = "alice", ns: str = "chat", days: int = 0, **kw: object
) -> MemoryItem:
    return MemoryItem(item_id, user, ns, text, T0 + timedelta(days=days), **kw)  # type: ignore[arg-type]


def words(
    memories: Memories, query: str, *, user: str = "alice", k: int = 10, **kw: object
) -> list[str]:
    where = MemoryFilter(**kw) if kw else None  # type: ignore[arg-type]
    return [i for i, _ in memories.search_words(user, "chat", query_terms(query), k=k, where=where)]


def vector(*values: float) -> bytes:
    return np.array(values, dtype="<f4").tobytes()


def changed(changes: MemoryChanges) -> list[tuple[str, str]]:
    return [(m.id, m.text) for m in changes.items]


class MemoryRoleTests(Conformance):
    """Long-term memory: items by id, keyword and vector search, scoped by user and namespace."""

    @pytest.fixture
    def memories(self, bundle: Stores) -> Memories:
        return required(bundle.memories, "memories")

    def test_items_are_stored_read_back_and_replaced_by_id(self, memories: Memories) -> None:
        first = item("t1", "Caroline went to a support group", source="turn", metadata={"s": 1})
        assert memories.put_memories([first, item("t2", "Melanie paints")], at=T0) == 2
        [got] = memories.get_memories("alice", "chat", ["t1"])
        assert (got.id, got.text, got.source, got.metadata, got.time) == (
            "t1",
            first.text,
            "turn",
            {"s": 1},
            first.time,
        )
        assert got.added_at == T0
        assert [m.id for m in memories.get_memories("alice", "chat", ["t2", "nope", "t1"])] == [
            "t2",
            "t1",
        ]
        memories.put_memories([item("t1", "Caroline moved to Sweden", cites=("t2",))], at=T0)
        assert memories.count_memories("alice", "chat") == 2
        [again] = memories.get_memories("alice", "chat", ["t1"])
        assert again.text == "Caroline moved to Sweden" and again.cites == ("t2",)
        assert words(memories, "support group") == []  # the old words left the index
        assert words(memories, "Sweden") == ["t1"]

    def test_search_ranks_by_words_and_stems(self, memories: Memories) -> None:
        memories.put_memories(
            [
                item("a", "We adopted a puppy last week"),
                item("b", "The puppy loves painting sessions with Melanie"),
                item("c", "Melanie painted a sunset by the lake"),
                item("d", "Nothing to see here"),
            ],
            at=T0,
        )
        found = words(memories, "What did Melanie paint at the lake?")
        assert found[0] == "c" and "d" not in found  # most words; "paint" finds "painted"
        assert set(found) == {"b", "c"}
        assert words(memories, "puppy", k=1) in (["a"], ["b"])
        assert words(memories, "the of and") == []  # stop words only: nothing to look for

    def test_chinese_is_found_inside_a_sentence(self, memories: Memories) -> None:
        memories.put_memories(
            [
                item("z1", "我下个月想去北京看长城"),
                item("z2", "上海的天气很热"),
                item("z3", "book a flight to Beijing"),
            ],
            at=T0,
        )
        assert words(memories, "北京")[0] == "z1"
        assert words(memories, "长城在哪里") == ["z1"]
        assert words(memories, "上海天气")[0] == "z2"

    def test_traditional_and_simplified_chinese_find_each_other(self, memories: Memories) -> None:
        """Index and query fold Traditional to Simplified; the text stays as written."""
        written = {
            "t": "我的頭髮比較乾燥，理髮師建議用護髮乳",
            "s": "我的护照号码明年到期，要去外交部续办",
            "m": "ThinkPad 筆記型电脑 on the desk",
            "e": "Chinese hair care notes",
        }
        memories.put_memories([item(i, text) for i, text in written.items()], at=T0)
        assert words(memories, "头发干燥") == ["t"]  # Simplified finds Traditional
        assert words(memories, "護照號碼") == ["s"]  # Traditional finds Simplified
        assert words(memories, "筆記型電腦") == words(memories, "笔记型电脑") == ["m"]
        assert memories.search_words("alice", "chat", ["頭髮"], k=5)[0][0] == "t"  # own terms
        assert words(memories, "hair care") == ["e"]
        got = memories.get_memories("alice", "chat", list(written))
        assert {m.id: m.text for m in got} == written

    def test_reindex_folds_what_an_older_version_indexed(self, memories: Memories) -> None:
        with unfolded():  # as relaystate 0.1 indexed it
            memories.put_memories(
                [item("old", "臺北的會議中心"), item("en", "a meeting in Taipei")], at=T0
            )
        assert words(memories, "台北会议") == []
        assert memories.reindex_words(batch=1) == 1
        assert words(memories, "台北会议") == ["old"] and words(memories, "Taipei") == ["en"]
        assert memories.reindex_words() == 0  # idempotent
        [kept] = memories.get_memories("alice", "chat", ["old"])
        assert kept.text == "臺北的會議中心"

    def test_one_user_or_namespace_never_sees_another(self, memories: Memories) -> None:
        memories.put_memories(
            [
                item("x", "alice's secret recipe"),
                item("x", "bob's secret recipe", user="bob"),
                item("y", "alice's work recipe", ns="work"),
            ],
            at=T0,
        )
        assert words(memories, "secret recipe") == ["x"]
        assert [m.text for m in memories.get_memories("alice", "chat", ["x"])] == [
            "alice's secret recipe"
        ]
        assert [m.text for m in memories.get_memories("bob", "chat", ["x", "y"])] == [
            "bob's secret recipe"
        ]
        assert words(memories, "recipe", user="carol") == []
        assert (
            memories.count_memories("alice", "work") == 1
            and memories.count_memories("bob", "work") == 0
        )

    def test_ranking_statistics_are_the_owners_own(self, memories: Memories) -> None:
        """Ranks and scores come from the caller's (user, namespace) alone: another user's
        items, or the same user's in another namespace, holding the same words in any
        number, move neither (keyword statistics shared across users would be a channel)."""
        texts = [
            "a weekend trip to Paris with my sister",
            "paris paris paris",
            "the train to Lyon was late",
            "we booked the hotel in Paris for the trip",
            "my sister loves trains",
            "北京的烤鸭很好吃",
        ]
        memories.put_memories([item(f"m{n}", t) for n, t in enumerate(texts)], at=T0)
        queries = ("trip to Paris", "sister trains", "Lyon", "北京烤鸭", "hotel paris sister")
        before = {q: memories.search_words("alice", "chat", query_terms(q), k=10) for q in queries}
        assert all(before.values()) and before["trip to Paris"][0][0] == "m0"
        crowd = ["paris trip", "Paris Paris hotel", "sister", "北京", "train Lyon late trip"]
        memories.put_memories(
            [item(f"b{n}", crowd[n % 5], user="bob") for n in range(60)]
            + [item(f"w{n}", crowd[n % 5], ns="work") for n in range(60)]
            + [item(f"z{n}", "paris " * (n % 7 + 1), user="zoe", ns="work") for n in range(30)],
            at=T0,
        )
        after = {q: memories.search_words("alice", "chat", query_terms(q), k=10) for q in queries}
        assert after == before  # the same ids, the same order, the very same scores
        assert memories.search_words("bob", "chat", query_terms("trip to Paris"), k=10) != []

    def test_a_term_rarer_in_the_owners_items_weighs_more(self, memories: Memories) -> None:
        """BM25's idf, counted in the owner's items: "lyon" is in one of them and "paris" in
        all but one, so the item with "lyon" ranks first though others hold "paris" often."""
        texts = ["paris paris hotel", "paris museum", "paris lyon", "paris cafe", "a quiet day"]
        memories.put_memories([item(f"m{n}", t) for n, t in enumerate(texts)], at=T0)
        found = memories.search_words("alice", "chat", ["paris", "lyon"], k=10)
        assert found[0][0] == "m2"
        assert {i for i, _ in found} == {"m0", "m1", "m2", "m3"}
        assert all(score > 0 for _, score in found)

    def test_filters_by_time_source_and_task(self, memories: Memories) -> None:
        memories.put_memories(
            [
                item("old", "trip to Paris", days=0, source="turn", task_id="t-1"),
                item("mid", "trip to Paris again", days=5, source="doc"),
                item("new", "trip to Paris once more", days=10, source="turn", task_id="t-2"),
            ],
            at=T0,
        )
        assert set(words(memories, "Paris", since=T0 + timedelta(days=1))) == {"mid", "new"}
        assert set(words(memories, "Paris", until=T0 + timedelta(days=5))) == {"old"}
        assert set(words(memories, "Paris", sources=("turn",))) == {"old", "new"}
        assert words(memories, "Paris", task_ids=("t-2",)) == ["new"]

    @pytest.mark.parametrize(
        "call",
        [
            "filter source",
            "filter task",
            "vector filter",
            "search term",
            "ids",
            "latest of a task",
            "item text",
            "item source",
            "item metadata",
        ],
    )
    def test_a_nul_is_refused_alike_on_every_backend(self, memories: Memories, call: str) -> None:
        """PostgreSQL cannot take a NUL in any text parameter; the other backends refuse it
        the same way (InvalidInput naming the field), before reading or writing anything."""
        memories.put_memories([item("kept", "trip to Paris", source="turn", task_id="t-1")], at=T0)
        nul = "t-\x001"
        calls: dict[str, Callable[[], object]] = {
            "filter source": lambda: words(memories, "Paris", sources=("turn", nul)),
            "filter task": lambda: words(memories, "Paris", task_ids=(nul,)),
            "vector filter": lambda: memories.load_vectors(
                "alice", "chat", "e", MemoryFilter(sources=(nul,))
            ),
            "search term": lambda: memories.search_words("alice", "chat", ["paris", nul], k=5),
            "ids": lambda: memories.get_memories("alice", "chat", ["kept", nul]),
            "latest of a task": lambda: memories.latest_memories(
                "alice", "chat", task_id=nul, limit=5
            ),
            "item text": lambda: memories.put_memories([item("x", f"a {nul}")], at=T0),
            "item source": lambda: memories.put_memories([item("x", "a", source=nul)], at=T0),
            "item metadata": lambda: memories.put_memories(
                [item("x", "a", metadata={"k": nul})], at=T0
            ),
        }
        with pytest.raises(InvalidInput, match="NUL") as refused:
            calls[call]()
        assert refused.value.field.startswith(("where.", "terms", "ids", "task_id", "items"))
        assert [m.id for m in memories.latest_memories("alice", "chat", limit=5)] == ["kept"]
        assert words(memories, "Paris", sources=("turn",)) == ["kept"]  # the store still answers

    def test_the_k_best_are_the_same_however_deep_and_with_a_filter_that_keeps_all(
        self,
        memories: Memories,
    ) -> None:
        """SQLite cuts the ranking before reading the items when there is no filter, and after
        when there is one: both give the same order, ties by insertion, with other owners' rows
        matching the same words in the index."""
        texts = ["paris trip", "paris", "trip", "a long trip to paris with friends", "paris paris"]
        mine = [item(f"m{n}", texts[n % len(texts)], days=n % 3) for n in range(40)]
        others = [item(f"o{n}", "paris trip paris", user="bob") for n in range(40)]
        others += [item(f"w{n}", "paris trip", ns="work") for n in range(40)]
        memories.put_memories([*others, *mine], at=T0)
        deep = words(memories, "trip to Paris", k=40)
        assert sorted(deep) == sorted(m.id for m in mine)
        for k in (1, 3, 10, 25):
            assert words(memories, "trip to Paris", k=k) == deep[:k]
        everything = words(memories, "trip to Paris", k=40, since=T0 - timedelta(days=1))
        assert everything == deep

    def test_vectors_per_embedder_and_what_still_needs_one(self, memories: Memories) -> None:
        memories.put_memories([item("a", "one"), item("b", "two"), item("c", "three")], at=T0)
        before = memories.memory_generation("alice", "chat")
        assert [m.id for m in memories.unembedded("alice", "chat", "e1", limit=10)] == [
            "a",
            "b",
            "c",
        ]
        va, vb = np.arange(4, dtype="<f4").tobytes(), np.ones(4, dtype="<f4").tobytes()
        memories.put_vectors("alice", "chat", "e1", [("a", va), ("b", vb)])
        assert memories.memory_generation("alice", "chat") != before
        assert memories.load_vectors("alice", "chat", "e1") == [("a", va), ("b", vb)]
        assert memories.load_vectors("alice", "chat", "e2") == []
        assert memories.load_vectors("bob", "chat", "e1") == []
        assert [m.id for m in memories.unembedded("alice", "chat", "e1", limit=10)] == ["c"]
        memories.put_memories([item("a", "one, rewritten")], at=T0)  # its vector is stale: gone
        assert [i for i, _ in memories.load_vectors("alice", "chat", "e1")] == ["b"]
        assert {m.id for m in memories.unembedded("alice", "chat", "e1", limit=10)} == {"a", "c"}

    def test_which_users_still_have_items_without_a_vector(self, memories: Memories) -> None:
        bob = MemoryItem("b1", "bob", "chat", "bob's", T0)
        carol = MemoryItem("c1", "carol", "notes", "carol's", T0)
        memories.put_memories([item("a", "one"), bob, carol], at=T0)
        assert memories.unembedded_owners("chat", "e1", limit=10) == ["alice", "bob"]
        assert memories.unembedded_owners("chat", "e1", limit=1) == ["alice"]
        vector = np.ones(4, dtype="<f4").tobytes()
        memories.put_vectors("alice", "chat", "e1", [("a", vector)])
        assert memories.unembedded_owners("chat", "e1", limit=10) == ["bob"]
        assert memories.unembedded_owners("chat", "e2", limit=10) == ["alice", "bob"]
        assert memories.unembedded_owners("notes", "e1", limit=10) == ["carol"]

    def test_the_latest_items_of_a_namespace_or_a_task(self, memories: Memories) -> None:
        memories.put_memories(
            [
                item("t3", "third", days=3, task_id="a"),
                item("t1", "first", days=1, task_id="a"),
                item("t2", "second", days=2, task_id="b"),
                item("t4", "fourth", days=4, task_id="a"),
            ],
            at=T0,
        )
        latest = memories.latest_memories("alice", "chat", limit=2)
        assert [m.id for m in latest] == ["t3", "t4"]  # oldest first
        assert [m.id for m in memories.latest_memories("alice", "chat", task_id="a", limit=9)] == [
            "t1",
            "t3",
            "t4",
        ]
        assert memories.latest_memories("bob", "chat", limit=9) == []

    # -- the change feed ----------------------------------------------------------------
    def test_changes_after_a_generation_are_the_items_written_since(
        self, memories: Memories
    ) -> None:
        memories.put_memories([item("old", "before the cache loaded")], at=T0)
        start = memories.memory_generation("alice", "chat")
        memories.put_memories([item("c", "third"), item("a", "first"), item("b", "second")], at=T0)
        memories.put_memories([item("d", "fourth", days=-9)], at=T0)  # older in time: still last
        changes = memories.memory_changes("alice", "chat", start)
        assert changed(changes) == [
            ("c", "third"),
            ("a", "first"),
            ("b", "second"),
            ("d", "fourth"),
        ]
        assert changes.generation == memories.memory_generation("alice", "chat") > start
        assert changes.vectors == {}
        [d] = [m for m in changes.items if m.id == "d"]
        assert d == memories.get_memories("alice", "chat", ["d"])[0]  # the whole item
        everything = memories.memory_changes("alice", "chat", 0)
        assert [m.id for m in everything.items] == ["old", "c", "a", "b", "d"]
        assert everything.generation == changes.generation
        caught_up = memories.memory_changes("alice", "chat", changes.generation)
        assert caught_up == MemoryChanges(changes.generation, [], {})
        assert memories.memory_changes("carol", "chat", 0) == MemoryChanges(0, [], {})

    def test_another_users_or_namespaces_writes_never_appear(self, memories: Memories) -> None:
        memories.put_memories([item("x", "alice's")], at=T0)
        mine = memories.memory_generation("alice", "chat")
        memories.put_memories(
            [item("x", "bob's", user="bob"), item("y", "alice's work", ns="work")], at=T0
        )
        memories.put_vectors("bob", "chat", "e1", [("x", vector(1, 0))])
        memories.put_vectors("alice", "work", "e1", [("y", vector(0, 1))])
        assert memories.memory_changes("alice", "chat", mine, embedder="e1") == MemoryChanges(
            mine, [], {}
        )
        assert changed(memories.memory_changes("alice", "chat", 0)) == [("x", "alice's")]
        bobs = memories.memory_changes("bob", "chat", 0, embedder="e1")
        assert changed(bobs) == [("x", "bob's")] and bobs.vectors == {"x": vector(1, 0)}
        work = memories.memory_changes("alice", "work", 0, embedder="e1")
        assert changed(work) == [("y", "alice's work")] and work.vectors == {"y": vector(0, 1)}

    def test_a_replaced_item_comes_once_as_its_new_version_without_its_old_vector(
        self, memories: Memories
    ) -> None:
        memories.put_memories([item("a", "one"), item("b", "two")], at=T0)
        memories.put_vectors("alice", "chat", "e1", [("a", vector(1, 0)), ("b", vector(0, 1))])
        start = memories.memory_generation("alice", "chat")
        memories.put_memories([item("a", "one, rewritten")], at=T0)
        memories.put_memories([item("c", "three"), item("a", "one, rewritten again")], at=T0)
        changes = memories.memory_changes("alice", "chat", start, embedder="e1")
        # once each; within one write, PostgreSQL keeps a replaced item's place (its row)
        assert sorted(changed(changes)) == [("a", "one, rewritten again"), ("c", "three")]
        assert changes.vectors == {}  # a's vector went with its old text; b did not change
        memories.put_vectors("alice", "chat", "e1", [("a", vector(2, 0))])
        again = memories.memory_changes("alice", "chat", changes.generation, embedder="e1")
        assert changed(again) == [("a", "one, rewritten again")]
        assert again.vectors == {"a": vector(2, 0)}

    def test_items_given_a_vector_come_again_with_it(self, memories: Memories) -> None:
        memories.put_memories([item("a", "one"), item("b", "two"), item("c", "three")], at=T0)
        start = memories.memory_generation("alice", "chat")
        va, vb, vb2 = vector(1, 0), vector(0, 1), vector(5, 5, 5)
        memories.put_vectors("alice", "chat", "e1", [("a", va), ("b", vb)])
        middle = memories.memory_generation("alice", "chat")
        memories.put_vectors("alice", "chat", "e2", [("b", vb2)])
        memories.put_vectors("alice", "chat", "e1", [("nope", va)])  # no such item: none comes
        e1 = memories.memory_changes("alice", "chat", start, embedder="e1")
        assert [m.id for m in e1.items] == ["a", "b"]  # c was given no vector
        assert e1.vectors == {"a": va, "b": vb}  # never another embedder's
        e2 = memories.memory_changes("alice", "chat", start, embedder="e2")
        assert [m.id for m in e2.items] == ["a", "b"] and e2.vectors == {"b": vb2}
        assert memories.memory_changes("alice", "chat", start).vectors == {}
        later = memories.memory_changes("alice", "chat", middle, embedder="e1")
        assert [m.id for m in later.items] == ["b"] and later.vectors == {"b": vb}
        assert later.generation == e1.generation == memories.memory_generation("alice", "chat")

    def test_a_turns_commit_stamps_its_items(self, bundle: Stores, memories: Memories) -> None:
        """A turn's items come in the feed, whether they ride in its commit or are written
        right after it; with the vectors the commit made, and another user's never."""

        def make(texts: Sequence[str]) -> list[bytes]:
            return [vector(float(len(t)), 1) for t in texts]

        remember = Remember("chat", InlineVectors("e1", make))
        memories.put_memories([item("x", "before")], at=T0)
        start = memories.memory_generation("alice", "chat")
        talk = said("book a hotel", "which city?", task_id="t1")
        create(bundle, new_task(), session=session(), messages=talk, remember=remember)
        after_task = memories.memory_changes("alice", "chat", start, embedder="e1")
        assert changed(after_task) == [("s1:1", "book a hotel"), ("s1:2", "which city?")]
        assert after_task.vectors == {"s1:1": vector(12, 1), "s1:2": vector(11, 1)}
        assert after_task.generation == memories.memory_generation("alice", "chat")
        bob = said("hi", sid="s2", user="bob")
        bundle.write_session(session("s2", user="bob"), bob, remember=remember)
        bundle.write_session(None, said("no task"), remember=Remember("chat"))
        later = memories.memory_changes("alice", "chat", after_task.generation, embedder="e1")
        assert changed(later) == [("s1:3", "no task")] and later.vectors == {}
        assert [m.id for m in memories.memory_changes("bob", "chat", 0).items] == ["s2:1"]
