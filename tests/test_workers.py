"""Workers over the store's queue: a server that leaves Actions to workers, retries that
wait in the queue, pinned work, a holder that died mid-action, drain, and the operator's
view of builds and workers. (Real processes killed with SIGKILL: tests/upgrade/.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from relaystate import (
    ActionContext,
    Outcome,
    Retry,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskStatus,
    TaskTemplate,
    all_required_slots,
)
from relaystate.demo.ledger import Ledger
from relaystate.errors import MigrationFailed, StoreUnavailable, TaskTooNew
from relaystate.store import open_store
from relaystate.workers.worker import Worker

from .support import Clock

ALICE = Scope.user("alice")
ADMIN = Scope.admin("test")


class Crash(BaseException):
    """The process dying inside the action."""


def pay(
    ledger: Ledger,
    *,
    upgrade: str = "auto",
    plan: list[str] | None = None,
    gate: threading.Event | None = None,
) -> TaskTemplate:
    """A payment; ``plan`` says what each attempt does: "ok", "flaky" (retryable error),
    "crash" (the process dies after the effect landed), "block" (waits for ``gate``)."""
    t = TaskTemplate(
        "pay",
        upgrade=upgrade,
        slots=[Slot("amount", kind="number")],
        stages=[Stage("collect", exit=all_required_slots), Stage("paying", actions=["charge"])],
    )
    steps = plan if plan is not None else []

    @t.action(
        side_effect=True,
        idempotent=True,
        retry=Retry(max_attempts=3, initial_interval=60, multiplier=1),
    )
    def charge(ctx: ActionContext) -> Any:
        step = steps.pop(0) if steps else "ok"
        if step == "flaky":
            raise ConnectionError("downstream busy")
        if step == "block" and gate is not None:
            gate.wait(10)
        effect = ledger.apply(ctx.idempotency_key, "charge", {}, deduplicate=False)
        if step == "crash":
            raise Crash()
        return effect

    @charge.check
    def charged(ctx: ActionContext) -> Outcome:
        found = ledger.status(ctx.idempotency_key)
        return Outcome.succeeded(found) if found else Outcome.not_found()

    return t


OPENED: list[Runtime] = []


@pytest.fixture(autouse=True)
def _close_runtimes() -> Iterator[None]:
    """Every runtime a test opened is closed after it (a PostgreSQL pool holds threads)."""
    yield
    while OPENED:
        OPENED.pop().close()


class Fleet:
    """Runtimes of several processes over one store, on one test clock."""

    def __init__(self, url: str) -> None:
        self.url, self.clock = url, Clock()
        self.shared = open_store(url) if url == "memory://" else None

    def runtime(self, templates: list[TaskTemplate], **kw: Any) -> Runtime:
        stores = self.shared if self.shared is not None else open_store(self.url)
        made = Runtime(stores, templates, clock=self.clock, sleep=self.clock.sleep, **kw)
        OPENED.append(made)
        return made


def effects(ledger: Ledger) -> list[str]:
    """One key per effect made (a key twice: a duplicate)."""
    return [e["idempotency_key"] for e in ledger.entries() for _ in range(e["effects"])]


def test_a_queue_server_leaves_actions_to_a_worker(any_store_url: str, ledger: Ledger) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    state = api.start(ALICE, "pay", slots={"amount": 5})
    assert state.task.status == TaskStatus.RUNNING and state.actions == []  # nothing ran here
    (item,) = api.stores.coordination.queued_work()
    assert item.task_id == state.task.id and item.due_at == state.task.due_at
    worker = Worker(fleet.runtime([pay(ledger)], build="v1"))
    assert worker.once() == 1
    done = api.task(ALICE, state.task.id)
    assert done.task.status == TaskStatus.DONE and done.task.due_at is None
    assert api.stores.coordination.queued_work() == [] and len(effects(ledger)) == 1
    assert worker.once() == 0 and len(effects(ledger)) == 1


def test_a_retry_waits_in_the_queue_until_its_backoff_is_over(
    any_store_url: str, ledger: Ledger
) -> None:
    fleet = Fleet(any_store_url)
    rt = fleet.runtime([pay(ledger, plan=["flaky"])], build="v1")
    state = rt.start(ALICE, "pay", slots={"amount": 5})
    assert state.task.status == TaskStatus.RUNNING  # waits 60 s: more than it stays for
    (item,) = rt.stores.coordination.queued_work()
    assert item.due_at == state.actions[0].next_attempt_at
    worker = Worker(fleet.runtime([pay(ledger)], build="v1"))
    assert worker.once() == 0  # not due yet
    fleet.clock.advance(seconds=61)
    assert worker.once() == 1
    assert rt.task(ALICE, state.task.id).task.status == TaskStatus.DONE
    assert worker.report.waits == [1.0]  # claimed a second after it was due


def test_pinned_work_waits_for_its_own_build(any_store_url: str, ledger: Ledger) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger, upgrade="pinned")], build="v1", execute="queue")
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    newer = Worker(fleet.runtime([pay(ledger, upgrade="pinned")], build="v2"))
    assert newer.once() == 0
    builds = {b.build: b for b in api.builds(ADMIN)}
    assert builds["v1"].pinned_open == 1 and not builds["v1"].can_retire
    assert builds["v1"].queued_pinned == 1
    assert Worker(fleet.runtime([pay(ledger, upgrade="pinned")], build="v1")).once() == 1
    assert api.task(ALICE, tid).task.status == TaskStatus.DONE
    assert "v1" not in {b.build for b in api.builds(ADMIN)}  # no process, nothing open


def test_a_holder_that_died_mid_action_is_reconciled_not_rerun(
    any_store_url: str, ledger: Ledger
) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    doomed = Worker(fleet.runtime([pay(ledger, plan=["crash"])], build="v1"))
    with pytest.raises(Crash):
        doomed.once()  # the effect landed, the process "died" before recording it
    assert api.task(ALICE, tid).actions[0].status == "running"
    other = Worker(fleet.runtime([pay(ledger)], build="v1"))
    assert other.once() == 0  # the holder may be alive: its claim and lease stand
    doomed.runtime.stores.coordination.deregister_worker(doomed.presence.info, fleet.clock())
    assert other.once() == 1  # a stopped holder's work is due at once
    state = api.task(ALICE, tid)
    assert state.task.status == TaskStatus.DONE and state.actions[0].attempts == 1
    assert len(effects(ledger)) == 1  # the check found the effect: no second charge


def test_a_drive_that_fails_is_given_back_for_later(any_store_url: str, ledger: Ledger) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    w = Worker(fleet.runtime([pay(ledger)], build="v1"))
    w.runtime.advance = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bug"))  # type: ignore[method-assign]
    assert w.once() == 1 and w.report.errors == 1
    (item,) = api.stores.coordination.queued_work()
    assert item.owner is None and item.due_at > fleet.clock()
    fleet.clock.advance(seconds=6)
    assert Worker(fleet.runtime([pay(ledger)], build="v1")).once() == 1
    assert api.task(ALICE, tid).task.status == TaskStatus.DONE


def test_a_worker_drains_and_deregisters_when_told_to_stop(
    any_store_url: str, ledger: Ledger
) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    w = Worker(fleet.runtime([pay(ledger)], build="v1"), poll=0.01)
    stop = threading.Event()
    thread = threading.Thread(target=w.run, args=(stop,))
    thread.start()
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    for _ in range(500):
        if api.task(ALICE, tid).task.status == TaskStatus.DONE:
            break
        stop.wait(0.01)
    listed = api.workers(ADMIN)
    assert [(x.info.build, x.role) for x in listed] == [("v1", "worker")]
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and w.report.done == 1
    assert api.workers(ADMIN) == [] and len(api.workers(ADMIN, include_stopped=True)) == 1
    assert api.task(ALICE, tid).task.status == TaskStatus.DONE


def test_a_worker_runs_actions_itself() -> None:
    with pytest.raises(ValueError, match="inline"):
        Worker(Runtime(open_store("memory://"), [], execute="queue"))


CLAIMER = """
import json, os, sys, time
from datetime import datetime, timedelta, UTC
from relaystate.store import open_store
store = open_store(sys.argv[1])
now = datetime(2030, 1, 1, tzinfo=UTC)
open(sys.argv[3] + "." + sys.argv[2], "w").close()  # ready
while not os.path.exists(sys.argv[3]):  # all start claiming together
    time.sleep(0.01)
