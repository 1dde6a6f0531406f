"""The context of one task's next turn: candidates from every memory layer, cut to a token
budget by :func:`relaystate.memory.context.build`.

- task state (critical): goal, stage, status, what is filled and what is missing;
- key entities (critical): each current value, with the value it replaced (so a change
  reads as a change, and the old value is never shown as the current one);
- summaries of older turns (they cite the turns they cover), by overlap with the query;
- long-term hits: the user's conversation memory searched with the query;
- graph facts within two hops of what the query mentions;
- recent turns of the task, in order, the latest user turn critical.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..model import Fact, MemoryItem, TaskState
from ..scope import Scope
from ..store.terms import query_terms
from .context import Candidate, Context, build
from .graph import describe
from .recorder import CONVERSATION, RECENT, MemoryLayers
from .tokens import TokenCounter

LONGTERM_HITS = 10
TASK_SCORE = 3.0
ENTITY_SCORE = 2.0
DEFAULT_WINDOW = 8192
SUMMARY_CACHE = 256
"""Summaries whose words and cited turn ids are remembered: a task's live summaries are the
same from one turn to the next, and at 10,000 turns their words and the candidate ids of
the turns they cite (every older turn) took about a tenth of building its context. A task
has ~30 live summaries citing ~1 MB of ids at 10,000 turns, so this keeps a few MB."""


@dataclass(frozen=True)
class TaskContext:
    """The built context and the query it was built for."""

    query: str
    context: Context


def task_context(
    layers: MemoryLayers,
    state: TaskState,
    *,
    query: str | None = None,
    window: int | None = None,
    budget: int | None = None,
    recent: int = RECENT,
    counter: TokenCounter | None = None,
) -> TaskContext:
    """The context for ``state``'s task (read in scope by the caller), for ``query`` (by
    default the task's latest user turn), within ``budget`` tokens or 80% of ``window``."""
    task = state.task
    layers.catch_up(task)  # summaries are made when a context asks for them, not per turn
    turns = layers.task_turns(task, limit=recent)
    latest_user = next((t for t in reversed(turns) if t.metadata.get("role") == "user"), None)
    asked = query if query is not None else (latest_user.text if latest_user else task.goal)
    # among the critical items, the task state ranks first and its entities next: a budget
    # too small for all of them keeps those
    candidates = [Candidate("task:state", "task", _state_line(state), TASK_SCORE, critical=True)]
    if layers.tasks is not None:
        for fact in _entities(layers, state):
            candidates.append(_entity(layers, state, fact))
        words = set(query_terms(asked))
        for s in layers.tasks.summaries(task):
            overlap = len(words & _words(s.text)) if words else 0
            candidates.append(
                Candidate(
                    f"summary:{s.id}", "summary", s.text, 1.0 + overlap, cites=_turns(s.cites)
                )
            )
    if layers.longterm is not None and asked.strip():
        for rank, hit in enumerate(
            layers.longterm.search(
                _owner(state), CONVERSATION, asked, k=LONGTERM_HITS, mode="keyword", layered=False
            )
        ):
            candidates.append(
                Candidate(f"turn:{hit.item.id}", "longterm", _said(hit.item), 1.0 / (1 + rank))
            )
    if layers.graph is not None and asked.strip():
        own = f"task:{task.id}"
        for reached in layers.graph.around(task.user_id, asked):
            if reached.fact.subject != own:
                candidates.append(
                    Candidate(
                        f"graph:{reached.fact.seq}",
                        "graph",
                        describe(reached.fact),
                        1.0 / reached.hops,
                    )
                )
    for order, item in enumerate(turns):
        candidates.append(
            Candidate(
                f"turn:{item.id}",
                "recent",
                _said(item),
                1.0,
                critical=item is latest_user,
                time=float(order),
            )
        )
    if budget is None and window is None:
        window = DEFAULT_WINDOW
    return TaskContext(asked, build(candidates, window=window, budget=budget, counter=counter))


def _owner(state: TaskState) -> Scope:
    return Scope.user(state.task.user_id)


def _state_line(state: TaskState) -> str:
    task = state.task
    filled = ", ".join(f"{k}={v}" for k, v in sorted(task.slots.items()) if v is not None)
    missing = ", ".join(task.missing_slots) or "nothing"
    what = task.goal or task.type
    status = f"{task.status}" + (f" ({task.status_text})" if task.status_text else "")
    return (
        f"{what}: stage {task.stage}, {status}; filled: {filled or 'nothing'}; missing: {missing}"
    )


def _entities(layers: MemoryLayers, state: TaskState) -> list[Fact]:
    assert layers.tasks is not None
    history = layers.tasks.history(state.task)
    return [f for f in history if f.current]


def _entity(layers: MemoryLayers, state: TaskState, fact: Fact) -> Candidate:
    assert layers.tasks is not None
    before = [
        f.object
        for f in layers.tasks.history(state.task, fact.predicate)
        if f.seq < fact.seq and f.object is not None
    ]
    text = f"{fact.predicate}: {fact.object}"
    if before and before[-1] != fact.object:
        text += f" (changed from {before[-1]}; that value is no longer current)"
    return Candidate(f"entity:{fact.predicate}", "entity", text, ENTITY_SCORE, critical=True)


def _said(item: MemoryItem) -> str:
    role = "User" if item.metadata.get("role") == "user" else "Agent"
    return f"{role}: {item.text}"


@lru_cache(maxsize=SUMMARY_CACHE)
def _words(text: str) -> frozenset[str]:
    """A summary's query terms (remembered: summaries do not change)."""
    return frozenset(query_terms(text))


@lru_cache(maxsize=SUMMARY_CACHE)
def _turns(ids: tuple[str, ...]) -> tuple[str, ...]:
    """The candidate ids of the turns a summary cites (remembered: summaries do not change)."""
    return tuple(f"turn:{i}" for i in ids)
