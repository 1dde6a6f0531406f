"""What memory keeps of a committed turn, made by the store that commits it.

A turn's words and reply become long-term items of the ``conversation`` namespace, and the
task's slots its key entities (facts about ``task:<id>``). Both are written in the turn's
own transaction (invariant 2 of the design notes: one turn, one write), so memory can never
miss a turn that happened nor hold one that did not; only their vectors follow, made by a
background pass, since they are derived and an embedder is slow. A backend that cannot
write them in its commit (a user's own) gets them written right after, by
:class:`~relaystate.store.bundle.Stores`, from the same functions here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..model import Fact, MemoryItem, Message, Task

CONVERSATION = "conversation"
"""The long-term namespace every turn is kept in."""
TURN = "turn"
"""The ``source`` of a memory item that is a turn."""


@dataclass(frozen=True)
class InlineVectors:
    """Vectors made inside the commit, by an embedder cheap enough to wait for (feature
    hashing: about 0.1 ms a text): no second transaction, no background pass. ``make``
    turns texts into float32 blobs of ``embedder``."""

    embedder: str
    make: Callable[[Sequence[str]], list[bytes]]


@dataclass(frozen=True)
class Remember:
    """Asks a commit to keep its turn in memory: each message as an item of ``namespace``
    (id ``<session>:<message>``), and the task's slots as its key entities; with
    ``vectors``, the items' vectors too."""

    namespace: str = CONVERSATION
    vectors: InlineVectors | None = None


def turn_id(message: Message) -> str:
    """A turn's id in memory and in citations: its session and message number."""
    return f"{message.session_id}:{message.id}"


def subject(task_id: str) -> str:
    """The graph node of a task: its facts are its key entities."""
    return f"task:{task_id}"


def turn_items(
    messages: Iterable[Message], namespace: str, task_id: str | None
) -> list[MemoryItem]:
    """The long-term items of numbered messages (``task_id``: for those that name none)."""
    return [
        MemoryItem(
            turn_id(m),
            m.user_id,
            namespace,
            m.text,
            m.created_at,
            TURN,
            m.task_id or task_id,
            {"session": m.session_id, "role": m.role, "message": m.id},
        )
        for m in messages
        if m.id is not None
    ]


def slot_facts(task: Task, *, at: datetime, source: str | None) -> list[Fact]:
    """Every slot of the task as a fact to record against what memory holds: an equal
    value changes nothing, a new one closes the old, None closes without a new one."""
    about = subject(task.id)
    return [
        Fact(task.user_id, about, name, value, at, None, source, task.id)
        for name, value in sorted(task.slots.items())
    ]


@dataclass(frozen=True)
class TurnRows:
    """What memory keeps of one commit: its items, their vectors (an embedder's name and
    one blob per item) when the commit makes them, and the task's facts."""

    items: list[MemoryItem]
    vectors: tuple[str, list[bytes]] | None
    facts: list[Fact]


def turn_rows(
    remember: Remember, messages: Sequence[Message], task: Task | None, at: datetime | None
) -> TurnRows:
    """The rows of a commit's numbered ``messages`` and ``task`` (as the commit left it, at
    ``at``; no task or no time: no facts), whoever writes them: a store inside its commit,
    or the bundle right after it."""
    items = turn_items(messages, remember.namespace, task.id if task else None)
    made = remember.vectors
    vectors = (made.embedder, made.make([i.text for i in items])) if made and items else None
    facts = (
        slot_facts(task, at=at, source=first_turn(messages))
        if task is not None and at is not None
        else []
    )
    return TurnRows(items, vectors, facts)


def first_turn(messages: Sequence[Message]) -> str | None:
    """The turn id facts cite as their source: the commit's first numbered message."""
    numbered = [m for m in messages if m.id is not None]
    return turn_id(numbered[0]) if numbered else None
