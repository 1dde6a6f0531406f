"""Random interleavings of turns, version conflicts, crashes and restarts (hypothesis.stateful).

The machine drives a small order template (collecting -> confirming -> executing -> done,
where executing runs a read-only ``quote``, a non-idempotent but checkable ``place_order``
with a compensation, and an idempotent ``notify``) against a real store and a downstream
:class:`Ledger` in its own SQLite file, and checks after every step that

* no committed slot is ever lost (a model updated only when a call returned),
* no side effect runs twice (at most one ledger effect per idempotency key, exactly one for
  every action that counts as done, none for a refused or not-found ``place_order``, and
  every effect belongs to an action recorded before it),
* no task is left that cannot be resumed (status agrees with the machine, nothing "running"
  without a live lease after a turn, nothing running at all after restart + recover, and
  at the end every task can be driven to a final state),
* the journal replays to the current row, with versions contiguous.

A "crash" is :class:`Crash`, a BaseException raised inside an action, a check or around a
store commit; it unwinds out of the runtime like a killed process (nothing after it runs),
and the "process" is replaced by a new Runtime on a new store connection. Its leases stay
alive until it is noticed: deregistered as a worker, or the clock jumps past the lease.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from relaystate import (
    Action,
    ActionContext,
    ActionKind,
    ActionStatus,
    InvalidSlot,
    NotFound,
    Outcome,
    OutcomeUnknown,
    PermanentError,
    Retry,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskLocked,
    TaskState,
    TaskStatus,
    TaskTemplate,
    VersionConflict,
    all_required_slots,
    user_confirmed,
)
from relaystate.actions.leases import Owner
from relaystate.demo.ledger import Ledger
from relaystate.model import WorkerInfo
from relaystate.store import Backend, Commit, InMemoryStore, Stores, open_backend
from relaystate.task.journal import entry_for
from relaystate.task.machine import settle
from relaystate.task.next_step import (
    InProgress,
    NeedsAttention,
    Reconcile,
    RunAction,
    WaitRetry,
    status_for,
)

ADMIN = Scope.admin("test")

START = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=60)
USERS = ("alice", "bob")
MAX_TASKS = 4
SETTLED = {
    TaskStatus.WAITING_USER,
    TaskStatus.DONE,
    TaskStatus.FAILED,
    TaskStatus.CANCELLED,
    TaskStatus.NEEDS_ATTENTION,
}
FINAL = {TaskStatus.DONE, TaskStatus.FAILED, TaskStatus.CANCELLED}
BUSY_STEPS = (RunAction, Reconcile, InProgress, WaitRetry)


class Crash(BaseException):
    """The process running a runtime dies right here: nothing after this point runs."""


# -- the world outside relaystate: a clock, a downstream ledger, planned faults and crashes --


class Clock:
    """Test-controlled time: ticks a millisecond per reading; ``jump`` skips ahead."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=max(seconds, 0.0))

    def jump(self, delta: timedelta) -> None:
        self.now += delta


CRASH_POINTS = ("before_effect", "after_effect", "in_check", "before_commit", "after_commit")
FAULTS = {
    "quote": ("fail_before", "unknown_after", "reject"),
    "place_order": ("fail_before", "fail_after", "unknown_after", "reject"),
    "notify": ("fail_before", "fail_after", "unknown_after", "reject"),
    "cancel_order": ("fail_before", "fail_after", "unknown_after", "reject"),
    "order_status": ("error", "pending"),
}


class World:
    """The downstream ledger plus what the test plans to go wrong (faults, one crash).

    A planned crash waits for its point to be passed ``countdown`` times while a process
    is ``live`` (running a rule's operation), whichever operation that turns out to be.
    """

    def __init__(self, ledger_path: str) -> None:
        self.ledger = Ledger(ledger_path)
        self.faults: dict[str, list[str]] = {}
        self.crash_plan: list[Any] | None = None  # [point, countdown]
        self.live = False

    def hit(self, point: str) -> None:
        plan = self.crash_plan
        if self.live and plan is not None and plan[0] == point:
            plan[1] -= 1
            if plan[1] <= 0:
                self.crash_plan = None
                raise Crash(point)

    def fault(self, name: str) -> str:
        queue = self.faults.get(name)
        return queue.pop(0) if queue else "ok"

    def effect_of(self, key: str) -> dict[str, Any] | None:
        return self.ledger.status(key)

    def call(
        self, name: str, ctx: ActionContext, kind: str, payload: dict[str, Any], *, dedupe: bool
    ) -> dict[str, Any]:
        """One request to the downstream, with the planned fault and crash points around it."""
        self.hit("before_effect")
        fault = self.fault(name)
        if fault == "fail_before":
            raise ConnectionError(f"{name}: downstream unreachable")
        if fault == "reject":
            raise PermanentError(f"{name}: refused by the downstream")
        effect = self.ledger.apply(ctx.idempotency_key, kind, payload, deduplicate=dedupe)
        self.hit("after_effect")
        if fault == "fail_after":
            raise ConnectionError(f"{name}: the response was lost")
        if fault == "unknown_after":
            raise OutcomeUnknown(f"{name}: timed out")
        return effect


PRICES = {"basic": 1, "plus": 2, "pro": 5}


