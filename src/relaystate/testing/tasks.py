"""The task role: commit, scoped reads, optimistic locking, actions, journal, compaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from ..errors import DuplicateKey, VersionConflict
from ..model import ActionStatus, Snapshot, TaskState, TaskStatus
from ..scope import Scope
from ..store import Stores, TaskStore
from ..store.roles import DURABLE, SHARED
from .fixtures import Conformance
from .records import ADMIN, ALICE, MALLORY, T0, action, change, create, new_task


def set_n(i: int) -> Callable[[TaskState], object]:
    """An edit that sets slot ``n`` to ``i``."""
    return lambda s: s.task.slots.update(n=i)


class TaskRoleTests(Conformance):
    """What every task store must keep: commits, scoped reads, optimistic locking, actions
    and their keys, the journal and its compaction."""

    @pytest.fixture
    def tasks(self, bundle: Stores) -> TaskStore:
        return bundle.tasks

    def test_create_and_read_back(self, tasks: TaskStore) -> None:
        state = create(tasks, new_task(slots={"origin": "北京"}))
        loaded = tasks.load("t1", ALICE)
        assert loaded is not None
        assert loaded.to_dict() == state.to_dict()

    def test_reads_are_scoped_by_user(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        change(tasks, first, lambda s: s.actions.append(action(1)))
        assert tasks.load("t1", MALLORY) is None
        assert tasks.load_many(["t1"], MALLORY) == []
        assert tasks.list_tasks(MALLORY) == []
        assert tasks.find_action("t1:1", MALLORY) is None
        assert tasks.journal("t1", MALLORY) == []
        loaded = tasks.load("t1", ADMIN)  # the explicit admin scope sees every user's
        assert loaded is not None and loaded.task.user_id == "alice"
        assert tasks.find_action("t1:1", ALICE) is not None
        assert [e.version for e in tasks.journal("t1", ALICE)] == [1, 2]

    def test_load_many_keeps_order_filters_and_skips_unknown(self, tasks: TaskStore) -> None:
        for i, status in enumerate([TaskStatus.WAITING_USER, TaskStatus.DONE, TaskStatus.RUNNING]):
            state = new_task(f"t{i}", status=status)
            state.actions.append(action(1, task_id=f"t{i}"))
            create(tasks, state)
        create(tasks, new_task("bobs", user="bob"))
        found = tasks.load_many(["t2", "nope", "t0", "bobs", "t1", "t2"], ALICE)
        assert [s.task.id for s in found] == ["t2", "t0", "t1"]
        assert all(len(s.actions) == 1 and s.actions[0].task_id == s.task.id for s in found)
        open_ = tasks.load_many(["t0", "t1", "t2"], ALICE, statuses=[TaskStatus.WAITING_USER])
        assert [s.task.id for s in open_] == ["t0"]
        assert tasks.load_many(["t0"], ALICE, statuses=[]) == []
        assert tasks.load_many([], ALICE) == []

    def test_stale_version_conflicts_and_changes_nothing(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        change(tasks, first, lambda s: s.task.slots.update(origin="Beijing"))
        with pytest.raises(VersionConflict) as info:
            change(tasks, first, lambda s: s.task.slots.update(origin="Paris"))
        assert info.value.expected == 1 and info.value.actual == 2
        stored = tasks.load("t1", ALICE)
        assert stored is not None and stored.task.slots == {"origin": "Beijing"}
        assert stored.task.version == 2
        assert [e.version for e in tasks.journal("t1", ADMIN)] == [1, 2]

    def test_creating_an_existing_task_conflicts(self, tasks: TaskStore) -> None:
        create(tasks, new_task())
        with pytest.raises(VersionConflict):
            create(tasks, new_task(slots={"x": 1}))
        stored = tasks.load("t1", ADMIN)
        assert stored is not None and stored.task.slots == {}

    def test_a_task_cannot_be_moved_to_another_user(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        with pytest.raises(VersionConflict):
            change(tasks, first, lambda s: setattr(s.task, "user_id", "mallory"))
        assert tasks.load("t1", ALICE) is not None

    def test_actions_are_upserted_with_the_task(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        second = change(tasks, first, lambda s: s.actions.append(action(1)))
        third = change(
            tasks, second, lambda s: setattr(s.action(1), "status", ActionStatus.SUCCESS)
        )
        loaded = tasks.load("t1", ADMIN)
        assert loaded is not None and [a.status for a in loaded.actions] == [ActionStatus.SUCCESS]
        assert tasks.find_action("t1:1", ADMIN) == third.action(1)
        assert tasks.find_action("nope", ADMIN) is None

    def test_duplicate_idempotency_key_rolls_back_the_whole_commit(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        second = change(tasks, first, lambda s: s.actions.append(action(1, key="k")))

        def reuse_the_key(s: TaskState) -> None:
            s.actions.append(action(2, key="k"))
            s.task.slots.update(x=1)

        with pytest.raises(DuplicateKey):
            change(tasks, second, reuse_the_key)
        stored = tasks.load("t1", ADMIN)
        assert stored is not None and stored.task.version == 2 and stored.task.slots == {}
        assert len(stored.actions) == 1
        assert [e.version for e in tasks.journal("t1", ADMIN)] == [1, 2]

    def test_list_tasks_filters_orders_and_limits(self, tasks: TaskStore) -> None:
        for i in range(5):
            state = new_task(f"t{i}", status=TaskStatus.DONE if i % 2 else TaskStatus.WAITING_USER)
            state.task.updated_at = T0 + timedelta(minutes=i)
            create(tasks, state)
        create(tasks, new_task("other", user="bob"))
        assert [t.id for t in tasks.list_tasks(ALICE)] == ["t4", "t3", "t2", "t1", "t0"]
        waiting = tasks.list_tasks(ALICE, statuses=[TaskStatus.WAITING_USER])
        assert [t.id for t in waiting] == ["t4", "t2", "t0"]
        assert [t.id for t in tasks.list_tasks(ALICE, limit=2)] == ["t4", "t3"]
        assert tasks.list_tasks(ALICE, statuses=[]) == []
        assert {t.id for t in tasks.list_tasks(ADMIN)} == {"t0", "t1", "t2", "t3", "t4", "other"}
        assert [t.id for t in tasks.list_tasks(Scope.user("bob"))] == ["other"]

    def test_open_actions_are_the_unsettled_ones(self, tasks: TaskStore) -> None:
        first = create(tasks, new_task())
        change(
            tasks,
            first,
            lambda s: s.actions.extend(
                [
                    action(1, status=ActionStatus.SUCCESS),
                    action(2, status=ActionStatus.RUNNING, lease_expires_at=T0),
                    action(3, status=ActionStatus.UNKNOWN),
                    action(4, status=ActionStatus.FAILED),
                    action(5, status=ActionStatus.PENDING),
                ]
            ),
        )
        assert sorted(a.seq for a in tasks.open_actions()) == [2, 3, 5]
        assert len(tasks.open_actions(limit=1)) == 1

    def test_open_actions_page_by_id_to_the_end(self, tasks: TaskStore) -> None:
        state = create(tasks, new_task())
        change(
            tasks,
            state,
            lambda s: s.actions.extend(
                action(i, status=ActionStatus.UNKNOWN if i % 3 else ActionStatus.SUCCESS)
                for i in range(1, 11)
            ),
        )
        seen: list[str] = []
        after: str | None = None
        while page := tasks.open_actions(limit=3, after=after):
            seen.extend(a.id for a in page)
            after = page[-1].id
        assert seen == sorted(f"t1-a{i}" for i in range(1, 11) if i % 3)

    def test_journal_is_ordered_and_paged_by_version(self, tasks: TaskStore) -> None:
        state = create(tasks, new_task())
        for i in range(4):
            state = change(tasks, state, set_n(i))
        assert [e.version for e in tasks.journal("t1", ADMIN)] == [1, 2, 3, 4, 5]
        assert [e.version for e in tasks.journal("t1", ADMIN, after_version=3)] == [4, 5]
        last = tasks.journal("t1", ADMIN)[-1]
        assert last.changes == [{"path": ["task", "slots", "n"], "before": 2, "after": 3}]

    def test_compaction_keeps_a_baseline_and_drops_folded_entries(self, tasks: TaskStore) -> None:
        state = create(tasks, new_task())
        for i in range(3):
            state = change(tasks, state, set_n(i))
        assert tasks.tasks_with_entries_before(T0 + timedelta(seconds=2)) == ["t1"]
        assert tasks.tasks_with_entries_before(T0 - timedelta(days=1)) == []
        snap = Snapshot("t1", 3, T0 + timedelta(seconds=2), {"task": {"id": "t1"}, "actions": {}})
        assert tasks.compact(snap) == 3
        assert [e.version for e in tasks.journal("t1", ADMIN)] == [4]
        assert tasks.baseline("t1", ALICE) == snap
        assert tasks.baseline("t1", MALLORY) is None
        assert tasks.baseline("other", ADMIN) is None
        older = Snapshot("t1", 2, T0, {"task": {"id": "t1"}, "actions": {}})
        tasks.compact(older)  # an older baseline never replaces a newer one
        assert tasks.baseline("t1", ADMIN) == snap

    def test_committed_state_survives_a_reopen(
        self, tasks: TaskStore, opened: Callable[[], Stores]
    ) -> None:
        if DURABLE not in tasks.capabilities:
            pytest.skip("not a durable backend")
        state = create(tasks, new_task(slots={"origin": "Beijing"}))
        tasks.close()
        again = opened().tasks
        loaded = again.load("t1", ALICE)
        assert loaded is not None and loaded.to_dict() == state.to_dict()

    def test_two_handles_on_one_store_see_and_lock_each_other(
        self, tasks: TaskStore, opened: Callable[[], Stores]
    ) -> None:
        if SHARED not in tasks.capabilities:
            pytest.skip("one process only")
        other = opened().tasks
        first = create(tasks, new_task())
        loaded = other.load("t1", ALICE)
        assert loaded is not None and loaded.to_dict() == first.to_dict()
        change(other, loaded, lambda s: s.task.slots.update(by="other"))
        with pytest.raises(VersionConflict):
            change(tasks, first, lambda s: s.task.slots.update(by="first"))

    def test_a_holders_heartbeat_extends_its_action_leases_only(self, tasks: TaskStore) -> None:
        soon, later = T0 + timedelta(seconds=30), T0 + timedelta(seconds=90)
        state = new_task("t1")
        state.actions = [
            action(1, status=ActionStatus.RUNNING, lease_owner="me", lease_expires_at=soon),
            action(2, status=ActionStatus.RUNNING, lease_owner="other", lease_expires_at=soon),
            action(3, status=ActionStatus.SUCCESS, lease_owner="me", lease_expires_at=soon),
        ]
        create(tasks, state)
        version = state.task.version
        assert tasks.extend_leases("me", later, now=T0) == 1
        loaded = tasks.load("t1", ADMIN)
        assert loaded is not None and loaded.task.version == version  # not a change of the task
        leases = {a.seq: a.lease_expires_at for a in loaded.actions}
        assert leases == {1: later, 2: soon, 3: soon}
        assert tasks.extend_leases("me", soon, now=T0) == 0  # never shortened
        assert [a.id for a in tasks.open_actions() if a.lease_expires_at == later] == ["t1-a1"]
        # a beat that comes after a lease ended (a starved holder) does not bring it back:
        # another process may be taking the action over on what it read
        assert tasks.extend_leases("other", later, now=soon) == 0
        assert tasks.extend_leases("other", later, now=soon - timedelta(seconds=1)) == 1

    def test_ids_are_found_by_prefix_in_scope_only(self, tasks: TaskStore) -> None:
        for task_id, user in [("abc123", "alice"), ("abc456", "alice"), ("abd789", "bob")]:
            create(tasks, new_task(task_id, user=user))
        assert tasks.task_ids_starting("abc", ALICE) == ["abc123", "abc456"]
        assert tasks.task_ids_starting("abc", ALICE, limit=1) == ["abc123"]
        assert tasks.task_ids_starting("abc4", ALICE) == ["abc456"]
        assert tasks.task_ids_starting("abd", ALICE) == []  # bob's: as if it did not exist
        assert tasks.task_ids_starting("ab", ADMIN, limit=5) == ["abc123", "abc456", "abd789"]
        assert tasks.task_ids_starting("abc123", ALICE) == ["abc123"]
        assert tasks.task_ids_starting("abc1234", ALICE) == []
        assert (
            tasks.task_ids_starting("%", ADMIN) == [] and tasks.task_ids_starting("_", ADMIN) == []
        )

    def test_tasks_are_counted_by_status_in_scope(self, tasks: TaskStore) -> None:
        assert tasks.count_tasks(ADMIN) == {}
        create(tasks, new_task("t1", status=TaskStatus.WAITING_USER))
        create(tasks, new_task("t2", status=TaskStatus.DONE))
        create(tasks, new_task("t3", status=TaskStatus.DONE))
        create(tasks, new_task("t4", user="bob", status=TaskStatus.FAILED))
        assert tasks.count_tasks(ALICE) == {TaskStatus.WAITING_USER: 1, TaskStatus.DONE: 2}
        assert tasks.count_tasks(MALLORY) == {}
        assert tasks.count_tasks(ADMIN) == {
            TaskStatus.WAITING_USER: 1,
            TaskStatus.DONE: 2,
            TaskStatus.FAILED: 1,
        }
