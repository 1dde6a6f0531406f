"""The memory graph: facts are edges between nodes (their subjects and text objects), with
validity intervals, in the same store as everything else (no graph server). Retrieval walks
a few hops from the nodes the current input mentions.

A node is mentioned when its name appears in the text: every run of one to four words (and
every two to six characters of a Chinese run) is a candidate name, looked up in one query.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .. import inputs
from ..errors import StoreURLError
from ..model import Fact
from ..store.roles import WorkingMemory
from ..store.terms import CJK_RUN, node_key

_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
MAX_WORDS = 4
"""Longest name (in words) looked for in a text."""
MAX_CANDIDATES = 400


@dataclass(frozen=True)
class Reached:
    """A fact the walk reached, ``hops`` edges from a mentioned node (1: it touches one)."""

    fact: Fact
    hops: int


class MemoryGraph:
    """Relate nodes and walk from what a text mentions."""

    def __init__(self, working: WorkingMemory | None, *, clock: Callable[[], datetime]) -> None:
        if working is None:
            raise StoreURLError("this store keeps no memory graph")
        self.working = working
        self.clock = clock

    def relate(
        self,
        user_id: str,
        subject: str,
        predicate: str,
        obj: Any,
        *,
        single: bool = False,
        source: str | None = None,
        task_id: str | None = None,
        at: datetime | None = None,
    ) -> Fact | None:
        """Add an edge (``single``: the predicate has one object at a time, a new one closes
        the old); the fact recorded, or None when the graph held it already."""
        inputs.identifier(user_id, "user_id")
        for name, value in (("subject", subject), ("predicate", predicate)):
            inputs.text(value, name)
        inputs.json_value(obj, "object")
        when = inputs.moment(at, "at") if at is not None else self.clock()
        fact = Fact(user_id, subject, predicate, obj, when, None, source, task_id, single)
        recorded = self.working.record_facts([fact])
        return recorded[0] if recorded else None

    def mentioned(self, user_id: str, text: str) -> list[str]:
        """The nodes of the user's graph that ``text`` names (lower-cased keys)."""
        keys = candidates(text)
        if not keys:
            return []
        found = self.working.current_facts(user_id, touching=keys)
        present = {node_key(f.subject) for f in found} | {node_key(f.object) for f in found}
        return [k for k in keys if k in present]

    def walk(
        self,
        user_id: str,
        start: Sequence[str],
        *,
        hops: int = 2,
        limit: int = 50,
        at: datetime | None = None,
    ) -> list[Reached]:
        """Facts within ``hops`` edges of the ``start`` nodes, nearest first, at most
        ``limit`` (breadth first: one query per hop)."""
        seen_nodes = {k for k in (node_key(s) for s in start) if k}
        frontier = sorted(seen_nodes)
        reached: dict[int, Reached] = {}
        for hop in range(1, hops + 1):
            if not frontier or len(reached) >= limit:
                break
            found = self.working.current_facts(user_id, touching=frontier, at=at)
            nxt: set[str] = set()
            for fact in found:
                if fact.seq not in reached and len(reached) < limit:
                    reached[fact.seq] = Reached(fact, hop)
                for end in (node_key(fact.subject), node_key(fact.object)):
                    if end and end not in seen_nodes:
                        nxt.add(end)
            seen_nodes |= nxt
            frontier = sorted(nxt)
        return list(reached.values())

    def around(self, user_id: str, text: str, *, hops: int = 2, limit: int = 50) -> list[Reached]:
        """The walk from the nodes ``text`` mentions."""
        return self.walk(user_id, self.mentioned(user_id, text), hops=hops, limit=limit)


def candidates(text: str) -> list[str]:
    """Every name ``text`` could be mentioning, longest first: runs of one to four words,
    and two to six characters of each Chinese run."""
    words = [_POSSESSIVE.sub("", m.group()) for m in _WORD.finditer(text)]
    found: dict[str, None] = {}
    for size in range(MAX_WORDS, 0, -1):
        for i in range(len(words) - size + 1):
            key = node_key(" ".join(words[i : i + size]))
            if key:
                found.setdefault(key)
    for run in CJK_RUN.findall(text):
        for size in range(min(6, len(run)), 1, -1):
            for i in range(len(run) - size + 1):
                found.setdefault(run[i : i + size])
    return list(found)[:MAX_CANDIDATES]


def describe(fact: Fact) -> str:
    """One line for a prompt: ``subject predicate object``."""
    value = fact.object if isinstance(fact.object, str) else repr(fact.object)
    return f"{fact.subject} {fact.predicate} {value}"
