"""The working-memory role: facts with validity intervals (append-only; a new value closes
the old, the history stays), graph lookups by node, and summaries merged atomically."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from ..errors import VersionConflict
from ..model import Fact, Summary
from ..store import Stores, WorkingMemory
from .fixtures import Conformance, required
from .records import T0


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def fact(subject: str, predicate: str, value: object, minutes: int = 0, **kw: object) -> Fact:
    return Fact("alice", subject, predicate, value, at(minutes), **kw)  # type: ignore[arg-type]


def values(facts: list[Fact]) -> list[tuple[str, str, object]]:
    return [(f.subject, f.predicate, f.object) for f in facts]


class WorkingMemoryRoleTests(Conformance):
    """Working memory: facts with validity intervals, the graph around them, summaries merged
    atomically."""

    @pytest.fixture
    def working(self, bundle: Stores) -> WorkingMemory:
        return required(bundle.working, "working")

    def test_a_new_value_closes_the_old_one_and_history_stays(self, working: WorkingMemory) -> None:
        first = working.record_facts([fact("task:t1", "seat", "window", 0, source="turn:1")])
        assert len(first) == 1 and first[0].seq > 0
        assert working.record_facts([fact("task:t1", "seat", "window", 5)]) == []  # unchanged
        working.record_facts([fact("task:t1", "seat", "aisle", 10, source="turn:7")])
        assert values(working.current_facts("alice", subjects=["task:t1"])) == [
            ("task:t1", "seat", "aisle")
        ]
        history = working.fact_history("alice", "task:t1", "seat")
        assert [(f.object, f.valid_from, f.valid_to) for f in history] == [
            ("window", at(0), at(10)),
            ("aisle", at(10), None),
        ]
        assert history[1].source == "turn:7" and history[1].current and not history[0].current
        # what was true at a moment in the past
        then = working.current_facts("alice", subjects=["task:t1"], at=at(3))
        assert values(then) == [("task:t1", "seat", "window")]
        assert working.current_facts("bob", subjects=["task:t1"]) == []

    def test_none_closes_and_many_valued_predicates_keep_every_value(
        self, working: WorkingMemory
    ) -> None:
        working.record_facts(
            [
                fact("Caroline", "likes", "painting", single=False),
                fact("Caroline", "likes", "hiking", 1, single=False),
                fact("Caroline", "likes", "painting", 2, single=False),  # already held
                fact("Caroline", "lives in", "Sweden", 3),
            ]
        )
        assert sorted(f.object for f in working.current_facts("alice", subjects=["caroline"])) == [
            "Sweden",
            "hiking",
            "painting",
        ]
        working.record_facts([fact("Caroline", "lives in", None, 9)])
        current = working.current_facts("alice", subjects=["Caroline"])
        assert sorted(f.object for f in current) == ["hiking", "painting"]
        [moved] = working.fact_history("alice", "Caroline", "lives in")
        assert moved.valid_to == at(9)

    def test_graph_lookup_finds_facts_by_subject_or_object_node(
        self, working: WorkingMemory
    ) -> None:
        working.record_facts(
            [
                fact("Caroline", "friend of", "Melanie"),
                fact("Melanie", "has", "a dog named Bob"),
                fact("Caroline", "works at", "the shelter"),
                fact("task:t1", "amount", 120),
            ]
        )
        touching = working.current_facts("alice", touching=["melanie"])
        assert values(touching) == [
            ("Caroline", "friend of", "Melanie"),
            ("Melanie", "has", "a dog named Bob"),
        ]
        assert values(working.current_facts("alice", touching=["  THE SHELTER "])) == [
            ("Caroline", "works at", "the shelter")
        ]
        assert working.current_facts("alice", touching=[]) == []
        assert working.current_facts("alice", subjects=["task:t1"])[0].object == 120

    def test_summaries_merge_atomically(self, working: WorkingMemory) -> None:
        def summary(sid: str, level: int = 0, minutes: int = 0, **kw: object) -> Summary:
            turns = (f"turn:{sid}",)
            text = f"text {sid}"
            return Summary(sid, "alice", "t1", level, text, turns, at(minutes), **kw)  # type: ignore[arg-type]

        for i in range(3):
            working.add_summary(summary(f"s{i}", minutes=i))
        assert [s.id for s in working.summaries("alice", "t1")] == ["s0", "s1", "s2"]
        merged = summary("m1", level=1, minutes=5, parts=("s0", "s1"))
        working.merge_summaries("alice", ["s0", "s1"], merged)
        assert [s.id for s in working.summaries("alice", "t1")] == ["s2", "m1"]
        everything = working.summaries("alice", "t1", live=False)
        assert {s.id: s.merged_into for s in everything} == {
            "s0": "m1",
            "s1": "m1",
            "s2": None,
            "m1": None,
        }
        assert [s.parts for s in everything if s.id == "m1"] == [("s0", "s1")]
        with pytest.raises(VersionConflict):  # s1 was merged already: nothing changes
            working.merge_summaries("alice", ["s1", "s2"], summary("m2", level=1, minutes=6))
        assert [s.id for s in working.summaries("alice", "t1")] == ["s2", "m1"]
        assert working.summaries("bob", "t1") == []
