"""A namespace as this process last read it, kept up to date from the store's change feed.

Layered recall needs the whole conversation in memory (turn order, sessions, speakers, a
vector per turn, context vectors, session centroids), and vector search needs every vector
of the namespace. Both were read again in full after any write: in a conversation that
grows by a turn, that was the whole namespace per turn (1.2-2 s at 11,000 items). Here a
:class:`Followed` namespace is read in full once; after that, each search asks the store
what changed since the generation it holds (:meth:`~relaystate.store.roles.Memories.
memory_changes`) and applies only that:

- new turns at the end of the conversation (the last session, or a new later one) are
  appended: a few rows of each array, the context rows around them and their session's
  centroid (:func:`extended`);
- a vector that arrives for a turn (the embedder runs after the commit) replaces its row,
  the context rows around it and its session's centroid (:func:`revectored`);
- anything else (a turn replaced with other words, a turn added to an earlier session) is
  rebuilt from the items held in memory, still without reading the namespace again.

Arrays grow in place with room to spare (:class:`Rows`), so appending a row copies nothing
but the row; an object a search already holds is never changed in a way that breaks it
(appended rows lie beyond its views; a replaced vector is at most a fresher score).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..model import MemoryItem
from ..store.roles import Memories
from . import recall
from .recall import Conversation

ALL = 10_000_000
"""As many items as a namespace may hold, for reads of all of them."""


class Rows:
    """A float32 matrix that grows by rows with room to spare, addressed by id; rows that
    were dropped stay as tombstones (``alive`` False) until more than half are."""

    def __init__(self, dim: int = 0) -> None:
        self.dim = dim
        self._buf = np.zeros((0, dim), dtype=np.float32)
        self.ids: list[str] = []
        self.at: dict[str, int] = {}
        self._alive = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def matrix(self) -> np.ndarray:
        """The used rows (a view: rows appended later are not in it)."""
        return self._buf[: len(self.ids)]

    @property
    def alive(self) -> np.ndarray:
        return self._alive[: len(self.ids)]

    def put(self, item_id: str, vector: np.ndarray) -> None:
        """Set an id's row (a new id: a new row at the end)."""
        if not self.dim:
            self.dim = int(vector.shape[0])
            self._buf = np.zeros((0, self.dim), dtype=np.float32)
        at = self.at.get(item_id)
        if at is None:
            at = len(self.ids)
            self._room(at + 1)
            self.ids.append(item_id)
            self.at[item_id] = at
        self._buf[at] = vector
        self._alive[at] = True

    def drop(self, item_id: str) -> None:
        at = self.at.pop(item_id, None)
        if at is None:
            return
        self._alive[at] = False
        self._buf[at] = 0
        if len(self.at) * 2 < len(self.ids):
            self._compact()

    def _room(self, rows: int) -> None:
        if rows <= self._buf.shape[0]:
            return
        size = max(rows, 2 * self._buf.shape[0], 64)
        buf = np.zeros((size, self.dim), dtype=np.float32)
        buf[: len(self.ids)] = self._buf[: len(self.ids)]
        alive = np.zeros(size, dtype=bool)
        alive[: len(self.ids)] = self._alive[: len(self.ids)]
        self._buf, self._alive = buf, alive

    def _compact(self) -> None:
        keep = [i for i in self.ids if i in self.at]
        rows = self._buf[[self.at[i] for i in keep]]
        size = max(64, 2 * len(keep))
        self._buf = np.zeros((size, self.dim), dtype=np.float32)
        self._buf[: len(keep)] = rows
        self._alive = np.zeros(size, dtype=bool)
        self._alive[: len(keep)] = True
        self.ids, self.at = keep, {i: n for n, i in enumerate(keep)}


