"""What a committed turn leaves in memory, and the memory layers one runtime uses.

A turn's words and reply become long-term items of the ``conversation`` namespace (their
task, session and time on them) and the task's slots its key entities (a changed value
closes the old one), in the turn's own commit (:mod:`relaystate.store.turn_memory`): a
:class:`Recorder` given to the conversation asks for that. What is derived from those rows
follows later, when something needs it: vectors by a background pass (the server's), and
the summaries of a task's turns older than the latest ``recent`` when its context is built
(:meth:`MemoryLayers.catch_up`), so a turn reads none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import RelaystateError
from ..model import MemoryItem, Task
from ..scope import Scope
from ..store.bundle import DAMAGED
from ..store.turn_memory import CONVERSATION, InlineVectors, Remember, turn_id, turn_rows
from .embed import Embedder
from .graph import MemoryGraph
from .longterm import LongTermMemory, vector_blob
from .summarize import Said
from .working import TaskMemory

if TYPE_CHECKING:
    from ..conversation.engine import Turn
    from ..llm import Model
    from ..runtime.runtime import Runtime

log = logging.getLogger("relaystate.memory")

__all__ = ["CHUNK", "CONVERSATION", "RECENT", "MemoryLayers", "Recorder", "turn_id"]

RECENT = 8
"""Turns of a task kept verbatim; older ones are summarised."""
CHUNK = 6
"""Turns one summary covers."""


@dataclass
class MemoryLayers:
    """Long-term memory, working memory and the graph of one store (None where the store
    keeps no such role)."""

    longterm: LongTermMemory | None
    tasks: TaskMemory | None
    graph: MemoryGraph | None
    recent: int = RECENT
    """Turns of a task kept verbatim; older ones are summarised."""
    chunk: int = CHUNK
    """Turns one summary covers."""

    @classmethod
    def of(
        cls, runtime: Runtime, *, embedder: Embedder | None = None, model: Model | None = None
    ) -> MemoryLayers:
        """The layers over ``runtime``'s store; ``model`` writes abstractive summaries."""
        stores, clock = runtime.stores, runtime.clock
        return cls(
            None
            if stores.memories is None
            else LongTermMemory(stores.memories, clock=clock, embedder=embedder),
            None
            if stores.working is None
            else TaskMemory(stores.working, clock=clock, model=model),
            None if stores.working is None else MemoryGraph(stores.working, clock=clock),
        )

    def task_turns(self, task: Task, *, limit: int) -> list[MemoryItem]:
        """The task's latest turns, oldest first (from every session it was talked about in)."""
        if self.longterm is None:
            return []
        return self.longterm.memories.latest_memories(
            task.user_id, CONVERSATION, task_id=task.id, limit=limit
        )

    def catch_up(self, task: Task) -> int:
        """Summarise the task's turns older than the latest ``recent`` that no summary covers
        yet, ``chunk`` at a time, oldest first; how many summaries were written. Asked when
        the task's context is built: the turns themselves never wait for it. Reads back
        until it reaches covered turns, so a long stretch without context is caught up too."""
        if self.tasks is None or self.longterm is None:
            return 0
        covered = self.tasks.covered(task)
        limit = self.recent + 4 * self.chunk
        while True:
            window = self.task_turns(task, limit=limit)
            older = window[: max(0, len(window) - self.recent)]
            if len(window) < limit or (older and older[0].id in covered):
                break
            limit *= 4
        fresh = [i for i in older if i.id not in covered]
        written = 0
        while len(fresh) >= self.chunk:
            part, fresh = fresh[: self.chunk], fresh[self.chunk :]
            if self.tasks.summarize(task, [_said(i) for i in part]) is not None:
                written += 1
        return written


class Recorder:
    """The conversation's :class:`~relaystate.conversation.engine.TurnRecorder`: its
    ``remember`` rides in every turn's commit. :meth:`record` keeps a turn committed
    elsewhere (an import, a benchmark's synthetic conversation) the same way, after the
    fact."""

    def __init__(
        self,
        layers: MemoryLayers,
        *,
        clock: Callable[[], datetime],
        recent: int = RECENT,
        chunk: int = CHUNK,
    ) -> None:
        self.layers, self.clock = layers, clock
        layers.recent, layers.chunk = recent, chunk
        embedder = layers.longterm.embedder if layers.longterm is not None else None
        self.remember = Remember(CONVERSATION, _inline(embedder))
        """What each turn's commit keeps in memory: with an embedder that says it is cheap
        (``inline``, as feature hashing is), the items' vectors too; with a slow one (a
        model), those follow from a background pass."""

    def record(self, scope: Scope, turn: Turn) -> None:
        """Keep a committed turn in memory (its numbered messages; the task as it left
        it); errors are logged, not raised: the turn happened either way. A damaged store
        is raised: nothing later catches up on it, and every command that reads it fails."""
        try:
            self._record(scope, turn)
        except DAMAGED:
            raise
        except RelaystateError as exc:
            log.warning("turn in session %s not recorded in memory: %s", turn.session_id, exc)

    def _record(self, scope: Scope, turn: Turn) -> None:
        task = turn.state.task if turn.state is not None else None
        rows = turn_rows(Remember(CONVERSATION), turn.messages, task, self.clock())
        if self.layers.longterm is not None and rows.items:
            self.layers.longterm.add(scope, CONVERSATION, rows.items)
        if rows.facts and self.layers.tasks is not None:
            self.layers.tasks.working.record_facts(rows.facts)


def _inline(embedder: Embedder | None) -> InlineVectors | None:
    if embedder is None or not getattr(embedder, "inline", False):
        return None

    def make(texts: Sequence[str]) -> list[bytes]:
        return [vector_blob(v) for v in embedder.embed(list(texts), kind="document")]

    return InlineVectors(embedder.name, make)


def _said(item: MemoryItem) -> Said:
    role = str(item.metadata.get("role", "user"))
    return Said(item.id, "user" if role == "user" else "agent", item.text)
