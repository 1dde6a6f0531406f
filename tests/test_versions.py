"""Template versions and state migrations: lazy lifts journaled by ``migration``, chains,
pinned tasks, failures that leave a task as it was, dual-write, and ``migrate`` in bulk."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from relaystate import (
    ActionContext,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskStatus,
    TaskTemplate,
    all_required_slots,
)
from relaystate.errors import (
    MigrationFailed,
    OtherBuild,
    ScopeError,
    TaskLocked,
    TaskTooNew,
    TemplateError,
)
from relaystate.store import open_store

from .support import Clock

ALICE = Scope.user("alice")
ADMIN = Scope.admin("test")


def trip(version: int, *, upgrade: str = "auto", fail: bool = False) -> TaskTemplate:
    """A trip whose name field is split in version 2 and which gains a seat in version 3."""
    names = ["passenger_name"] if version == 1 else ["first_name", "last_name"]
    slots = [Slot(n) for n in names] + [Slot("city")]
    if version >= 3:
        slots.append(Slot("seat", required=False))
    t = TaskTemplate(
        "trip",
        version=version,
        upgrade=upgrade,
        slots=slots,
        stages=[
            Stage("collect", exit=all_required_slots),
            Stage("book", actions=["book"]),
            Stage("done"),
        ],
    )

    @t.action(side_effect=True, idempotent=True)
    def book(ctx: ActionContext) -> Any:
        return {"booked": dict(ctx.slots)}

    if version >= 2:

        @t.migration(from_version=1)
        def split_name(task: dict[str, Any]) -> dict[str, Any]:
            if fail:
                raise ValueError("cannot split a name")
            first, _, last = task["slots"].pop("passenger_name", "").partition(" ")
            task["slots"].update(first_name=first, last_name=last)
            return task

    if version >= 3:

        @t.migration(from_version=2)
        def add_seat(task: dict[str, Any]) -> dict[str, Any]:
            task["slots"].setdefault("seat", "aisle")
            return task

    return t


def slow_trip(upgrade: str = "auto") -> tuple[TaskTemplate, threading.Event, threading.Event]:
    """Trip version 1 whose booking waits for ``gate`` (``inside`` says it started)."""
    gate, inside = threading.Event(), threading.Event()
    slow = trip(1, upgrade=upgrade)
    del slow.actions["book"]  # the same action, slow

    @slow.action(name="book", side_effect=True, idempotent=True)
    def book(ctx: ActionContext) -> Any:
        inside.set()
        gate.wait(10)
        return {"booked": dict(ctx.slots)}

    return slow, gate, inside


OPENED: list[Runtime] = []


@pytest.fixture(autouse=True)
def _close_runtimes() -> Iterator[None]:
    """Every runtime a test opened is closed after it (a PostgreSQL pool holds threads)."""
    yield
    while OPENED:
        OPENED.pop().close()


def runtimes(url: str, *builds: tuple[str, list[TaskTemplate]], **kw: Any) -> list[Runtime]:
    """Runtimes of several builds over one store (a memory store is shared by object)."""
    stores = open_store(url) if url == "memory://" else None
    made = [
        Runtime(stores if stores is not None else open_store(url), t, build=b, clock=Clock(), **kw)
        for b, t in builds
    ]
    OPENED.extend(made)
    return made


def test_a_newer_build_lifts_a_task_on_read_and_journals_it(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(2)]))
    started = v1.start(ALICE, "trip", slots={"passenger_name": "Ann Lee"})
    assert started.task.template_version == 1 and started.task.missing_slots == ["city"]
    read = v2.task(ALICE, started.task.id)
    assert read.task.template_version == 2
    assert read.task.slots == {"first_name": "Ann", "last_name": "Lee"}
    assert read.task.missing_slots == ["city"]
    _, entries = v2.history(ADMIN, started.task.id)
    assert [(e.actor, e.reason) for e in entries][-1] == (
        "migration",
        "migrated trip from version 1 to 2",
    )
    assert v2.replay(ADMIN, started.task.id, 1).task.slots == {"passenger_name": "Ann Lee"}
    done = v2.fill(ALICE, started.task.id, {"city": "Oslo"})
    assert done.task.status == TaskStatus.DONE
    assert done.actions[0].output == {
        "booked": {"first_name": "Ann", "last_name": "Lee", "city": "Oslo"}
    }
    with pytest.raises(TaskTooNew, match="version 2"):  # the old build leaves it alone
        v1.fill(ALICE, started.task.id, {"city": "Rome"})
    assert v2.task(ALICE, started.task.id).task.slots["city"] == "Oslo"


def test_a_chain_of_migrations_applies_in_order(any_store_url: str) -> None:
    v1, v3 = runtimes(any_store_url, ("v1", [trip(1)]), ("v3", [trip(2), trip(3)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Bo Ek"}).task.id
    lifted = v3.task(ALICE, tid).task
    assert lifted.template_version == 3
    assert lifted.slots == {"first_name": "Bo", "last_name": "Ek", "seat": "aisle"}
    _, entries = v3.history(ADMIN, tid)
    assert [e.actor for e in entries] == ["user:alice", "migration"]  # one commit, both steps


def test_a_failing_migration_leaves_the_task_and_marks_it(any_store_url: str) -> None:
    v1, broken = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(2, fail=True)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Cy"}).task.id
    before = v1.task(ALICE, tid).task
    with pytest.raises(MigrationFailed, match="cannot split a name"):
        broken.fill(ALICE, tid, {"city": "Oslo"})
    after = broken.task(ALICE, tid).task  # reading shows it as stored, and why
    assert after.slots == before.slots and after.template_version == 1
    assert after.status == TaskStatus.NEEDS_ATTENTION and "cannot split" in after.status_text
    with pytest.raises(MigrationFailed):  # the same build does not try (and write) again
        broken.fill(ALICE, tid, {"city": "Oslo"})
    assert len(broken.history(ADMIN, tid)[1]) == 2
    assert broken.upgraded(ALICE, [v1.task(ALICE, tid)]) == []  # a turn leaves it out
    fixed = runtimes(any_store_url, ("v2b", [trip(2)]))[0] if any_store_url != "memory://" else None
    if fixed is not None:  # a build with a working migration lifts it and it goes on
        state = fixed.fill(ALICE, tid, {"city": "Oslo"})
        assert state.task.status == TaskStatus.DONE and state.task.template_version == 2


def test_a_migration_may_not_change_what_identifies_the_task(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(2)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Di"}).task.id
    rogue = trip(2)
    rogue.migrations[1] = lambda task: {**task, "user_id": "mallory"}
    (other,) = runtimes(any_store_url, ("v2r", [rogue])) if any_store_url != "memory://" else [v2]
    if other is v2:
        v2.versions.newest["trip"].migrations[1] = rogue.migrations[1]
    with pytest.raises(MigrationFailed, match="changed 'user_id'"):
        other.advance(ALICE, tid)
    assert v1.task(ALICE, tid).task.user_id == "alice"


def test_pinned_tasks_keep_their_version_and_their_build(any_store_url: str) -> None:
    v1, v2 = runtimes(
        any_store_url,
        ("v1", [trip(1, upgrade="pinned")]),
        ("v2", [trip(1, upgrade="pinned"), trip(2)]),
    )
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Ed Fox"}).task.id
    assert v1.task(ALICE, tid).task.pinned
    state = v2.fill(ALICE, tid, {"city": "Oslo"})  # v2 takes the user's words...
    assert state.task.template_version == 1 and state.task.slots["passenger_name"] == "Ed Fox"
    assert state.task.status == TaskStatus.RUNNING and state.actions == []  # ...not its work
    (item,) = v2.stores.coordination.queued_work()
    assert item.build == "v1" and item.task_id == tid
    assert v1.advance(ADMIN, tid).task.status == TaskStatus.DONE  # its own build runs it
    assert v2.stores.coordination.queued_work() == []
    new = v2.start(ALICE, "trip", slots={"first_name": "F", "last_name": "G", "city": "X"})
    assert new.task.template_version == 2 and not new.task.pinned


def test_a_pinned_task_whose_version_is_gone_is_refused_clearly(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1, upgrade="pinned")]), ("v2", [trip(2)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Gus"}).task.id
    with pytest.raises(OtherBuild, match="pinned"):  # 503 over HTTP: a proxy asks v1
        v2.fill(ALICE, tid, {"city": "Oslo"})


def test_an_operator_unpins_a_task_whose_build_is_gone(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1, upgrade="pinned")]), ("v2", [trip(2)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Ida Holm"}).task.id
    with pytest.raises(ScopeError):  # an operator's decision, not a user's
        v2.unpin(ALICE, tid, reason="v1 is gone")
    state = v2.unpin(ADMIN, tid, reason="build v1 retired for good")
    assert not state.task.pinned and state.task.template_version == 2  # lifted at once
    assert state.task.slots == {"first_name": "Ida", "last_name": "Holm"}
    _, entries = v2.history(ADMIN, tid)
    assert [(e.actor, e.reason) for e in entries][-2:] == [
        ("admin:test", "unpinned from build 'v1' by admin:test: build v1 retired for good"),
        ("migration", "migrated trip from version 1 to 2"),
    ]
    assert v2.replay(ADMIN, tid, 1).task.pinned  # the journal keeps the pin it had
    done = v2.fill(ALICE, tid, {"city": "Oslo"})
    assert done.task.status == TaskStatus.DONE and done.actions[0].status == "success"
    again = v2.unpin(ADMIN, tid, reason="twice")  # nothing pinned: nothing written
    assert again.task.version == done.task.version


def test_unpinning_waits_for_an_action_running_in_its_build(any_store_url: str) -> None:
    slow, gate, inside = slow_trip(upgrade="pinned")
    v1, v2 = runtimes(any_store_url, ("v1", [slow]), ("v2", [trip(2)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Jo Kim"}).task.id
    worker = threading.Thread(target=lambda: v1.fill(ALICE, tid, {"city": "Oslo"}))
    worker.start()
    assert inside.wait(10)
    with pytest.raises(TaskLocked, match="alive"):  # its build is not gone: it is running it
        v2.unpin(ADMIN, tid, reason="too early")
    gate.set()
    worker.join(10)
    state = v2.unpin(ADMIN, tid, reason="now")
    assert not state.task.pinned and state.task.status == TaskStatus.DONE


def test_dual_write_lifts_nothing_and_starts_on_the_old_version(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(1), trip(2)]), dual_write=True)
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Hal Ito"}).task.id
    assert v2.fill(ALICE, tid, {"city": "Oslo"}).task.template_version == 1
    new = v2.start(ALICE, "trip", slots={"passenger_name": "Ivy Jo"})
    assert new.task.template_version == 1
    assert v2.templates["trip"].version == 1  # what a turn reads a new task's slots by
    assert v1.fill(ALICE, new.task.id, {"city": "Rome"}).task.status == TaskStatus.DONE


def test_migrate_in_bulk_counts_per_type_and_version(any_store_url: str) -> None:
    v1, v2 = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(2)]))
    ids = [v1.start(ALICE, "trip", slots={"passenger_name": f"P{i} Q"}).task.id for i in range(5)]
    v1.fill(ALICE, ids[0], {"city": "Oslo"})  # finished tasks are lifted too
    dry = v2.migrate(ADMIN, dry_run=True)
    assert dry.lifted[("trip", 1)] == 5 and dry.examined == 5
    assert all(v1.task(ALICE, i).task.template_version == 1 for i in ids)  # nothing written
    seen: list[str] = []
    done = v2.migrate(ADMIN, on_task=lambda t, o: seen.append(o))
    assert done.lifted[("trip", 1)] == 5 and seen == ["lifted"] * 5
    assert v2.migrate(ADMIN).current == 5  # a second run finds nothing to do
    assert all(v2.task(ALICE, i).task.slots["last_name"] == "Q" for i in ids)


def test_migrate_reports_failures_without_writing_them_twice(any_store_url: str) -> None:
    v1, broken = runtimes(any_store_url, ("v1", [trip(1)]), ("v2", [trip(2, fail=True)]))
    v1.start(ALICE, "trip", slots={"passenger_name": "Kim"})
    report = broken.migrate(ADMIN)
    assert report.failed[("trip", 1)] == 1 and "cannot split" in report.reasons[("trip", 1)]
    assert broken.migrate(ADMIN).failed[("trip", 1)] == 1


def test_templates_refuse_bad_versions_and_migrations() -> None:
    with pytest.raises(TemplateError, match="version"):
        TaskTemplate("x", version=0, stages=[Stage("a")])
    with pytest.raises(TemplateError, match="upgrade"):
        TaskTemplate("x", upgrade="sometimes", stages=[Stage("a")])
    t = TaskTemplate("x", version=2, stages=[Stage("a")])
    with pytest.raises(TemplateError, match="older version"):
        t.migration(from_version=2)
    t.migration(from_version=1)(lambda d: d)
    with pytest.raises(TemplateError, match="two migrations"):
        t.migration(from_version=1)(lambda d: d)


def test_an_action_running_in_an_older_build_settles_there_before_the_lift(
    any_store_url: str,
) -> None:
    """A newer build that does not carry the task's version neither lifts it nor writes
    while the older build's action runs (that build must still record its result)."""
    slow, gate, inside = slow_trip()
    v1, v2 = runtimes(any_store_url, ("v1", [slow]), ("v2", [trip(2)]))
    tid = v1.start(ALICE, "trip", slots={"passenger_name": "Lu Ma"}).task.id
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(s=v1.fill(ALICE, tid, {"city": "Oslo"})))
    worker.start()
    assert inside.wait(10)
    with pytest.raises(OtherBuild, match="once it settles") as raised:
        v2.fill(ALICE, tid, {"city": "Rome"})
    assert raised.value.until is not None  # when to try again: the action's lease
    assert v2.migrate(ADMIN).deferred[("trip", 1)] == 1  # nor in bulk
    gate.set()
    worker.join(10)
    assert result["s"].task.status == TaskStatus.DONE  # v1 recorded its own result
    assert v2.task(ALICE, tid).task.template_version == 2  # lifted once settled
