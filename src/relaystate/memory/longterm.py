"""Long-term memory: what a user's agents keep beyond a session, found again by words and
by meaning.

Keyword search is the store's full-text index (FTS5 or PostgreSQL's); vector search is a
dot product over the namespace's vectors in this process (kept in a cache that the store's
generation number invalidates); the two ranked lists are fused by reciprocal rank fusion,
the keyword list weighted 2:1 (measured on LoCoMo: the fusion beats either alone, and
keywords alone beat vectors alone). With no embedder, search is keyword search: nothing
here needs a model.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from .. import inputs
from ..errors import InvalidInput, StoreURLError
from ..model import MemoryItem
from ..scope import Scope, checked
from ..store.roles import Memories, MemoryFilter
from ..store.terms import mostly_cjk, query_terms
from .embed import Embedder

if TYPE_CHECKING:  # numpy and recall load on the first vector or conversation search:
    import numpy as np  # a turn that only records memory never needs them

    from . import recall
    from .following import Followed
    from .rerank import Reranker
    from .rewrite import QueryRewriter

log = logging.getLogger(__name__)

Mode = Literal["hybrid", "keyword", "vector"]
MODES: tuple[Mode, ...] = ("hybrid", "keyword", "vector")
RRF_K = 60
"""Reciprocal rank fusion's constant: a hit at rank r adds weight / (RRF_K + r)."""
KEYWORD_WEIGHT = 2.0
VECTOR_WEIGHT = 1.0
POOL = 50
"""How deep each method's list goes before fusion (at least k)."""
MAX_K = 1000
ALL = 10_000_000
"""As many items as a namespace may hold, for reads of all of them."""
BATCH = 500
"""Items one transaction writes when many are added."""
FOLLOWED = 256
"""Namespaces a process keeps in memory for search (the least recently read go first)."""
RERANK_DEPTH = 30
"""How many of the rule-ranked hits (at least k) a reranker is asked about: one request of
text-embeddings-inference's default batch limit (32)."""
RERANK_WEIGHTS = {"rules": 1.0, "rerank": 1.0}
"""The reranked order: reciprocal rank fusion of the rule rank and the reranker's rank."""


@dataclass(frozen=True)
class Hit:
    """One item found: its fused score and its rank in each method's list (1 = first)."""

    item: MemoryItem
    score: float
    ranks: dict[str, int] = field(default_factory=dict)


