"""Keyword ranking with each owner's own statistics: how every backend ranks a keyword search.

A full-text index's built-in rank takes its statistics (how many documents, how many hold a
term, how long they are) from the whole table: SQLite's ``bm25()`` counted every user's
items, so one user's memories moved another's ranking, a faint channel between users. Here
the statistics come from the caller's (user, namespace) alone, so what others store changes
neither the order nor the scores of anyone else's results:

- ``N``: the owner's items (counted once per generation of the namespace);
- a term's document frequency: the owner's items that hold it (counted by the index).

The index still decides what matches (its tokenizer: porter stemming, CJK bigrams). An item
scores the sum of the idf of the query's terms it holds (Lucene's BM25 idf, never negative:
a term in most of a small namespace's items still counts a little): BM25 with ``b`` 0, each
term counted once per item. Both simplifications were measured, not assumed, through
``bench/locomo_loo.py`` (layered search, defaults; recall_any@10 / multi-hop recall_all@10 /
MRR): with the length normalisation (``b`` 0.75) LoCoMo dev hash 0.783 / 0.261 / 0.553 and
e5 0.818 / 0.310 / 0.589, dev2 MRR hash 0.613 and e5 0.699; without it 0.780 / 0.282 / 0.566,
0.829 / 0.310 / 0.597, 0.623 and 0.722; the table-wide FTS5 ``bm25()`` before it about the
same as the first. A term's frequency in an item needs the item re-tokenised
(``highlight()``, 3-5x the search time) and changed nothing on LoCoMo's quick pair (keyword
0.771 / 0.233 with it, 0.766 / 0.233 without); an item's length costs a read of every match
(about 2x at 80,000 items). What is left needs nothing but the index's matches.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable

CACHED_OWNERS = 4096
"""Owners whose item count a process keeps (least recently used go first)."""


def idf(items: int, holding: int) -> float:
    """Lucene's BM25 idf: rarer terms weigh more, and none weighs less than nothing."""
    return math.log(1.0 + (items - holding + 0.5) / (holding + 0.5))


class OwnerCounts:
    """How many items each (user, namespace) holds, counted again only when its generation
    moved (every write bumps it), so a search pays one count per change, not one per query."""

    def __init__(self, size: int = CACHED_OWNERS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._cached: OrderedDict[tuple[str, str], tuple[int, int]] = OrderedDict()

    def get(self, user_id: str, namespace: str, generation: int, count: Callable[[], int]) -> int:
        """The owner's item count at ``generation`` (``count`` counts them)."""
        key = (user_id, namespace)
        with self._lock:
            found = self._cached.get(key)
            if found is not None and found[0] == generation:
                self._cached.move_to_end(key)
                return found[1]
        items = count()
        with self._lock:
            self._cached[key] = (generation, items)
            self._cached.move_to_end(key)
            while len(self._cached) > self._size:
                self._cached.popitem(last=False)
        return items