def order_template(world: World) -> TaskTemplate:
    fast = Retry(max_attempts=3, initial_interval=0)
    order = TaskTemplate(
        "order",
        version=1,
        goal="Place an order",
        slots=[
            Slot("item", pattern=r"[a-z]{1,8}"),
            Slot("qty", kind="number"),
            Slot("tier", choices=list(PRICES), synonyms={"gold": "pro"}),
            Slot("note", required=False),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("executing", actions=["quote", "place_order", "notify"]),
            Stage("done"),
        ],
    )

    @order.action(retry=fast)
    def quote(ctx: ActionContext) -> dict[str, Any]:
        """Read-only: no downstream effect, safe to repeat."""
        world.hit("before_effect")
        fault = world.fault("quote")
        if fault == "fail_before":
            raise ConnectionError("quote: price service unreachable")
        if fault == "reject":
            raise PermanentError("quote: no price for this item")
        price = PRICES[ctx.input["tier"]] * ctx.input["qty"]
        world.hit("after_effect")
        if fault == "unknown_after":
            raise OutcomeUnknown("quote: timed out")
        return {"price": price}

    def order_input(task: Any, outputs: Any) -> dict[str, Any]:
        slots = task.slots
        return {
            "item": slots["item"],
            "qty": slots["qty"],
            "tier": slots["tier"],
            "price": outputs["quote"]["price"],
        }

    # Not idempotent downstream (a repeat makes a second order), but checkable: every retry
    # must be preceded by a check, so the ledger would show any blind re-run.
    @order.action(side_effect=True, retry=fast, input=order_input)
    def place_order(ctx: ActionContext) -> dict[str, Any]:
        return world.call("place_order", ctx, "order", dict(ctx.input), dedupe=False)

    @place_order.check
    def order_status(ctx: ActionContext) -> Outcome:
        world.hit("in_check")
        fault = world.fault("order_status")
        if fault == "error":
            raise ConnectionError("order status: unreachable")
        if fault == "pending":
            return Outcome.pending("still processing")
        effect = world.effect_of(ctx.idempotency_key)
        return Outcome.not_found() if effect is None else Outcome.succeeded(effect)

    @place_order.compensate
    def cancel_order(ctx: ActionContext) -> dict[str, Any]:
        payload = {"order": ctx.original_output["id"]}
        return world.call("cancel_order", ctx, "cancellation", payload, dedupe=True)

    @order.action(side_effect=True, idempotent=True, retry=fast)
    def notify(ctx: ActionContext) -> dict[str, Any]:
        return world.call("notify", ctx, "notification", {"item": ctx.input["item"]}, dedupe=True)

    return order


class HookedStore:
    """A store connection of one runtime ("process"), with test hooks around ``commit``.

    It wraps one backend and plays every role of the runtime's :class:`Stores` (so a turn's
    task change still commits in one transaction, and every commit passes the hooks).
    """

    def __init__(self, inner: Backend, world: World) -> None:
        self.inner = inner
        self.world = world
        self.hook: list[Any] | None = None  # [countdown, fn]: fn runs just before that commit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def commit(self, commit: Commit) -> None:
        if self.hook is not None:
            self.hook[0] -= 1
            if self.hook[0] <= 0:
                fn = self.hook[1]
                self.hook = None
                fn()
        self.world.hit("before_commit")
        try:
            self.inner.commit(commit)
        except VersionConflict:
            note("the writer met a VersionConflict and retried")
            raise
        self.world.hit("after_commit")


def _hooked(rt: Runtime) -> HookedStore:
    """The store connection of one runtime (it plays every role)."""
    store = rt.stores.tasks
    assert isinstance(store, HookedStore)
    return store


def _worker(owner_id: str) -> WorkerInfo:
    """The worker record of a runtime, from its owner id (it may never have registered)."""
    owner = Owner.parse(owner_id)
    assert owner is not None, owner_id
    return WorkerInfo(owner_id, owner.host, owner.pid, "dev", START)


# -- slot values: (name, raw, normalised, valid) ------------------------------------------

VALID = [
    ("item", "apple", "apple"),
    ("item", "  fig ", "fig"),
    ("item", "pear", "pear"),
    ("qty", 1, 1),
    ("qty", "2", 2),
    ("qty", 3.0, 3.0),
    ("tier", "basic", "basic"),
    ("tier", "PLUS", "plus"),
    ("tier", "gold", "pro"),
    ("note", "leave at the door", "leave at the door"),
]
INVALID = [
    ("item", ""),
    ("item", "Apple1"),
    ("item", None),
    ("qty", "many"),
    ("qty", True),
    ("tier", "diamond"),
    ("note", "   "),
    ("colour", "red"),
]
DEFAULTS = {"item": "apple", "qty": 1, "tier": "basic"}

valid_entry = st.sampled_from([(n, raw, norm, True) for n, raw, norm in VALID])
invalid_entry = st.sampled_from([(n, raw, None, False) for n, raw in INVALID])


full_entries = st.tuples(
    *(st.sampled_from([e for e in VALID if e[0] == name]) for name in ("item", "qty", "tier")),
    st.lists(st.sampled_from([e for e in VALID if e[0] == "note"]), max_size=1),
).map(lambda t: [(n, raw, norm, True) for n, raw, norm in [*t[:3], *t[3]]])