class LongTermMemory:
    """Add, embed and search a user's items in a namespace. Every call takes the caller's
    scope: a user scope reaches its own items only; an admin scope must name the user."""

    def __init__(
        self,
        memories: Memories | None,
        *,
        clock: Callable[[], datetime],
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        rewriter: QueryRewriter | None = None,
    ) -> None:
        if memories is None:
            raise StoreURLError("this store keeps no long-term memory")
        self.memories = memories
        self.embedder = embedder
        self.reranker = reranker
        self.rewriter = rewriter
        self.clock = clock
        self._followed: dict[tuple[str, str, str], Followed] = {}
        self._locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    # -- writing -------------------------------------------------------------------------
    def add(
        self,
        scope: Scope,
        namespace: str,
        items: Sequence[MemoryItem],
        *,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Add or replace items (each keeps its own id) of the scope's user. Every item is
        checked before any is written; then one transaction per ``BATCH`` items. Their
        vectors are made later (:meth:`embed_pending`)."""
        return self._write(checked_items(scope, namespace, items), progress)

    def embed_pending(
        self,
        scope: Scope,
        namespace: str,
        *,
        batch: int = 32,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed every item that has no vector of this embedder yet; how many were."""
        if self.embedder is None:
            return 0
        user = owner(scope)
        done = 0
        while True:
            pending = self.memories.unembedded(user, namespace, self.embedder.name, limit=batch)
            if not pending:
                return done
            vectors = self.embedder.embed([p.text for p in pending], kind="document")
            blobs = [(p.id, vector_blob(v)) for p, v in zip(pending, vectors, strict=True)]
            self.memories.put_vectors(user, namespace, self.embedder.name, blobs)
            done += len(pending)
            if progress is not None:
                progress(len(pending))

    # -- reading -------------------------------------------------------------------------
    def get(self, scope: Scope, namespace: str, ids: Sequence[str]) -> list[MemoryItem]:
        """The items of these ids that exist, in the order asked."""
        return self.memories.get_memories(owner(scope), namespace, ids)

    def count(self, scope: Scope, namespace: str) -> int:
        return self.memories.count_memories(owner(scope), namespace)

    def search(
        self,
        scope: Scope,
        namespace: str,
        query: str,
        *,
        k: int = 10,
        where: MemoryFilter | None = None,
        mode: Mode = "hybrid",
        layered: bool = True,
    ) -> list[Hit]:
        """The ``k`` items that answer ``query`` best. ``hybrid`` fuses keyword and vector
        search when there is an embedder and vectors; else it is keyword search. A
        conversation with its layers built is searched with them (:mod:`.recall`) unless
        ``layered`` is False (the items alone: cheaper where the namespace changes with
        every turn).

        With a ``rewriter`` (:mod:`.rewrite`), each of its queries is searched so and the
        lists are fused by reciprocal rank (the hits' ranks gain ``"rewrite"``, their rank in
        that fusion). With a ``reranker`` (:mod:`.rerank`), the top ``RERANK_DEPTH`` (at
        least ``k``) are scored by it, each turn of a layered conversation by its window's
        text (the turn and its neighbours), other hits by their own, and ordered by
        reciprocal rank fusion of the rule rank and the reranker's rank, 1:1
        (``RERANK_WEIGHTS``), not by the reranker alone: on LoCoMo dev (759 questions,
        ``bench/locomo_rerank.py``) the e5 window reranker fused 1:1 took recall_any@10
        from 0.783 to 0.826 and MRR from 0.553 to 0.580; alone, MRR fell to 0.431 (its
        first hit is often a neighbour of the evidence); 2:1 and 1:2 gained less. Their
        ranks gain ``"rerank"``. A reranker that fails leaves the rule order, with one
        warning logged."""
        user = owner(scope)
        inputs.text(query, "query")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise InvalidInput("k", f"must be a whole number from 1 to {MAX_K}, not {k!r}")
        if mode not in MODES:
            raise InvalidInput("mode", f"must be one of {', '.join(MODES)}, not {mode!r}")
        if mode == "vector" and self.embedder is None:
            raise InvalidInput("mode", "vector search needs an embedder (none is configured)")
        if self.reranker is None and self.rewriter is None:
            return self._ruled(user, namespace, query, k, where, mode, layered)[0]
        depth = max(RERANK_DEPTH, k) if self.reranker is not None else k
        queries = self._rewritten(query)
        if len(queries) == 1:
            hits, windows = self._ruled(user, namespace, query, depth, where, mode, layered)
        else:
            hits, windows = self._fused(user, namespace, queries, depth, where, mode, layered)
        if self.reranker is None:
            return hits[:k]
        return self._reranked(user, namespace, query, hits, k, windows=windows)

    def _ruled(
        self,
        user: str,
        namespace: str,
        query: str,
        k: int,
        where: MemoryFilter | None,
        mode: Mode,
        layered: bool,
    ) -> tuple[list[Hit], bool]:
        """The hits the rules rank (no model but the embedder), and whether they are turns
        of a layered conversation."""
        if layered and mode != "vector" and (where is None or where == MemoryFilter()):
            recalled = self._layered(user, namespace, query, k, vectors=mode == "hybrid")
            if recalled is not None:
                return recalled, True
        depth = max(POOL, k)
        lists: dict[str, list[str]] = {}
        if mode in ("hybrid", "keyword"):
            found = self.memories.search_words(
                user, namespace, query_terms(query), k=depth, where=where
            )
            lists["keyword"] = [i for i, _ in found]
            if where is None or where == MemoryFilter():  # a fact's item may not pass a filter
                cited = self._cited_by_facts(user, namespace, query_terms(query))
                if cited:
                    lists["fact"] = list(dict.fromkeys(cited))
        if mode in ("hybrid", "vector") and self.embedder is not None:
            lists["vector"] = self._nearest(user, namespace, query, depth, where)
        # Chinese keyword lists are bigrams, noisier than words: trusted like vectors, not 2:1
        keyword = VECTOR_WEIGHT if mostly_cjk(query) else KEYWORD_WEIGHT
        weights = {"keyword": keyword, "vector": VECTOR_WEIGHT, "fact": VECTOR_WEIGHT}
        fused = fuse(lists, weights)[:k]
        items = {
            i.id: i for i in self.memories.get_memories(user, namespace, [i for i, _ in fused])
        }
        hits = [
            Hit(items[i], score, {m: ids.index(i) + 1 for m, ids in lists.items() if i in ids})
            for i, score in fused
            if i in items
        ]
        return hits, False

    # -- models: query rewriting and reranking -------------------------------------------
    def _rewritten(self, query: str) -> list[str]:
        """The rewriter's queries, ``query`` first, each once and each a valid query."""
        if self.rewriter is None:
            return [query]
        from .rewrite import distinct

        try:
            asked = self.rewriter.rewrite(query)
        except Exception as exc:  # a rewriter of one's own that raises: search all the same
            log.warning("query rewrite failed; searching the question as it is: %s", exc)
            return [query]
        queries = [query]
        for sub in asked if isinstance(asked, list) else []:
            try:
                if isinstance(sub, str) and sub.strip():
                    queries.append(inputs.text(sub, "query"))
            except InvalidInput:
                continue
        return distinct(queries)

    def _fused(
        self,
        user: str,
        namespace: str,
        queries: Sequence[str],
        k: int,
        where: MemoryFilter | None,
        mode: Mode,
        layered: bool,
    ) -> tuple[list[Hit], bool]:
        """Each query searched by the rules, the lists fused by reciprocal rank (weight 1
        each); a hit keeps its ranks of the first query that found it."""
        depth = max(RERANK_DEPTH, k)
        found: dict[str, Hit] = {}
        lists: dict[str, list[str]] = {}
        windows = False
        for n, sub in enumerate(queries):
            hits, windows = self._ruled(user, namespace, sub, depth, where, mode, layered)
            lists[f"query{n}"] = [h.item.id for h in hits]
            for hit in hits:
                found.setdefault(hit.item.id, hit)
        fused = fuse(lists, {})[:k]
        return [
            Hit(found[i].item, score, {**found[i].ranks, "rewrite": r})
            for r, (i, score) in enumerate(fused, start=1)
        ], windows

    def _reranked(
        self, user: str, namespace: str, query: str, hits: list[Hit], k: int, *, windows: bool
    ) -> list[Hit]:
        """``hits`` ordered again with the reranker (see :meth:`search`); on its failure
        the first ``k`` as they are."""
        assert self.reranker is not None
        pool = hits[: max(RERANK_DEPTH, k)]
        if not pool:
            return []
        texts = [h.item.text for h in pool]
        if windows:
            from . import recall

            ids = [h.item.id for h in pool]
            around = {
                w.id: w.text
                for w in self.memories.get_memories(user, namespace + recall.WINDOW, ids)
            }
            texts = [around.get(h.item.id, h.item.text) for h in pool]
        try:
            scores = self.reranker.rerank(query, texts)
            if len(scores) != len(pool) or not all(
                isinstance(s, int | float) and math.isfinite(s) for s in scores
            ):
                raise ValueError(f"{len(scores)} scores for {len(pool)} texts, or not numbers")
        except Exception as exc:
            log.warning(
                "rerank (%s) failed; the hits keep their rule order: %s",
                getattr(self.reranker, "name", type(self.reranker).__name__),
                exc,
            )
            return hits[:k]
        order = sorted(range(len(pool)), key=lambda n: -scores[n])
        rank = {pool[n].item.id: r for r, n in enumerate(order, start=1)}
        lists = {
            "rules": [h.item.id for h in pool],
            "rerank": [pool[n].item.id for n in order],
        }
        by_id = {h.item.id: h for h in pool}
        return [
            Hit(by_id[i].item, score, {**by_id[i].ranks, "rerank": rank[i]})
            for i, score in fuse(lists, RERANK_WEIGHTS)[:k]
        ]

    # -- conversations: recall with windows and sessions --------------------------------
    def build_layers(
        self, scope: Scope, namespace: str, *, progress: Callable[[int], None] | None = None
    ) -> int:
        """Derive the windows, voices and sessions of the namespace's conversation (its
        items with ``metadata["session"]``) into ``NAMESPACE~window``, ``NAMESPACE~voice``
        and ``NAMESPACE~session``; from then on, search there uses them
        (:mod:`relaystate.memory.recall`). Run it again after adding turns: only sessions
        whose turns changed since are made again (each session document keeps the digest
        of what it was made from), and the turns are read from what this process already
        follows of the namespace (:mod:`.following`), not again from the store. Returns
        how many documents were written."""
        from . import recall

        user = owner(scope)
        inputs.identifier(namespace, "namespace")
        key, followed = self._caught_up(user, namespace)
        with self._locks[key]:
            items = followed.ordered()
        built = {
            str(doc.metadata.get("session", "")): str(doc.metadata.get("digest", ""))
            for doc in self.memories.latest_memories(user, namespace + recall.SESSION, limit=ALL)
        }
        return self._write(recall.derived(items, namespace, built=built), progress)

    def keep_facts(self, scope: Scope, namespace: str, facts: Sequence[MemoryItem]) -> int:
        """Keep fact documents (:func:`.extract.fact_items`) beside the namespace's items,
        in ``NAMESPACE~fact``: layered search then credits each matching fact to the turn
        it cites (its words may be none of the turn's: "adopted" for "we brought him home").
        Their ids come from the facts, so keeping them again replaces them."""
        from . import recall

        user = owner(scope)
        inputs.identifier(namespace, "namespace")
        kept = [
            dataclasses.replace(f, user_id=user, namespace=namespace + recall.FACT)
            for f in checked_items(scope, namespace, facts)
        ]
        return self._write(kept, None)

    def _write(self, items: Sequence[MemoryItem], progress: Callable[[int], None] | None) -> int:
        """Checked items, one transaction per ``BATCH``."""
        at = self.clock()
        for start in range(0, len(items), BATCH):
            part = items[start : start + BATCH]
            self.memories.put_memories(part, at=at)
            if progress is not None:
                progress(len(part))
        return len(items)

    def _layered(
        self, user: str, namespace: str, query: str, k: int, *, vectors: bool
    ) -> list[Hit] | None:
        """Layered recall, when the namespace has its layers built (else None)."""
        from . import recall

        asked = self._recall_inputs(user, namespace, query, vectors=vectors)
        if asked is None:
            return None
        conv, lists, query_vector, named, when = asked
        ranked = recall.rank(query, conv, lists, query_vector, named, when, k)
        wanted = [item_id for item_id, _, _ in ranked]
        items = {i.id: i for i in self.memories.get_memories(user, namespace, wanted)}
        return [Hit(items[i], score, found) for i, score, found in ranked if i in items]

    def _recall_inputs(
        self, user: str, namespace: str, query: str, *, vectors: bool
    ) -> (
        tuple[
            recall.Conversation,
            recall.Lists,
            np.ndarray | None,
            str | None,
            recall.DateAsked | None,
        ]
        | None
    ):
        """What :func:`.recall.rank` needs for ``query``: the conversation, the keyword
        lists, the query vector, the speaker and date it names (None without layers). Apart
        from the ranking so that benchmarks rank one question many ways
        (``bench/locomo_loo.py``)."""
        import numpy as np

        from . import recall
        from .answer_kind import members_mentioned
        from .lexicon import Lexicon

        conv = self._conversation(user, namespace)
        if conv is None:
            return None
        terms, named, when = recall.plan(query, conv)
        found = {
            layer: [i for i, _ in self.memories.search_words(user, ns, terms, k=recall.DEPTH)]
            for layer, ns in (
                ("turns", namespace),
                ("windows", namespace + recall.WINDOW),
                ("sessions", namespace + recall.SESSION),
                ("voices", namespace + recall.VOICE),
            )
        }
        members = members_mentioned(query, conv.forms, Lexicon.find(), conv.speakers)
        lists = recall.Lists(
            found["turns"],
            found["windows"],
            [i.removeprefix("session:") for i in found["sessions"]],
            found["voices"],
            [i for i, _ in self.memories.search_words(user, namespace, members, k=recall.DEPTH)],
            self._cited_by_facts(user, namespace, terms),
        )
        query_vector = None
        if vectors and self.embedder is not None and conv.vectors is not None:
            embedded = self.embedder.embed([query], kind="query")[0]
            query_vector = np.asarray(embedded, dtype=np.float32)
        return conv, lists, query_vector, named, when

    def _cited_by_facts(self, user: str, namespace: str, terms: Sequence[str]) -> list[str]:
        """The turns cited by the facts that match ``terms``, best fact first (none unless
        facts were kept: :meth:`keep_facts`)."""
        from . import recall

        hits = self.memories.search_words(user, namespace + recall.FACT, terms, k=recall.DEPTH)
        if not hits:
            return []
        facts = self.memories.get_memories(user, namespace + recall.FACT, [i for i, _ in hits])
        return [cited for fact in facts for cited in fact.cites]

    def _conversation(self, user: str, namespace: str) -> recall.Conversation | None:
        """The namespace's conversation (turn order, sessions, speakers, vectors), kept up
        to date from the store's changes (:mod:`.following`); None without layers."""
        from . import recall

        if not self.memories.memory_generation(user, namespace + recall.SESSION):
            return None
        key, followed = self._caught_up(user, namespace)
        with self._locks[key]:
            if followed.conversation is None:
                followed.conversation = followed.built()
            return followed.conversation

    def _caught_up(self, user: str, namespace: str) -> tuple[tuple[str, str, str], Followed]:
        """The namespace as this process follows it, caught up with the store: read in full
        the first time, then by its changes. One catch-up at a time per namespace (they
        change its arrays); other namespaces do not wait."""
        from .following import Followed

        key = (user, namespace, self.embedder.name if self.embedder is not None else "")
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            followed = self._followed.get(key)
            if followed is None:
                followed = Followed.read(self.memories, user, namespace, key[2])
                with self._lock:
                    self._followed[key] = followed
                    while len(self._followed) > FOLLOWED:
                        del self._followed[next(iter(self._followed))]
            else:
                with self._lock:  # the most recently read are kept longest
                    self._followed[key] = self._followed.pop(key, followed)
                followed.catch_up(self.memories, user, namespace)
        return key, followed

    def _nearest(
        self, user: str, namespace: str, query: str, k: int, where: MemoryFilter | None
    ) -> list[str]:
        import numpy as np

        assert self.embedder is not None
        q = np.asarray(self.embedder.embed([query], kind="query")[0], dtype=np.float32)
        if where is not None and where != MemoryFilter():
            ids, matrix = _matrix(
                self.memories.load_vectors(user, namespace, self.embedder.name, where)
            )
            if not ids:
                return []
            top = np.argsort(-(matrix @ q), kind="stable")[:k]
            return [ids[int(i)] for i in top]
        key, followed = self._caught_up(user, namespace)
        with self._locks[key]:  # a view of the rows as they are now (later rows go beyond it)
            rows = followed.vectors
            ids, matrix, alive = rows.ids, rows.matrix, rows.alive
            dead = None if alive.all() else ~alive
        if not len(matrix):
            return []
        scores = matrix @ q
        if dead is not None:  # items that lost their vector (replaced, not embedded yet)
            scores[dead] = -np.inf
        best = [int(i) for i in np.argsort(-scores, kind="stable")[:k]]
        return [ids[i] for i in best if dead is None or not dead[i]]


def fuse(lists: dict[str, list[str]], weights: dict[str, float]) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each list adds weight / (RRF_K + rank) to its ids; ties keep
    the order of the first list that has them."""
    scores: dict[str, float] = {}
    for method, ids in lists.items():
        weight = weights.get(method, 1.0)
        for rank, item_id in enumerate(ids, start=1):
            scores[item_id] = scores.get(item_id, 0.0) + weight / (RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])


def owner(scope: Scope) -> str:
    """Whose memory a call reaches: the user of a user scope (admin scopes are refused:
    memory is personal; an operator acts as the user)."""
    checked(scope)
    if scope.is_admin or scope.user_id is None:
        raise InvalidInput("scope", "long-term memory is a user's: call it with a user scope")
    return scope.user_id


def checked_items(scope: Scope, namespace: str, items: Sequence[MemoryItem]) -> list[MemoryItem]:
    """The items as they will be stored (the scope's user and the namespace on each), every
    one checked; InvalidInput names the first bad one. Needs no store."""
    user = owner(scope)
    inputs.identifier(namespace, "namespace")
    return [_checked(item, user, namespace, i) for i, item in enumerate(items)]


def _checked(item: MemoryItem, user: str, namespace: str, at: int) -> MemoryItem:
    if not isinstance(item, MemoryItem):
        raise InvalidInput(f"items[{at}]", f"must be a MemoryItem, not {type(item).__name__}")
    where = f"items[{at}]"
    inputs.identifier(item.id, f"{where}.id")
    inputs.text(item.text, f"{where}.text")
    if not item.text.strip():
        raise InvalidInput(f"{where}.text", "must not be empty")
    for name in ("source", "task_id"):
        value = getattr(item, name)
        if value is not None:
            inputs.identifier(value, f"{where}.{name}")
    for cited in item.cites:
        inputs.identifier(cited, f"{where}.cites")
    inputs.json_value(item.metadata, f"{where}.metadata")
    if not isinstance(item.metadata, dict):
        raise InvalidInput(f"{where}.metadata", "must be an object")
    time = inputs.moment(item.time, f"{where}.time") if item.time is not None else None
    return MemoryItem(
        id=item.id,
        user_id=user,
        namespace=namespace,
        text=item.text,
        time=time,
        source=item.source,
        task_id=item.task_id,
        metadata=item.metadata,
        cites=tuple(item.cites),
    )


def vector_blob(vector: Sequence[float]) -> bytes:
    """A vector as stored: little-endian float32."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def _matrix(rows: list[tuple[str, bytes]]) -> tuple[list[str], np.ndarray]:
    import numpy as np

    if not rows:
        return [], np.zeros((0, 0), dtype=np.float32)
    ids = [i for i, _ in rows]
    matrix = np.frombuffer(b"".join(b for _, b in rows), dtype="<f4").reshape(len(rows), -1)
    return ids, matrix
