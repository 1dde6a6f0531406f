"""The work queue (part of the coordination role): rows written by task commits, claimed
by workers of the right build and version, never by two at once."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta

import pytest

from ..errors import VersionConflict
from ..model import WorkerInfo, WorkItem
from ..scope import Scope
from ..store import Coordination, Stores
from .fixtures import Conformance
from .records import T0, change, create, new_task

LATER = T0 + timedelta(minutes=1)
ADMIN = Scope.admin("test")
RUNS = {"demo": [1, 2]}


def item(task_id: str, due: int = 0, **fields: object) -> WorkItem:
    base = WorkItem(task_id, "alice", "demo", 1, None, T0 + timedelta(seconds=due))
    return replace(base, **fields)  # type: ignore[arg-type]


def queue(bundle: Stores, task_id: str, work: WorkItem | None, **fields: object) -> None:
    """Create a task whose commit writes ``work`` as its queue row."""
    create(bundle, new_task(task_id, **fields), requeue=True, work=work)  # type: ignore[arg-type]


def claim(c: Coordination, owner: str, **kw: object) -> list[str]:
    args: dict[str, object] = {"build": "b1", "runnable": RUNS, "now": T0, "until": LATER}
    args.update(kw)
    return [w.task_id for w in c.claim_work(owner, limit=10, **args)]  # type: ignore[arg-type]


class WorkQueueTests(Conformance):
    """The work queue: a commit writes its row, claims split the due items and never hand
    one out twice."""

    @pytest.fixture
    def coordination(self, bundle: Stores) -> Coordination:
        return bundle.coordination

    def test_a_commit_writes_and_removes_its_queue_row(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        queue(bundle, "t1", item("t1"))
        assert [w.task_id for w in coordination.queued_work()] == ["t1"]
        before = bundle.tasks.load("t1", ADMIN)
        assert before is not None
        moved = change(bundle, before, lambda s: None, requeue=True, work=item("t1", due=30))
        assert coordination.queued_work()[0].due_at == T0 + timedelta(seconds=30)
        change(bundle, moved, lambda s: None, requeue=True, work=None)
        assert coordination.queued_work() == []

    def test_a_failed_commit_leaves_the_queue_as_it_was(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        queue(bundle, "t1", item("t1"))
        with pytest.raises(VersionConflict):  # the task exists: the commit conflicts
            queue(bundle, "t1", item("t1", due=99))
        assert [w.due_at for w in coordination.queued_work()] == [T0]

    def test_claims_take_due_items_earliest_first_and_never_twice(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        for i, due in enumerate((5, 0, 2, 120)):
            queue(bundle, f"t{i}", item(f"t{i}", due=due))
        now = T0 + timedelta(seconds=10)
        assert claim(coordination, "a", now=now, until=now + timedelta(seconds=30)) == [
            "t1",
            "t2",
            "t0",
        ]  # t3 is not due yet
        assert claim(coordination, "b", now=now) == []  # held by a
        assert {w.owner for w in coordination.queued_work()[:3]} == {"a"}
        coordination.release_work("t2", "b")  # not b's: nothing happens
        coordination.release_work("t2", "a", due_at=now + timedelta(seconds=60))
        assert claim(coordination, "b", now=now) == []  # released, but due later
        assert claim(coordination, "b", now=now + timedelta(seconds=41)) == [
            "t1",
            "t0",
        ]  # a's ran out

    def test_pinned_items_go_only_to_their_build_and_versions_to_who_runs_them(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        queue(bundle, "p1", item("p1", build="b1"))
        queue(bundle, "v2", item("v2", template_version=2))
        queue(bundle, "x", item("x", type="other"))
        assert claim(coordination, "new", build="b2", runnable={"demo": [1]}) == []
        assert claim(coordination, "new", build="b2", runnable={"demo": [2]}) == ["v2"]
        assert claim(coordination, "old", build="b1", runnable={"demo": [1]}) == ["p1"]
        assert claim(coordination, "old", build="b1", runnable={}) == []

    def test_a_gone_holders_items_are_free_and_due_at_once(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        queue(bundle, "t1", item("t1"))
        assert claim(coordination, "dead") == ["t1"]
        assert coordination.work_holders(T0) == frozenset({"dead"})
        # the task's next due time (the action's lease) is later, but its holder is gone
        before = bundle.tasks.load("t1", ADMIN)
        assert before is not None
        change(bundle, before, lambda s: None, requeue=True, work=item("t1", due=300))
        assert coordination.queued_work()[0].owner == "dead"  # a commit keeps the claim
        assert claim(coordination, "b") == []
        assert claim(coordination, "b", gone={"dead"}) == ["t1"]
        assert coordination.extend_work("b", LATER + timedelta(hours=1)) == 1
        assert coordination.work_holders(LATER) == frozenset({"b"})

    def test_concurrent_claimers_split_the_queue(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        ids = [f"t{i:03d}" for i in range(60)]
        for task_id in ids:
            queue(bundle, task_id, item(task_id))
        taken: dict[str, list[str]] = {}

        def run(owner: str) -> None:
            got: list[str] = []
            while batch := [
                w.task_id
                for w in coordination.claim_work(
                    owner, build="b1", runnable=RUNS, now=T0, until=LATER, limit=3
                )
            ]:
                got += batch
            taken[owner] = got

        threads = [threading.Thread(target=run, args=(f"w{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        every = [t for got in taken.values() for t in got]
        assert sorted(every) == ids  # each item once, none lost

    def test_heartbeats_and_the_workers_list(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        w1 = WorkerInfo("w1", "host", 1, "b1", T0)
        w2 = WorkerInfo("w2", "host", 2, "b2", T0 + timedelta(seconds=1))
        coordination.heartbeat(w1, T0 + timedelta(seconds=5))
        coordination.heartbeat(w2, T0 + timedelta(seconds=6), role="api")
        queue(bundle, "t1", item("t1"))
        claim(coordination, "w1")
        found = {w.info.id: w for w in coordination.workers()}
        assert found["w1"].role == "worker" and found["w1"].claimed == 1
        assert found["w1"].heartbeat_at == T0 + timedelta(seconds=5)
        assert found["w2"].role == "api" and found["w2"].info.build == "b2"
        coordination.deregister_worker(w1, LATER)
        assert [w.info.id for w in coordination.workers()] == ["w2"]
        assert {w.info.id for w in coordination.workers(include_stopped=True)} == {"w1", "w2"}

    def test_rows_are_added_only_for_tasks_that_have_none(
        self, coordination: Coordination, bundle: Stores
    ) -> None:
        queue(bundle, "t1", item("t1", due=5))
        queue(bundle, "t2", None)  # a task stored with no row (a build from before the queue)
        added = coordination.enqueue_work([item("t1", due=99), item("t2", due=7)])
        assert added == 1
        assert [(w.task_id, w.due_at) for w in coordination.queued_work()] == [
            ("t1", T0 + timedelta(seconds=5)),  # kept as it was
            ("t2", T0 + timedelta(seconds=7)),
        ]
        assert coordination.enqueue_work([]) == 0