got = []
while batch := store.coordination.claim_work(
    sys.argv[2], build="v1", runnable={"pay": [1]}, now=now, until=now + timedelta(hours=1),
    limit=1,
):
    got += [w.task_id for w in batch]
    time.sleep(0.005)  # a worker drives what it claimed before it claims again
print(json.dumps(got))
"""


def test_processes_sharing_a_sqlite_file_never_claim_the_same_item(
    tmp_path: Path, ledger: Ledger
) -> None:
    import json
    import subprocess
    import sys
    import time

    url = f"sqlite:///{tmp_path}/shared.db"
    api = Runtime(open_store(url), [pay(ledger)], build="v1", execute="queue")
    OPENED.append(api)
    ids = sorted(api.start(ALICE, "pay", slots={"amount": i}).task.id for i in range(1, 41))
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, url, f"w{i}", str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    while len(list(tmp_path.glob("go.w*"))) < 4:
        time.sleep(0.01)
    go.touch()
    taken = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(t for got in taken for t in got) == ids  # every item once
    assert sum(1 for got in taken if got) >= 2  # and they really shared the work


def test_a_slow_action_of_a_live_holder_is_left_alone(any_store_url: str, ledger: Ledger) -> None:
    """The holder's heartbeat extends its claim and its action's lease: past the first
    lease, neither another worker nor a turn in another process takes the action over."""
    from relaystate.workers.presence import Presence

    fleet = Fleet(any_store_url)
    lease = timedelta(seconds=30)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    gate = threading.Event()
    holder = Worker(fleet.runtime([pay(ledger, plan=["block"], gate=gate)], lease=lease))
    thread = threading.Thread(target=holder.once)
    thread.start()
    for _ in range(500):  # until the holder is inside the action
        if api.task(ALICE, tid).actions:
            break
        gate.wait(0.01)
    fleet.clock.advance(seconds=25)
    Presence(holder.runtime, lease=lease).beat()  # alive: its leases now end at +55 s
    fleet.clock.advance(seconds=20)  # past the first lease (+30 s), within the extended one
    assert Worker(fleet.runtime([pay(ledger)], lease=lease)).once() == 0
    inline = fleet.runtime([pay(ledger)], lease=lease)  # an embedded server's turn
    assert inline.advance(ADMIN, tid).actions[0].status == "running"
    gate.set()
    thread.join(10)
    state = api.task(ALICE, tid)
    assert state.task.status == TaskStatus.DONE and state.actions[0].attempts == 1
    assert state.actions[0].checks == 0 and len(effects(ledger)) == 1


def test_a_refused_give_back_is_retried_and_the_loop_goes_on(
    any_store_url: str, ledger: Ledger
) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    first = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    w = Worker(fleet.runtime([pay(ledger)], build="v1"))
    coordination = w.runtime.stores.coordination
    real = coordination.release_work
    calls: list[str] = []

    def flaky(task_id: str, owner: str, **kw: Any) -> None:
        calls.append(task_id)
        if len(calls) == 1:
            raise StoreUnavailable("the store is away")
        real(task_id, owner, **kw)

    coordination.release_work = flaky  # type: ignore[method-assign]
    try:
        assert w.once() == 1  # driven; its give-back failed and is kept
        assert api.task(ALICE, first).task.status == TaskStatus.DONE
        second = api.start(ALICE, "pay", slots={"amount": 6}).task.id
        stop = threading.Event()
        w.poll = 0.01
        thread = threading.Thread(target=w._loop, args=(stop,))
        thread.start()
        for _ in range(500):
            if api.task(ALICE, second).task.status == TaskStatus.DONE:
                break
            stop.wait(0.01)
        stop.set()
        thread.join(5)
    finally:
        coordination.release_work = real  # type: ignore[method-assign]
    assert api.task(ALICE, second).task.status == TaskStatus.DONE  # the loop went on
    assert calls[:2] == [first, first]  # the failed give-back was retried first


def test_work_this_build_may_not_run_is_given_back_for_later(
    any_store_url: str, ledger: Ledger
) -> None:
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    tid = api.start(ALICE, "pay", slots={"amount": 5}).task.id
    w = Worker(fleet.runtime([pay(ledger)], build="v1"))
    w.runtime.advance = lambda *a, **k: (_ for _ in ()).throw(  # type: ignore[method-assign]
        MigrationFailed("marked for a person")
    )
    assert w.once() == 1 and w.once() == 0  # not claimed again at once: no hot loop
    (item,) = api.stores.coordination.queued_work()
    assert item.due_at >= fleet.clock() + timedelta(seconds=59) and item.task_id == tid


def test_heartbeats_come_at_least_every_30_seconds() -> None:
    from relaystate.workers.presence import Presence

    rt = Runtime(open_store("memory://"), [])
    OPENED.append(rt)
    assert Presence(rt, lease=timedelta(seconds=300)).interval == 30
    assert Presence(rt, lease=timedelta(seconds=30)).interval == 10


def test_work_stored_before_the_queue_is_queued_when_a_worker_starts(
    tmp_path: Path, ledger: Ledger
) -> None:
    import sqlite3

    fleet = Fleet(f"sqlite:///{tmp_path}/old.db")
    rt = fleet.runtime([pay(ledger, plan=["flaky"])], build="v1")
    tid = rt.start(ALICE, "pay", slots={"amount": 5}).task.id  # waits 60 s for a retry
    db = sqlite3.connect(tmp_path / "old.db")
    with db:
        db.execute("DELETE FROM work")  # as a build without the queue left it
    db.close()
    w = Worker(fleet.runtime([pay(ledger)], build="v1"), poll=0.01)
    assert w.runtime.requeue(ADMIN) == 1 and w.runtime.requeue(ADMIN) == 0
    fleet.clock.advance(seconds=61)
    assert w.once() == 1
    assert rt.task(ALICE, tid).task.status == TaskStatus.DONE


def test_work_a_newer_build_took_over_is_given_back_due_at_once(
    any_store_url: str, ledger: Ledger
) -> None:
    """Lifted meanwhile by a newer build: the row now names the new version, so only that
    build's workers take it, and they must not wait (the handover measured 61 s once)."""
    fleet = Fleet(any_store_url)
    api = fleet.runtime([pay(ledger)], build="v1", execute="queue")
    api.start(ALICE, "pay", slots={"amount": 5})
    w = Worker(fleet.runtime([pay(ledger)], build="v1"))
    w.runtime.advance = lambda *a, **k: (_ for _ in ()).throw(  # type: ignore[method-assign]
        TaskTooNew("lifted to version 2 meanwhile")
    )
    assert w.once() == 1
    (item,) = api.stores.coordination.queued_work()
    assert item.owner is None and item.due_at <= fleet.clock()
