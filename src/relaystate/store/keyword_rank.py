"""BM25 with each owner's own statistics: how every backend ranks a keyword search.

A full-text index's built-in rank takes its statistics (how many documents, how many hold a
term, how long they are) from the whole table: SQLite's ``bm25()`` counts every user's
items, so one user's memories moved another's ranking, a faint channel between users.
Here the statistics come from the caller's (user, namespace) alone, so what others store
changes neither the order nor the scores of anyone else's results:

- ``N`` and the mean length: the owner's items (cached per generation of the namespace);
- a term's document frequency: the owner's items that hold it (counted by the index);
- an item's length: that item alone.

The index still decides what matches (its tokenizer: porter stemming, CJK bigrams), and
the score is Okapi BM25 with ``k1`` 1.2 and ``b`` 0.75 and Lucene's idf, which never goes
negative (a term in most of a small namespace's items still counts a little). A term counts
once per item: its frequency in an item would cost re-tokenising every match
(``highlight()``: 3-5x the search time on LoCoMo), and measured on LoCoMo's two quick
conversations it changes nothing that matters (keyword recall_any@10 0.771 with it, 0.766
without; multi-hop 0.233 both; the old table-wide FTS5 ``bm25()`` 0.771 / 0.233). Lengths are
in characters (SQLite: of the indexed words; PostgreSQL: of the text): the normalisation
needs only an item's length over the mean, and characters are what SQL can count.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

K1 = 1.2
B = 0.75
CACHED_OWNERS = 4096
"""Owners whose counts a process keeps (least recently used go first)."""


@dataclass(frozen=True)
class OwnerStats:
    """How many items a (user, namespace) holds and their mean length in characters."""

    items: int
    mean_length: float


def idf(items: int, holding: int) -> float:
    """Lucene's BM25 idf: rarer terms weigh more, and none weighs less than nothing."""
    return math.log(1.0 + (items - holding + 0.5) / (holding + 0.5))


class OwnerStatsCache:
    """Each owner's :class:`OwnerStats`, read again only when its generation moved (every
    write bumps it), so a search pays one count per change, not one per query."""

    def __init__(self, size: int = CACHED_OWNERS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._cached: OrderedDict[tuple[str, str], tuple[int, OwnerStats]] = OrderedDict()

    def get(
        self,
        user_id: str,
        namespace: str,
        generation: int,
        count: Callable[[], tuple[int, int]],
    ) -> OwnerStats:
        """The owner's stats at ``generation``; ``count`` gives (items, total characters)."""
        key = (user_id, namespace)
        with self._lock:
            found = self._cached.get(key)
            if found is not None and found[0] == generation:
                self._cached.move_to_end(key)
                return found[1]
        items, characters = count()
        stats = OwnerStats(items, characters / items if items else 1.0)
        with self._lock:
            self._cached[key] = (generation, stats)
            self._cached.move_to_end(key)
            while len(self._cached) > self._size:
                self._cached.popitem(last=False)
        return stats