@dataclass
class Followed:
    """One namespace (of one user, with one embedder's vectors) as last read."""

    generation: int
    items: dict[str, MemoryItem]
    """Every item, in the order written (a changed item moves to the end); the store's
    order (by time, then as written) is this sorted by time (:meth:`ordered`)."""
    vectors: Rows
    conversation: Conversation | None = None
    """Made on the first layered search, then kept up to date."""
    embedder: str = ""
    latest: float = -math.inf
    """The newest item's time (POSIX; none: -inf): a new item dated before it goes in
    between, not at the end."""

    @classmethod
    def read(cls, memories: Memories, user: str, namespace: str, embedder: str) -> Followed:
        """The namespace in full: its generation first, so that nothing written meanwhile
        is missed (it comes again with the next changes, and is applied by id)."""
        generation = memories.memory_generation(user, namespace)
        items = memories.latest_memories(user, namespace, limit=ALL)
        rows = Rows()
        if embedder:
            for item_id, blob in memories.load_vectors(user, namespace, embedder):
                rows.put(item_id, np.frombuffer(blob, dtype="<f4"))
        latest = max((_when(i) for i in items), default=-math.inf)
        return cls(generation, {i.id: i for i in items}, rows, embedder=embedder, latest=latest)

    def catch_up(self, memories: Memories, user: str, namespace: str) -> bool:
        """Apply what changed since :attr:`generation`; whether anything did."""
        changes = memories.memory_changes(
            user, namespace, self.generation, embedder=self.embedder or None
        )
        if changes.generation == self.generation:
            return False
        added: list[MemoryItem] = []
        revectored: dict[str, np.ndarray] = {}
        rebuild = False
        for item in changes.items:
            old = self.items.get(item.id)
            blob = changes.vectors.get(item.id)
            vector = None if blob is None else np.frombuffer(blob, dtype="<f4")
            if old is None:
                added.append(item)
            elif _same(old, item):
                if vector is not None:
                    revectored[item.id] = vector
            else:
                rebuild = True
                del self.items[item.id]
            self.items[item.id] = item
            if vector is not None:
                self.vectors.put(item.id, vector)
            elif old is not None and not _same(old, item):
                self.vectors.drop(item.id)  # a replaced item loses its vector
        if any(_when(i) < self.latest for i in added):
            rebuild = True  # an item dated before the newest: it goes in between, not at the end
        self.latest = max([self.latest, *(_when(i) for i in changes.items)])
        self.generation = changes.generation
        if self.conversation is not None:
            conv: Conversation | None = None
            if not rebuild:
                conv = extended(self.conversation, added, self.vectors)
            if conv is not None and revectored:
                conv = revectored_conversation(conv, revectored)
            self.conversation = conv if conv is not None else self.built()
        return True

    def built(self) -> Conversation:
        """The conversation made from the items and vectors held (no store read)."""
        return with_rows(Conversation.of(self.ordered()), self.vectors)

    def ordered(self) -> list[MemoryItem]:
        """The items in the store's order: by time (none first), then as written."""
        return sorted(self.items.values(), key=_when)


def _when(item: MemoryItem) -> float:
    return item.time.timestamp() if item.time is not None else -math.inf


def _same(old: MemoryItem, new: MemoryItem) -> bool:
    """The same turn for recall (its vector may be new)."""
    return (old.text, old.metadata, old.time) == (new.text, new.metadata, new.time)


def with_rows(conv: Conversation, rows: Rows) -> Conversation:
    """``conv`` with its turns' vectors (zero for a turn that has none yet: found by its
    words, never by a vector), context vectors and session centroids, in growable buffers;
    unchanged if no turn has a vector."""
    if not conv.ids or not rows.dim or not any(i in rows.at for i in conv.ids):
        return conv
    n, dim = len(conv.ids), rows.dim
    at = np.fromiter((rows.at.get(i, -1) for i in conv.ids), dtype=np.int64, count=n)
    have = at >= 0
    vbuf = _buffer(n, dim)
    v = vbuf[:n]
    v[have] = rows.matrix[at[have]]
    same = conv.session_of[1:] == conv.session_of[:-1]  # turn p and p + 1 share a session
    cbuf = _buffer(n, dim)
    context = cbuf[:n]
    context[:] = v
    context[1:] += 0.5 * v[:-1] * same[:, None]
    context[:-1] += 0.5 * v[1:] * same[:, None]
    norms = np.linalg.norm(context, axis=1, keepdims=True)
    context /= np.where(norms == 0, 1, norms)
    sums = np.zeros((len(conv.sessions), dim), dtype=np.float32)
    starts = np.flatnonzero(np.r_[True, conv.session_of[1:] != conv.session_of[:-1]])
    sums[conv.session_of[starts]] = np.add.reduceat(v, starts, axis=0)
    return dataclasses.replace(
        conv,
        vectors=v,
        context=context,
        centroids=_normalised(sums),
        _buffers=(vbuf, cbuf, sums),
    )


