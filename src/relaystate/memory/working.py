"""Working memory of one task: its key entities as facts with versions and validity, and
summaries of its older turns that cite them, merged recursively when they grow too many.

Explicit updates need no model: a slot filled or changed is a fact about ``task:<id>``, the
new value closes the old one (which stays in the history). Callers pass the ``Task`` they
read through the runtime: having read it in scope is the proof that they may touch its
memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .. import inputs
from ..errors import InvalidInput, StoreURLError, VersionConflict
from ..model import Fact, Summary, Task
from ..store.roles import WorkingMemory
from ..store.terms import CJK_RUN
from ..store.turn_memory import subject as task_node
from .summarize import DEFAULT_BUDGET, Said, abstract_line, extractive, faithful, merged

if TYPE_CHECKING:
    from ..llm import Model

MAX_LIVE = 6
"""Live summaries of one level a task keeps before the oldest are merged into one."""
MERGE = 3
"""How many summaries one merge takes (the oldest of their level)."""
_MERGE_ATTEMPTS = 5


def subject(task: Task) -> str:
    """The graph node of a task: its facts are its key entities."""
    return task_node(task.id)


class TaskMemory:
    """Key entities and summaries of tasks, over the store's working-memory role."""

    def __init__(
        self,
        working: WorkingMemory | None,
        *,
        clock: Callable[[], datetime],
        max_live: int = MAX_LIVE,
        merge: int = MERGE,
        budget: int = DEFAULT_BUDGET,
        model: Model | None = None,
    ) -> None:
        if working is None:
            raise StoreURLError("this store keeps no working memory")
        if not 2 <= merge <= max_live:
            raise ValueError("merge must be at least 2 and at most max_live")
        self.working = working
        self.clock = clock
        self.max_live, self.merge, self.budget = max_live, merge, budget
        self.model = model
        """Writes abstractive summaries when configured; kept only if faithful to the turns."""

    # -- key entities --------------------------------------------------------------------
    def note(
        self,
        task: Task,
        name: str,
        value: Any,
        *,
        source: str | None = None,
        at: datetime | None = None,
    ) -> Fact | None:
        """Set an entity (None: it has no value any more); the fact recorded, or None when
        memory already held that value."""
        inputs.text(name, "name")
        if not name.strip():
            raise InvalidInput("name", "must not be empty")
        inputs.json_value(value, "value")
        if source is not None:
            inputs.identifier(source, "source")
        when = inputs.moment(at, "at") if at is not None else self.clock()
        fact = Fact(task.user_id, subject(task), name, value, when, None, source, task.id)
        recorded = self.working.record_facts([fact])
        return recorded[0] if recorded else None

    def observe(self, task: Task, *, source: str | None = None) -> list[Fact]:
        """Every slot of the task as an entity: what changed since memory last saw it is
        recorded (filled, changed, or cleared)."""
        now = self.clock()
        current = self.entities(task)
        facts = [
            Fact(task.user_id, subject(task), name, value, now, None, source, task.id)
            for name, value in sorted(task.slots.items())
            if current.get(name) != value and (value is not None or name in current)
        ]
        return self.working.record_facts(facts) if facts else []

    def entities(self, task: Task, *, at: datetime | None = None) -> dict[str, Any]:
        """The task's entities and their current values (or those valid at ``at``)."""
        facts = self.working.current_facts(task.user_id, subjects=[subject(task)], at=at)
        return {f.predicate: f.object for f in facts}

    def history(self, task: Task, name: str | None = None) -> list[Fact]:
        """Every value an entity (or every entity) had, oldest first, with its interval."""
        return self.working.fact_history(task.user_id, subject(task), name)

    # -- summaries -----------------------------------------------------------------------
    def summarize(self, task: Task, turns: Sequence[Said]) -> Summary | None:
        """A summary of ``turns`` (those no summary covers yet), then merges while a level
        holds more than ``max_live``; None when every turn was covered already."""
        covered = self.covered(task)
        fresh = [t for t in turns if t.id not in covered]
        if not fresh:
            return None
        text, cites = extractive(fresh, self._terms(task), budget=self.budget)
        written = self._abstract(fresh)
        if written is not None:
            text = written
        summary = Summary(_new_id(task), task.user_id, task.id, 0, text, cites, self.clock())
        self.working.add_summary(summary)
        self._merge(task)
        return summary

    def _abstract(self, turns: Sequence[Said]) -> str | None:
        """The model's summary of the turns as a cited line, if a model is configured and
        its summary is faithful to them; else None (the extractive one stands)."""
        if self.model is None:
            return None
        texts = [f"{t.speaker}: {t.text}" for t in turns]
        language = "zh" if any(CJK_RUN.search(t) for t in texts) else "en"
        written = self.model.summarize(texts, language=language, max_words=self.budget // 8)
        if not written or not written.strip() or not faithful(written, turns):
            return None
        line = abstract_line(turns, written)
        return line if len(line) <= self.budget else None

    def summaries(self, task: Task) -> list[Summary]:
        """The live summaries (not merged into another), oldest first."""
        return self.working.summaries(task.user_id, task.id)

    def covered(self, task: Task) -> set[str]:
        """The turn ids the task's summaries cite."""
        return {c for s in self.summaries(task) for c in s.cites}

    def _merge(self, task: Task) -> None:
        for _ in range(_MERGE_ATTEMPTS * 8):
            live = self.summaries(task)
            levels: dict[int, list[Summary]] = {}
            for s in live:
                levels.setdefault(s.level, []).append(s)
            full = [lvl for lvl, group in sorted(levels.items()) if len(group) > self.max_live]
            if not full:
                return
            parts = levels[full[0]][: self.merge]
            into = Summary(
                _new_id(task),
                task.user_id,
                task.id,
                full[0] + 1,
                merged([p.text for p in parts], self._terms(task), budget=self.budget),
                tuple(dict.fromkeys(c for p in parts for c in p.cites)),
                self.clock(),
                tuple(p.id for p in parts),
            )
            try:
                self.working.merge_summaries(task.user_id, [p.id for p in parts], into)
            except VersionConflict:
                continue  # another process merged them first: look again

    def _terms(self, task: Task) -> list[str]:
        """What makes a sentence worth keeping: the task's values, as text."""
        return [str(v) for v in self.entities(task).values() if v not in (None, "", [], {})]


def _new_id(task: Task) -> str:
    return f"{task.id}:{uuid.uuid4().hex[:12]}"
