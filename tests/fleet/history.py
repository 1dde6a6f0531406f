"""What every client sent and was answered, and the checker that proves it against the store
and the downstream after the faults healed (Jepsen's approach: record a history, then check
properties of it, instead of asserting while the system is failing).

Per user, the checker proves: every acknowledged turn is in the store (by its request key);
no Task lost (every acknowledged one is there) or doubled (one Task per Session: each flow
has its own); every payment in the downstream exactly once, and one for every done Task; no
Action settled by two workers (one journal entry settles it); the journal replays to the
stored state; no Task stuck (every confirmed payment done once the faults healed).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from relaystate import Runtime, Scope

from .agent import Payments

ADMIN = Scope.admin("checker")


@dataclass
class Op:
    user: str
    session: str
    key: str
    text: str
    started: float
    ended: float | None = None
    task_id: str | None = None
    error: str | None = None  # the last failure before it was answered (or gave up)
    failures: int = 0

    @property
    def acknowledged(self) -> bool:
        return self.ended is not None and self.error is None


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    """Each failed try by what it was: the API's error code, else the exception's class."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def failed(self, op: Op, exc: Exception) -> None:
        with self._lock:
            op.failures += 1
            op.error = f"{type(exc).__name__}: {exc}"[:200]
            self.kinds[str(getattr(exc, "code", "") or type(exc).__name__)] += 1

    def add(self, op: Op) -> None:
        with self._lock:
            self.ops.append(op)

    def acknowledged(self) -> list[Op]:
        with self._lock:
            return [op for op in self.ops if op.acknowledged]

    def failures(self, start: float, end: float) -> int:
        """Requests that failed (each try) in [start, end) of the monotonic clock."""
        with self._lock:
            return sum(op.failures for op in self.ops if start <= op.started < end)

    def first_answer_after(self, at: float) -> float | None:
        """When the first turn that started after ``at`` was answered."""
        with self._lock:
            ends = [op.ended for op in self.ops if op.started >= at and op.acknowledged]
        return min((e for e in ends if e is not None), default=None)


@dataclass
class Verdict:
    acknowledged: int = 0
    lost_turns: list[str] = field(default_factory=list)
    lost_tasks: list[str] = field(default_factory=list)
    doubled_tasks: list[str] = field(default_factory=list)
    duplicate_effects: list[str] = field(default_factory=list)
    missing_effects: list[str] = field(default_factory=list)
    settled_twice: list[str] = field(default_factory=list)
    replay_mismatch: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    tasks: int = 0
    done: int = 0

    @property
    def problems(self) -> dict[str, list[str]]:
        found = {
            "lost_turns": self.lost_turns,
            "lost_tasks": self.lost_tasks,
            "doubled_tasks": self.doubled_tasks,
            "duplicate_effects": self.duplicate_effects,
            "missing_effects": self.missing_effects,
            "settled_twice": self.settled_twice,
            "replay_mismatch": self.replay_mismatch,
            "stuck": self.stuck,
        }
        return {k: v for k, v in found.items() if v}


def stuck(rt: Runtime, history: History, users: list[str]) -> list[str]:
    """The confirmed payments not done yet (cheap: what the wait for quiet polls)."""
    confirmed = {op.task_id for op in history.acknowledged() if op.text == "yes" and op.task_id}
    found = []
    for user in users:
        for task in rt.tasks(Scope.user(user), limit=1000):
            if task.id in confirmed and task.status != "done":
                found.append(task.id)
    return found


def check(history: History, rt: Runtime, payments: Payments, users: list[str]) -> Verdict:
    verdict = Verdict()
    acked = history.acknowledged()
    verdict.acknowledged = len(acked)
    for op in acked:
        if not rt.stores.sessions.said(op.user, op.key):
            verdict.lost_turns.append(f"{op.user} {op.key} {op.text!r}")
        if op.task_id is not None:
            try:
                rt.task(ADMIN, op.task_id)
            except Exception as exc:
                verdict.lost_tasks.append(f"{op.task_id}: {exc}")
    confirmed = {op.task_id for op in acked if op.text == "yes" and op.task_id}
    every = {u: [rt.task(ADMIN, t.id) for t in rt.tasks(Scope.user(u), limit=1000)] for u in users}
    paid = payments.by_key()  # after the Tasks: a payment precedes its Task's "done"
    verdict.duplicate_effects = [f"{k} x{n}" for k, n in paid.items() if n > 1]
    for user, states in every.items():
        per_session = Counter(s.task.origin_session_id for s in states)
        verdict.doubled_tasks += [
            f"{user} session {s} x{n}" for s, n in per_session.items() if n > 1
        ]
        for state in states:
            task = state.task
            verdict.tasks += 1
            verdict.done += task.status == "done"
            if task.id in confirmed and task.status != "done":
                held = [(a.status, a.lease_owner, a.lease_expires_at) for a in state.actions]
                verdict.stuck.append(f"{task.id} {task.status} {task.stage} {held}")
            for action in state.actions:
                if task.status == "done" and action.idempotency_key not in paid:
                    verdict.missing_effects.append(f"{task.id} {action.idempotency_key}")
            _, entries = rt.history(ADMIN, task.id)
            settles = Counter(
                str(change["path"][1])
                for entry in entries
                for change in entry.changes
                if change["path"][0] == "actions"
                and change["path"][-1] == "status"
                and change.get("after") in ("success", "failed", "compensated")
            )
            verdict.settled_twice += [f"{task.id} action {a}" for a, n in settles.items() if n > 1]
            if rt.replay(ADMIN, task.id).to_dict() != rt.task(ADMIN, task.id).to_dict():
                verdict.replay_mismatch.append(task.id)
    return verdict


def wait_until(ready: object, timeout: float, step: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return True
        time.sleep(step)
    return False