def extended(conv: Conversation, added: Sequence[MemoryItem], rows: Rows) -> Conversation | None:
    """``conv`` with new turns appended, if they all belong at its end (the last session or
    a new one that starts no earlier); None if it must be rebuilt."""
    turns = [i for i in added if recall.is_conversation(i)]
    if not turns:
        return conv
    if conv.vectors is None and any(i.id in rows.at for i in turns):
        return None  # the first vectors: made for every turn at once
    sessions = {key: n for n, key in enumerate(conv.sessions)}
    last = conv.sessions[-1] if conv.sessions else None
    starts = list(conv.session_starts)
    days = list(conv.session_days)
    names = list(conv.sessions)
    for item in turns:
        key = recall.session_key(item)
        if key in sessions:
            if key != last:
                return None
            continue
        start = item.time.timestamp() if item.time else -math.inf
        if starts and start < starts[-1]:
            return None
        sessions[key] = len(names)
        names.append(key)
        starts.append(start)
        days.append(item.time.date() if item.time else None)
        last = key
    voices = dict(conv.voices)
    session_of = [sessions[recall.session_key(i)] for i in turns]
    voice_of = []
    for item in turns:
        voice = recall.voice_id(recall.session_key(item), recall.speaker(item))
        voice_of.append(voices.setdefault(voice, len(voices)))
    first = len(conv.ids)
    ids = [*conv.ids, *(i.id for i in turns)]
    position = dict(conv.position)
    position.update({i.id: first + n for n, i in enumerate(turns)})
    grown = dataclasses.replace(
        conv,
        ids=ids,
        position=position,
        session_of=np.concatenate([conv.session_of, np.array(session_of, dtype=np.int64)]),
        sessions=names,
        session_days=days,
        session_starts=starts,
        speakers=[*conv.speakers, *(recall.speaker(i) for i in turns)],
        is_time=np.concatenate(
            [conv.is_time, np.array([bool(recall.TIME_WORD.search(i.text)) for i in turns])]
        ),
        voice_of=np.concatenate([conv.voice_of, np.array(voice_of, dtype=np.int64)]),
        voices=voices,
        texts=[*conv.texts, *(i.text for i in turns)],
        _forms=None,
    )
    if conv.vectors is None or conv._buffers is None:
        return grown
    vbuf, cbuf, sums = conv._buffers
    n = len(ids)
    vbuf, cbuf = _grown(vbuf, n), _grown(cbuf, n)
    if sums.shape[0] < len(names):
        sums = np.vstack([sums, np.zeros((len(names) - sums.shape[0], sums.shape[1]), sums.dtype)])
    for p in range(first, n):
        at = rows.at.get(ids[p])
        vbuf[p] = rows.matrix[at] if at is not None else 0
        sums[grown.session_of[p]] += vbuf[p]
    _context_rows(grown.session_of, vbuf, cbuf, range(max(first - 1, 0), n))
    touched = sorted({int(s) for s in grown.session_of[max(first - 1, 0) :]})
    centroids = _centroids(conv.centroids, sums, touched)
    return dataclasses.replace(
        grown, vectors=vbuf[:n], context=cbuf[:n], centroids=centroids, _buffers=(vbuf, cbuf, sums)
    )


def revectored_conversation(
    conv: Conversation, found: dict[str, np.ndarray]
) -> Conversation | None:
    """``conv`` with new vectors for some of its turns; None if it must be rebuilt (it had
    no vectors yet)."""
    if conv.vectors is None or conv._buffers is None:
        return None
    vbuf, cbuf, sums = conv._buffers
    touched: set[int] = set()
    rows: set[int] = set()
    for item_id, vector in found.items():
        p = conv.position.get(item_id)
        if p is None:
            continue
        session = int(conv.session_of[p])
        sums[session] += vector - vbuf[p]
        vbuf[p] = vector
        touched.add(session)
        rows.update(q for q in (p - 1, p, p + 1) if 0 <= q < len(conv.ids))
    _context_rows(conv.session_of, vbuf, cbuf, sorted(rows))
    centroids = _centroids(conv.centroids, sums, sorted(touched))
    return dataclasses.replace(conv, centroids=centroids)


def _context_rows(
    session_of: np.ndarray, vbuf: np.ndarray, cbuf: np.ndarray, rows: Sequence[int] | range
) -> None:
    """Recompute context rows: the turn plus half of each neighbour in its session."""
    n = len(session_of)
    for p in rows:
        row = vbuf[p].copy()
        if p > 0 and session_of[p - 1] == session_of[p]:
            row += 0.5 * vbuf[p - 1]
        if p + 1 < n and session_of[p + 1] == session_of[p]:
            row += 0.5 * vbuf[p + 1]
        norm = float(np.linalg.norm(row))
        cbuf[p] = row / norm if norm else row


def _centroids(old: np.ndarray | None, sums: np.ndarray, touched: Sequence[int]) -> np.ndarray:
    """The normalised session sums: a new array (a search may hold the old one), with only
    the touched sessions computed again."""
    count = sums.shape[0]
    centroids = np.zeros((count, sums.shape[1]), dtype=np.float32)
    if old is not None:
        centroids[: old.shape[0]] = old
    for s in touched:
        norm = float(np.linalg.norm(sums[s]))
        centroids[s] = sums[s] / norm if norm else sums[s]
    return centroids


def _buffer(rows: int, dim: int) -> np.ndarray:
    return np.zeros((max(64, rows + rows // 2), dim), dtype=np.float32)


def _grown(buf: np.ndarray, rows: int) -> np.ndarray:
    """``buf`` if it has room for ``rows``, else a copy with half as much again to spare."""
    if rows <= buf.shape[0]:
        return buf
    bigger = np.zeros((rows + rows // 2, buf.shape[1]), dtype=np.float32)
    bigger[: buf.shape[0]] = buf
    return bigger


def _normalised(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.asarray(m / np.where(norms == 0, 1, norms), dtype=np.float32)
