"""What a committed turn leaves in memory, and the memory layers one runtime uses.

After each turn (its commit done): the user's words and the reply become long-term items of
the ``conversation`` namespace (their task, session and time on them); the task's slots
become its key entities (a changed value closes the old one); and once a task has more than
``recent`` turns, the older ones are summarised in chunks that cite them. All of it is
derived from committed turns, so it is written after the commit, and a failure to write it
is logged, not raised: the turn happened either way, and the next turn catches up (entities
are compared with the task, summaries with what they already cover).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..errors import RelaystateError
from ..model import MemoryItem, Message, Task
from ..scope import Scope
from .embed import Embedder
from .graph import MemoryGraph
from .longterm import LongTermMemory
from .summarize import Said
from .working import TaskMemory

if TYPE_CHECKING:
    from ..conversation.engine import Turn
    from ..llm import Model
    from ..runtime.runtime import Runtime

log = logging.getLogger("relaystate.memory")

CONVERSATION = "conversation"
"""The long-term namespace every turn is kept in."""
RECENT = 8
"""Turns of a task kept verbatim; older ones are summarised."""
CHUNK = 6
"""Turns one summary covers."""


def turn_id(message: Message) -> str:
    """A turn's id in memory and in citations: its session and message number."""
    return f"{message.session_id}:{message.id}"


@dataclass
class MemoryLayers:
    """Long-term memory, working memory and the graph of one store (None where the store
    keeps no such role)."""

    longterm: LongTermMemory | None
    tasks: TaskMemory | None
    graph: MemoryGraph | None

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


class Recorder:
    """The conversation's :class:`~relaystate.conversation.engine.TurnRecorder`."""

    def __init__(
        self,
        layers: MemoryLayers,
        *,
        clock: Callable[[], datetime],
        recent: int = RECENT,
        chunk: int = CHUNK,
    ) -> None:
        self.layers, self.clock = layers, clock
        self.recent, self.chunk = recent, chunk

    def record(self, scope: Scope, turn: Turn) -> None:
        try:
            self._record(scope, turn)
        except RelaystateError as exc:  # the turn is committed; memory catches up next turn
            log.warning("turn in session %s not recorded in memory: %s", turn.session_id, exc)
        except Exception:  # a bug: its traceback in the log, the committed turn still answered
            log.exception("turn in session %s not recorded in memory", turn.session_id)

    def _record(self, scope: Scope, turn: Turn) -> None:
        task = turn.state.task if turn.state is not None else None
        said = [m for m in turn.messages if m.id is not None]
        if self.layers.longterm is not None and said:
            items = [
                MemoryItem(
                    turn_id(m),
                    m.user_id,
                    CONVERSATION,
                    m.text,
                    m.created_at,
                    "turn",
                    m.task_id or (task.id if task else None),
                    {"session": m.session_id, "role": m.role, "message": m.id},
                )
                for m in said
            ]
            self.layers.longterm.add(scope, CONVERSATION, items)
        if task is None or self.layers.tasks is None:
            return
        source = turn_id(said[0]) if said else None
        self.layers.tasks.observe(task, source=source)  # also the task's edges in the graph
        self._summarise(task)

    def _summarise(self, task: Task) -> None:
        """Summarise the task's turns older than the latest ``recent`` that no summary
        covers yet, ``chunk`` at a time."""
        assert self.layers.tasks is not None
        window = self.layers.task_turns(task, limit=self.recent + 4 * self.chunk)
        older = window[: max(0, len(window) - self.recent)]
        covered = self.layers.tasks.covered(task)
        fresh = [i for i in older if i.id not in covered]
        while len(fresh) >= self.chunk:
            part, fresh = fresh[: self.chunk], fresh[self.chunk :]
            self.layers.tasks.summarize(task, [_said(i) for i in part])


def _said(item: MemoryItem) -> Said:
    role = str(item.metadata.get("role", "user"))
    return Said(item.id, "user" if role == "user" else "agent", item.text)