def slot_entries(min_size: int, max_size: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Mostly valid values; sometimes one invalid value among them."""
    valid = st.lists(valid_entry, min_size=min_size, max_size=max_size, unique_by=lambda e: e[0])
    spoiled = st.tuples(valid, invalid_entry).map(
        lambda t: [*[e for e in t[0] if e[0] != t[1][0]][: max_size - 1], t[1]]
    )
    return st.one_of(valid, valid, valid, spoiled)


TURNS = ("fill", "fill", "confirm", "confirm", "decline", "advance", "resume", "cancel")
picks = st.integers(0, 4 * MAX_TASKS - 1)
runtimes = st.integers(0, 1)
faults = st.sampled_from(sorted(FAULTS)).flatmap(
    lambda name: st.tuples(
        st.just(name), st.lists(st.sampled_from(FAULTS[name]), min_size=1, max_size=3)
    )
)
crash_plans = st.tuples(st.sampled_from(CRASH_POINTS), st.integers(1, 3))
troubles = st.one_of(
    st.tuples(st.just("crash"), crash_plans),
    st.tuples(st.just("faults"), faults),
)


@dataclass
class Op:
    kind: str  # fill | confirm | cancel | advance | resume
    tid: str
    entries: list[tuple[Any, ...]] = field(default_factory=list)
    yes: bool = True

    @property
    def raw(self) -> dict[str, Any]:
        return {e[0]: e[1] for e in self.entries}

    @property
    def valid(self) -> bool:
        return all(e[3] for e in self.entries)

    @property
    def norm(self) -> dict[str, Any]:
        return {e[0]: e[2] for e in self.entries}


@dataclass
class TaskModel:
    user: str
    slots: dict[str, Any]


def note(text: str) -> None:
    """Count how often something happened (see --hypothesis-show-statistics)."""
    with contextlib.suppress(InvalidArgument):  # called outside a test, e.g. by hand
        event(text)


def _tmp_root() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class RelaystateMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="relaystate-stateful-", dir=_tmp_root())
        self.clock = Clock()
        self.world = World(os.path.join(self.dir, "ledger.db"))
        self.template = order_template(self.world)
        self.memory = InMemoryStore() if self.backend == "memory" else None
        self.rts = [self._new_runtime(), self._new_runtime()]
        self.undetected: set[str] = set()  # workers that died and nobody noticed yet
        self.tasks: dict[str, TaskModel] = {}
        self.counter = 0

    # -- processes -----------------------------------------------------------------------
    def _open_inner(self) -> Backend:
        if self.memory is not None:
            return self.memory
        return open_backend("sqlite:///" + os.path.join(self.dir, "tasks.db"))

    def _new_runtime(self) -> Runtime:
        store = HookedStore(self._open_inner(), self.world)
        return Runtime(
            Stores(store, store, store),  # type: ignore[arg-type]
            [self.template],
            clock=self.clock,
            lease=LEASE,
            sleep=self.clock.sleep,
        )

    def _kill(self, idx: int) -> None:
        """The process ``idx`` dies (no clean-up, no deregistration); a new one takes its place."""
        dead = self.rts[idx]
        self.undetected.add(dead.owner)
        if self.memory is None:
            _hooked(dead).inner.close()  # the OS closes its files
        self.rts[idx] = self._new_runtime()

    def _notice_dead(self, how: str) -> None:
        if how == "deregister":
            for owner in sorted(self.undetected):
                self.store.deregister_worker(_worker(owner), self.clock())
        else:
            self.clock.jump(LEASE + timedelta(seconds=1))
        self.undetected.clear()

    # -- reading ---------------------------------------------------------------------------
    @property
    def store(self) -> Backend:
        """Process 0's backend (reads pass no hooks)."""
        return _hooked(self.rts[0]).inner

    def _load(self, tid: str) -> TaskState | None:
        return self.store.load(tid, ADMIN)

    def _tid(self, pick: int) -> str:
        """Mostly an open task (a quarter of picks take any), so runs do not idle on closed ones."""
        ids = sorted(self.tasks)
        if pick % 4:
            open_ids = [t for t in ids if (s := self._load(t)) and s.task.status.is_open]
            ids = open_ids or ids
        return ids[(pick // 4) % len(ids)]

    def _spec_of(self, action: Action) -> Any:
        spec = self.template.spec(action.name.removesuffix(".compensate"))
        return spec.compensation() if action.kind == ActionKind.COMPENSATION else spec

    # -- performing user and worker operations -------------------------------------------
    def _predict(self, state: TaskState, op: Op) -> type[Exception] | None:
        """What the runtime must refuse, from the state just before the call."""
        task = state.task
        steps = [a for a in state.actions if a.kind == ActionKind.STEP]
        # Changing one's mind is refused once a side effect is recorded or while an action
        # runs; before that, read-only actions are reset and run again after the next yes.
        effects = [a for a in steps if self._spec_of(a).side_effect]
        running = [a for a in state.actions if a.status == ActionStatus.RUNNING]
        if op.kind == "fill":
            if not task.status.is_open:
                return TaskLocked
            if not op.valid:
                return InvalidSlot
            changed = any(task.slots.get(k) != v for k, v in op.norm.items())
            if changed and (effects or running):
                return TaskLocked
        elif op.kind == "confirm":
            if not task.status.is_open or effects or (not op.yes and running):
                return TaskLocked
        elif op.kind == "cancel":
            if not task.status.is_open:
                return TaskLocked
            for action in state.actions:
                if action.status.is_open:
                    return TaskLocked
                spec = self.template.spec(action.name.removesuffix(".compensate"))
                if action.status == ActionStatus.SUCCESS and spec.side_effect:
                    return TaskLocked
        return None

    def _call(self, rt: Runtime, op: Op) -> None:
        user = self.tasks[op.tid].user
        if op.kind == "fill":
            rt.fill(Scope.user(user), op.tid, op.raw)
        elif op.kind == "confirm":
            rt.confirm(Scope.user(user), op.tid, op.yes)
        elif op.kind == "cancel":
            rt.cancel(Scope.user(user), op.tid)
        elif op.kind == "advance":
            rt.advance(Scope.user(user), op.tid)
        else:
            resumption = rt.resume(Scope.user(user), op.tid)
            assert resumption.task.status == status_for(resumption.step) or (
                resumption.task.status == TaskStatus.CANCELLED
            )

    @contextlib.contextmanager
    def _live(self, live: bool = True) -> Iterator[None]:
        """While a process runs an operation, the planned crash can strike."""
        was, self.world.live = self.world.live, live
        try:
            yield
        finally:
            self.world.live = was

    def _crashed(self, idx: int, crash: Crash, what: str) -> None:
        note(f"crash at {crash.args[0]} during {what}")
        self._kill(idx)

    def _perform(
        self,
        idx: int,
        op: Op,
        *,
        predict: bool = True,
        live: bool = True,
        interfere: tuple[int, Callable[[], None]] | None = None,
        check_settled: bool = True,
    ) -> str:
        rt = self.rts[idx]
        store = _hooked(rt)
        before = store.inner.load(op.tid, ADMIN)
        assert before is not None
        expected = self._predict(before, op)
        if interfere is not None:
            store.hook = list(interfere)
        try:
            with self._live(live):
                self._call(rt, op)
        except Crash as crash:
            self._crashed(idx, crash, op.kind)
            self._after_crash(op)
            return "crash"
        except (TaskLocked, InvalidSlot) as exc:
            if predict:
                assert expected is not None, f"{op.kind} refused unexpectedly: {exc!r}"
                assert isinstance(exc, expected), f"{op.kind}: {exc!r}, expected {expected}"
                after = self._load(op.tid)
                assert after is not None and after.to_dict() == before.to_dict(), (
                    f"a refused {op.kind} changed the task"
                )
            note(f"{op.kind}: refused ({type(exc).__name__})")
            return "refused"
        finally:
            store.hook = None
        if predict:
            assert expected is None, f"{op.kind} should have raised {expected.__name__}"
        if op.kind == "fill":
            self.tasks[op.tid].slots.update(op.norm)
        if check_settled and op.kind != "cancel":
            self._assert_not_stuck(op.tid)
        return "ok"

    def _after_crash(self, op: Op) -> None:
        """A crash mid-call: the call's own write landed whole or not at all."""
        if op.kind != "fill":
            return
        state = self._load(op.tid)
        assert state is not None
        old = dict(self.tasks[op.tid].slots)
        new = {**old, **op.norm}
        assert state.task.slots in (old, new), (state.task.slots, old, new)
        self.tasks[op.tid].slots = dict(state.task.slots)

    def _assert_not_stuck(self, tid: str) -> None:
        """After a turn by a live process: nothing is running unless a dead process's lease
        still protects it (and that death has not been noticed yet)."""
        state = self._load(tid)
        assert state is not None
        if state.task.status != TaskStatus.RUNNING:
            assert state.task.status in SETTLED
            return
        in_flight = [a for a in state.actions if a.status.is_open]
        assert in_flight, f"task {tid} is running with nothing in flight: {state.task.status_text}"
        for action in in_flight:
            assert action.lease_owner in self.undetected, (
                f"task {tid} left running: {action.name} is {action.status} "
                f"held by {action.lease_owner} ({state.task.status_text})"
            )
            assert action.lease_expires_at is not None and action.lease_expires_at > self.clock.now

    # -- rules: users ----------------------------------------------------------------------
    @initialize(
        users=st.tuples(st.sampled_from(USERS), st.sampled_from(USERS)),
        first=full_entries,
        second=slot_entries(0, 3),
        trouble=st.none() | troubles,
    )
    def first_tasks(
        self,
        users: tuple[str, str],
        first: list[tuple[Any, ...]],
        second: list[tuple[Any, ...]],
        trouble: tuple[str, Any] | None,
    ) -> None:
        """Every run starts with a task ready for confirmation, one more, and maybe trouble."""
        self.start(0, users[0], first)
        self.start(1, users[1], second)
        if trouble is not None:
            self.trouble_ahead(trouble)

    @precondition(lambda self: len(self.tasks) < MAX_TASKS)
    @rule(
        idx=runtimes,
        user=st.sampled_from(USERS),
        entries=st.one_of(full_entries, slot_entries(0, 4)),
    )
    def start(self, idx: int, user: str, entries: list[tuple[Any, ...]]) -> None:
        tid = f"task-{self.counter}"
        self.counter += 1
        op = Op("start", tid, entries)
        rt = self.rts[idx]
        try:
            with self._live():
                state = rt.start(Scope.user(user), "order", slots=op.raw, task_id=tid)
        except InvalidSlot:
            assert not op.valid
            assert self._load(tid) is None, "a refused start created a task"
            return
        except Crash as crash:
            self._crashed(idx, crash, "start")
            stored = self._load(tid)
            if stored is not None:
                assert stored.task.slots == op.norm
                self.tasks[tid] = TaskModel(user, dict(stored.task.slots))
            return
        assert op.valid, "start accepted an invalid slot value"
        assert state.task.slots == op.norm
        self.tasks[tid] = TaskModel(user, dict(op.norm))
        self._assert_not_stuck(tid)

    @precondition(lambda self: self.tasks)
    @rule(
        pick=picks,
        idx=runtimes,
        kind=st.sampled_from(TURNS),
        entries=slot_entries(1, 2),
        crash=st.none() | crash_plans,
    )
    def turn(
        self,
        pick: int,
        idx: int,
        kind: str,
        entries: list[tuple[Any, ...]],
        crash: tuple[str, int] | None,
    ) -> None:
        """One user turn (fill, confirm yes/no, cancel) or a worker advancing/resuming,
        perhaps with a crash planned for it (or for whatever runs next, if it never gets
        that far)."""
        tid = self._tid(pick)
        if crash is not None:
            self.world.crash_plan = list(crash)
        if kind == "decline":
            op = Op("confirm", tid, yes=False)
        elif kind == "fill":
            op = Op("fill", tid, entries)
        else:
            op = Op(kind, tid)
        self._perform(idx, op)

    @precondition(lambda self: self.tasks)
    @rule(
        pick=picks,
        reader=runtimes,
        what=st.sampled_from(["stale write", "other user", "compact"]),
        retention_ms=st.sampled_from([0, 5, 50, 5000]),
    )
    def audit(self, pick: int, reader: int, what: str, retention_ms: int) -> None:
        """Writes that must be refused, and journal compaction (replay must still work)."""
        tid = self._tid(pick)
        if what == "stale write":
            self._stale_write_is_refused(tid, reader)
        elif what == "other user":
            self._other_users_see_nothing(tid)
        else:
            self.rts[reader].compact(ADMIN, retention=timedelta(milliseconds=retention_ms))

    # -- rules: two processes on one task ------------------------------------------------
    @precondition(lambda self: self.tasks)
    @rule(
        pick=picks,
        first=runtimes,
        a_kind=st.sampled_from(["fill", "confirm", "advance", "cancel"]),
        a_entries=slot_entries(1, 2),
        b_kind=st.sampled_from(["fill", "confirm", "confirm_no", "advance", "cancel"]),
        b_entries=slot_entries(1, 2),
        at=st.integers(1, 6),
    )
    def interleave(
        self,
        pick: int,
        first: int,
        a_kind: str,
        a_entries: list[tuple[Any, ...]],
        b_kind: str,
        b_entries: list[tuple[Any, ...]],
        at: int,
    ) -> None:
        """Process B does a whole operation just before process A's ``at``-th commit.

        A's commit then meets a newer version and the writer must redo A's change on fresh
        state (or refuse it), never overwrite B's.
        """
        tid = self._tid(pick)
        a = Op(a_kind, tid, a_entries)
        b = Op("confirm", tid, yes=False) if b_kind == "confirm_no" else Op(b_kind, tid, b_entries)
        if a.kind == "fill" and b.kind == "fill":
            at = 1  # so B's slots land before A's, as the model applies them
        other = 1 - first

        def run_b() -> None:
            self._perform(other, b, live=False, check_settled=False)  # A is mid-flight

        self._perform(first, a, predict=False, interfere=(at, run_b))

    # -- rules: the downstream, crashes, restarts -----------------------------------------
    @rule(plan=troubles)
    def trouble_ahead(self, plan: tuple[str, Any]) -> None:
        """Plan a crash (the next process to pass a point for the n-th time dies there), or
        queue downstream faults (consumed by the next calls of that endpoint)."""
        kind, what = plan
        if kind == "crash":
            self.world.crash_plan = list(what)
        else:
            name, kinds = what
            self.world.faults.setdefault(name, []).extend(kinds)

    @rule(idx=runtimes, notice=st.sampled_from([None, "deregister", "clock"]))
    def recover(self, idx: int, notice: str | None) -> None:
        """With ``notice``: process ``idx`` is replaced, the dead are noticed (deregistered, or
        the clock passes their leases) and recovery runs; unless it crashes too, nothing may
        stay running after. Without: a live process recovers while the dead still hold their
        leases."""
        if notice is None:
            try:
                with self._live():
                    report = self.rts[idx].recover(ADMIN)
            except Crash as crash:
                self._crashed(idx, crash, "recover")
                return
            assert not report.errors, report.errors
            for tid in sorted(self.tasks):
                self._assert_not_stuck(tid)
            return
        self._kill(idx)
        self._notice_dead(notice)
        rt = self.rts[idx]
        try:
            with self._live():
                report = rt.recover(ADMIN)
        except Crash as crash:  # the new process died too: what it left is checked later
            self._crashed(idx, crash, "recover after a restart")
            return
        assert not report.errors, report.errors
        for tid in sorted(self.tasks):
            state = self._load(tid)
            assert state is not None
            assert state.task.status in SETTLED, f"recovery left {tid} {state.task.status_text}"
            resumption = rt.resume(ADMIN, tid)
            assert resumption.task.status in SETTLED, resumption.task.status_text
            assert not isinstance(resumption.step, BUSY_STEPS), resumption.step

    @precondition(
        lambda self: any(
            (s := self._load(t)) is not None and s.task.status == TaskStatus.NEEDS_ATTENTION
            for t in self.tasks
        )
    )
    @rule(pick=picks, idx=runtimes)
    def operator_resolves(self, pick: int, idx: int) -> None:
        """A person looks at the downstream and settles the action that needs attention."""
        waiting = [
            t
            for t in sorted(self.tasks)
            if (s := self._load(t)) is not None and s.task.status == TaskStatus.NEEDS_ATTENTION
        ]
        tid = waiting[pick % len(waiting)]
        try:
            with self._live():
                self._resolve(self.rts[idx], tid)
        except Crash as crash:
            self._crashed(idx, crash, "resolve")
            return
        self._assert_not_stuck(tid)

    def _resolve(self, rt: Runtime, tid: str) -> None:
        state = rt.task(ADMIN, tid)
        step = rt.next_step(state)
        assert isinstance(step, NeedsAttention) and step.seq is not None, step
        action = state.action(step.seq)
        assert action.status in (ActionStatus.UNKNOWN, ActionStatus.FAILED), action.status
        effect = self.world.effect_of(action.idempotency_key)
        rt.resolve(ADMIN, tid, step.seq, succeeded=effect is not None, output=effect)

    # -- checks used by the audit rule ---------------------------------------------------
    def _other_users_see_nothing(self, tid: str) -> None:
        other = next(u for u in USERS if u != self.tasks[tid].user)
        before = self._load(tid)
        assert before is not None
        with pytest.raises(NotFound):
            self.rts[0].fill(Scope.user(other), tid, {"item": "pear"})
        with pytest.raises(NotFound):
            self.rts[1].cancel(Scope.user(other), tid)
        with pytest.raises(NotFound):
            self.rts[0].task(Scope.user(other), tid)
        # The store itself answers another user's scope as if the task did not exist.
        theirs = Scope.user(other)
        assert self.store.load(tid, theirs) is None
        assert self.store.journal(tid, theirs) == []
        assert self.store.baseline(tid, theirs) is None
        for action in before.actions:
            assert self.store.find_action(action.idempotency_key, theirs) is None
            mine = self.store.find_action(action.idempotency_key, Scope.user(before.task.user_id))
            assert mine is not None and mine.id == action.id
        after = self._load(tid)
        assert after is not None and after.to_dict() == before.to_dict()

    def _stale_write_is_refused(self, tid: str, reader: int) -> None:
        """Read via one process, write via the other, then write with the stale version."""
        mine, theirs = self.rts[reader], self.rts[1 - reader]
        store = _hooked(mine).inner  # straight to the backend
        before = store.load(tid, ADMIN)
        assert before is not None

        def touch(draft: TaskState) -> bool:
            draft.task.context["touches"] = int(draft.task.context.get("touches", 0)) + 1
            return True

        theirs._writer.mutate(tid, ADMIN, touch, actor="test", reason="touched by another process")
        current = store.load(tid, ADMIN)
        assert current is not None and current.task.version == before.task.version + 1
        journal = [e.to_dict() for e in store.journal(tid, ADMIN)]

        stale = before.copy()
        stale.task.slots["item"] = "stale"
        stale.task.version = before.task.version + 1
        for action in stale.actions:
            action.status = ActionStatus.SUCCESS
        key = f"{tid}:stale:{uuid.uuid4().hex}"
        stale.actions.append(
            Action(
                id=uuid.uuid4().hex,
                task_id=tid,
                seq=stale.next_seq(),
                name="quote",
                stage="executing",
                idempotency_key=key,
            )
        )
        entry = entry_for(before, stale, at=self.clock(), actor="test", reason="stale write")
        with pytest.raises(VersionConflict):
            store.commit(Commit(stale, before.task.version, list(stale.actions), entry))
        with pytest.raises(VersionConflict):  # creating over an existing task
            store.commit(Commit(stale, 0, list(stale.actions), entry))
        # The right version but another owner: no write either (isolation).
        foreign = current.copy()
        foreign.task.user_id = "mallory"
        foreign.task.version = current.task.version + 1
        entry = entry_for(current, foreign, at=self.clock(), actor="test", reason="foreign")
        with pytest.raises(VersionConflict):
            store.commit(Commit(foreign, current.task.version, [], entry))

        after = theirs.stores.tasks.load(tid, ADMIN)
        assert after is not None and after.to_dict() == current.to_dict()
        assert [e.to_dict() for e in store.journal(tid, ADMIN)] == journal
        assert store.find_action(key, ADMIN) is None

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def committed_slots_are_never_lost(self) -> None:
        for tid, model in self.tasks.items():
            state = self._load(tid)
            assert state is not None, f"task {tid} vanished"
            assert state.task.user_id == model.user
            assert state.task.slots == model.slots, (tid, state.task.slots, model.slots)

    @invariant()
    def side_effects_happen_at_most_once(self) -> None:
        entries = {e["idempotency_key"]: e for e in self.world.ledger.entries()}
        for key, entry in entries.items():
            assert entry["effects"] <= 1, f"side effect ran {entry['effects']} times: {entry}"
            recorded = self.store.find_action(key, ADMIN)
            assert recorded is not None, f"effect {key} has no action recorded before it"
        for tid in self.tasks:
            state = self._load(tid)
            assert state is not None
            for action in state.actions:
                spec = self._spec_of(action)
                if not spec.side_effect:
                    continue
                entry = entries.get(action.idempotency_key)
                effects = 0 if entry is None else entry["effects"]
                if action.status in (ActionStatus.SUCCESS, ActionStatus.COMPENSATED):
                    assert effects == 1, f"{action.name} is {action.status} with {effects} effects"
                    assert entry is not None and action.output == entry["effect"]
                if action.name == "place_order" and action.status == ActionStatus.FAILED:
                    assert effects == 0, f"place_order failed but took effect: {entry}"

    @invariant()
    def journal_replays_to_the_current_row(self) -> None:
        for tid in self.tasks:
            current = self.rts[0].task(ADMIN, tid)
            assert self.rts[1].replay(ADMIN, tid).to_dict() == current.to_dict()
            baseline = self.store.baseline(tid, ADMIN)
            first = baseline.version + 1 if baseline is not None else 1
            versions = [e.version for e in self.store.journal(tid, ADMIN)]
            assert versions == list(range(first, current.task.version + 1)), versions

    @invariant()
    def every_task_can_be_resumed(self) -> None:
        for tid in self.tasks:
            state = self._load(tid)
            assert state is not None
            task = state.task
            note(f"seen task {task.status}")
            for action in state.actions:
                note(f"seen {action.name} {action.status}")
                if action.attempts > 1:
                    note(f"seen {action.name} retried")
            probe = state.copy()
            step = settle(self.template, probe, self.clock.now)
            expected = TaskStatus.CANCELLED if task.status == TaskStatus.CANCELLED else None
            assert task.status == (expected or status_for(step)), (task.status, step)
            assert task.stage == probe.task.stage
            assert task.missing_slots == probe.task.missing_slots
            assert sum(a.status.is_open for a in state.actions) <= 1, "two actions in flight"
            steps = [(a.stage, a.name) for a in state.actions if a.kind == ActionKind.STEP]
            assert len(steps) == len(set(steps)), f"an action was recorded twice: {steps}"
            # A change of mind before any side effect resets read-only actions to pending,
            # to run again after the next yes; nothing may have run without a yes.
            ran = [a for a in state.actions if a.attempts or a.status != ActionStatus.PENDING]
            if ran:
                assert task.confirmed, f"task {tid} ran actions without the user's yes"
            if task.status == TaskStatus.CANCELLED:
                entries = self.store.journal(tid, ADMIN)
                cancelled_at = next(
                    (
                        i
                        for i, e in enumerate(entries)
                        for c in e.changes
                        if c["path"] == ["task", "status"] and c.get("after") == "cancelled"
                    ),
                    None,
                )
                if cancelled_at is not None:  # else compacted away
                    for later in entries[cancelled_at + 1 :]:
                        touched = [c["path"] for c in later.changes if c["path"][0] == "actions"]
                        assert not touched, f"task {tid} ran actions after it was cancelled"
                for action in state.actions:
                    assert not action.status.is_open, f"cancelled task runs {action.name}"
                    if action.status == ActionStatus.SUCCESS:
                        assert not self._spec_of(action).side_effect, (
                            f"cancelled task had its side effect {action.name}"
                        )

    # -- the end: every task can be finished ----------------------------------------------
    def _finish_everything(self) -> None:
        self.world.crash_plan = None
        self.world.faults.clear()
        self._kill(0)
        self._kill(1)
        self._notice_dead("deregister")
        rt = self.rts[0]
        report = rt.recover(ADMIN)
        assert not report.errors, report.errors
        for tid, model in sorted(self.tasks.items()):
            for _ in range(6):
                state = rt.task(ADMIN, tid)
                task = state.task
                if task.status in FINAL:
                    break
                assert task.status != TaskStatus.RUNNING, f"{tid} stuck: {task.status_text}"
                if task.status == TaskStatus.NEEDS_ATTENTION:
                    before = state.to_dict()
                    self._resolve(rt, tid)
                    if rt.task(ADMIN, tid).to_dict() == before:
                        break  # e.g. a refused compensation: only a person can go on
                elif task.missing_slots:
                    missing = {k: DEFAULTS[k] for k in task.missing_slots}
                    rt.fill(Scope.user(model.user), tid, missing)
                    model.slots.update(missing)
                else:
                    assert not task.confirmed, task.status_text
                    rt.confirm(Scope.user(model.user), tid)
            state = rt.task(ADMIN, tid)
            note(f"final: {state.task.status}")
            assert state.task.status in FINAL | {TaskStatus.NEEDS_ATTENTION}, state.task.status_text
            if state.task.status == TaskStatus.DONE:
                assert state.task.progress.done == 3
                for action in state.actions:
                    assert action.status == ActionStatus.SUCCESS
                    if action.name in ("place_order", "notify"):
                        assert self.world.effect_of(action.idempotency_key) == action.output
        self.committed_slots_are_never_lost()
        self.side_effects_happen_at_most_once()
        self.journal_replays_to_the_current_row()
        self.every_task_can_be_resumed()

    def teardown(self) -> None:
        try:
            if sys.exc_info()[0] is None:  # only when every step passed
                self._finish_everything()
        finally:
            if self.memory is None:
                for rt in self.rts:
                    _hooked(rt).inner.close()
            shutil.rmtree(self.dir, ignore_errors=True)


SETTINGS = settings(
    # RELAYSTATE_STATEFUL_EXAMPLES=2000 for a long hunt; the default keeps the suite quick.
    max_examples=int(os.environ.get("RELAYSTATE_STATEFUL_EXAMPLES", "150")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class MemoryMachine(RelaystateMachine):
    backend = "memory"


RelaystateMachine.TestCase.settings = SETTINGS
MemoryMachine.TestCase.settings = SETTINGS
TestSQLiteStateful = RelaystateMachine.TestCase
TestMemoryStateful = MemoryMachine.TestCase


# -- the interleavings the machine found, pinned down --------------------------------------

READY = [("item", "apple", "apple", True), ("qty", 1, 1, True), ("tier", "basic", "basic", True)]


BACK_OUT = {"confirm_no": "user declined", "fill": "filled item", "cancel": "cancelled by the user"}


def _reasons(machine: RelaystateMachine, tid: str) -> list[str]:
    return [e.reason for e in machine.store.journal(tid, ADMIN)]


@pytest.mark.parametrize("machine_class", [RelaystateMachine, MemoryMachine])
@pytest.mark.parametrize("meanwhile", ["confirm_no", "fill", "cancel"])
def test_no_change_of_course_slips_between_the_yes_and_the_first_action(
    machine_class: type[RelaystateMachine], meanwhile: str
) -> None:
    """Process A commits the user's yes; just before A's next commit, process B declines,
    changes a slot or cancels. The commit of the yes already recorded the first action,
    running under A's lease (record + claim are one commit), so there is no moment at which
    the yes stands and the action is not yet recorded: B is refused while the action runs
    (nothing of B's lands), and A finishes the task on the values the user said yes to."""
    machine = machine_class()
    try:
        machine.first_tasks(("alice", "alice"), READY, [], None)
        tid = sorted(machine.tasks)[0]
        owner = machine.rts[0].owner
        machine.interleave(
            pick=0,
            first=0,
            a_kind="confirm",
            a_entries=READY[:1],
            b_kind=meanwhile,
            b_entries=[("item", "pear", "pear", True)],
            at=2,  # A's 1st commit is the yes (with the first action), its 2nd the result
        )
        entries = machine.store.journal(tid, ADMIN)
        yes = next(e for e in entries if e.reason.startswith("user confirmed"))
        at_yes = machine.rts[1].replay(ADMIN, tid, yes.version)
        assert at_yes.task.confirmed
        assert [(a.name, a.status, a.attempts, a.lease_owner) for a in at_yes.actions] == [
            ("quote", ActionStatus.RUNNING, 1, owner)
        ]
        assert BACK_OUT[meanwhile] not in _reasons(machine, tid), _reasons(machine, tid)
        state = machine._load(tid)
        assert state is not None and state.task.status == TaskStatus.DONE
        assert state.task.slots["item"] == "apple"
        assert [(a.name, a.status) for a in state.actions] == [
            (name, ActionStatus.SUCCESS) for name in ("quote", "place_order", "notify")
        ]
        machine.committed_slots_are_never_lost()
        machine.side_effects_happen_at_most_once()
        machine.journal_replays_to_the_current_row()
        machine.every_task_can_be_resumed()
    finally:
        machine.teardown()


@pytest.mark.parametrize("machine_class", [RelaystateMachine, MemoryMachine])
def test_a_yes_redone_on_a_cancelled_task_records_no_action(
    machine_class: type[RelaystateMachine],
) -> None:
    """Process B cancels just before the commit of A's yes (which would also record and
    claim the first action). A's commit meets a version conflict and is redone on fresh
    state: it must see the cancellation and record nothing, instead of running an action
    on a cancelled task."""
    machine = machine_class()
    try:
        machine.first_tasks(("alice", "alice"), READY, [], None)
        tid = sorted(machine.tasks)[0]
        machine.interleave(
            pick=0,
            first=0,
            a_kind="confirm",
            a_entries=READY[:1],
            b_kind="cancel",
            b_entries=[],
            at=1,  # A's 1st commit is the yes with the record and claim of the first action
        )
        state = machine._load(tid)
        assert state is not None and state.actions == []
        assert state.task.status == TaskStatus.CANCELLED
        assert not any(r.startswith("user confirmed") for r in _reasons(machine, tid))
        machine.committed_slots_are_never_lost()
        machine.side_effects_happen_at_most_once()
        machine.journal_replays_to_the_current_row()
        machine.every_task_can_be_resumed()
    finally:
        machine.teardown()
