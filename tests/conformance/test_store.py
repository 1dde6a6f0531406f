"""The store contract, run unchanged against every backend in conftest.BACKENDS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from relaystate.errors import DuplicateKey, NotFound, VersionConflict
from relaystate.journal import entry_for
from relaystate.model import (
    Action,
    ActionStatus,
    Message,
    Session,
    Snapshot,
    Task,
    TaskState,
    TaskStatus,
    WorkerInfo,
)
from relaystate.store import Commit, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def new_task(task_id: str = "t1", user: str = "alice", **fields: object) -> TaskState:
    task = Task(id=task_id, type="demo", user_id=user, stage="collecting", version=1)
    task.created_at = task.updated_at = T0
    for key, value in fields.items():
        setattr(task, key, value)
    return TaskState(task)


def create(store: Store, state: TaskState, **extra: object) -> TaskState:
    entry = entry_for(None, state, at=state.task.updated_at, actor="test", reason="created")
    store.commit(Commit(state, 0, list(state.actions), entry, **extra))  # type: ignore[arg-type]
    return state


def change(
    store: Store, before: TaskState, edit: object, *, at: datetime | None = None, **extra: object
) -> TaskState:
    after = before.copy()
    edit(after)  # type: ignore[operator]
    after.task.version = before.task.version + 1
    after.task.updated_at = at or before.task.updated_at + timedelta(seconds=1)
    old = {a.seq: a.to_dict() for a in before.actions}
    touched = [a for a in after.actions if old.get(a.seq) != a.to_dict()]
    entry = entry_for(before, after, at=after.task.updated_at, actor="test", reason="changed")
    store.commit(Commit(after, before.task.version, touched, entry, **extra))  # type: ignore[arg-type]
    return after


def action(seq: int, key: str | None = None, **fields: object) -> Action:
    a = Action(
        id=f"a{seq}",
        task_id="t1",
        seq=seq,
        name=f"step{seq}",
        stage="executing",
        idempotency_key=key or f"t1:{seq}",
        created_at=T0,
        updated_at=T0,
    )
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def test_create_and_read_back(store: Store) -> None:
    state = create(store, new_task(slots={"origin": "北京"}))
    loaded = store.load("t1", user_id="alice")
    assert loaded is not None
    assert loaded.to_dict() == state.to_dict()


def test_reads_are_scoped_by_user(store: Store) -> None:
    create(store, new_task())
    assert store.get_task("t1", user_id="mallory") is None
    assert store.load("t1", user_id="mallory") is None
    assert store.get_task("t1", user_id=None) is not None  # the explicit admin scope
    assert store.list_tasks("mallory") == []


def test_stale_version_conflicts_and_changes_nothing(store: Store) -> None:
    first = create(store, new_task())
    change(store, first, lambda s: s.task.slots.update(origin="Beijing"))
    with pytest.raises(VersionConflict) as info:
        change(store, first, lambda s: s.task.slots.update(origin="Paris"))
    assert info.value.expected == 1 and info.value.actual == 2
    stored = store.get_task("t1", user_id="alice")
    assert stored is not None and stored.slots == {"origin": "Beijing"} and stored.version == 2
    assert [e.version for e in store.journal("t1")] == [1, 2]


def test_creating_an_existing_task_conflicts(store: Store) -> None:
    create(store, new_task())
    with pytest.raises(VersionConflict):
        create(store, new_task(slots={"x": 1}))
    stored = store.get_task("t1", user_id=None)
    assert stored is not None and stored.slots == {}


def test_a_task_cannot_be_moved_to_another_user(store: Store) -> None:
    first = create(store, new_task())
    with pytest.raises(VersionConflict):
        change(store, first, lambda s: setattr(s.task, "user_id", "mallory"))
    assert store.get_task("t1", user_id="alice") is not None


def test_actions_are_upserted_with_the_task(store: Store) -> None:
    first = create(store, new_task())
    second = change(store, first, lambda s: s.actions.append(action(1)))
    third = change(store, second, lambda s: setattr(s.action(1), "status", ActionStatus.SUCCESS))
    assert [a.status for a in store.get_actions("t1")] == [ActionStatus.SUCCESS]
    assert store.find_action("t1:1") == third.action(1)
    assert store.find_action("nope") is None


def test_duplicate_idempotency_key_rolls_back_the_whole_commit(store: Store) -> None:
    first = create(store, new_task())
    second = change(store, first, lambda s: s.actions.append(action(1, key="k")))
    with pytest.raises(DuplicateKey):
        change(
            store,
            second,
            lambda s: (s.actions.append(action(2, key="k")), s.task.slots.update(x=1)),
        )
    stored = store.get_task("t1", user_id=None)
    assert stored is not None and stored.version == 2 and stored.slots == {}
    assert len(store.get_actions("t1")) == 1
    assert [e.version for e in store.journal("t1")] == [1, 2]


def test_list_tasks_filters_orders_and_limits(store: Store) -> None:
    for i in range(5):
        state = new_task(f"t{i}", status=TaskStatus.DONE if i % 2 else TaskStatus.WAITING_USER)
        state.task.updated_at = T0 + timedelta(minutes=i)
        create(store, state)
    create(store, new_task("other", user="bob"))
    ids = [t.id for t in store.list_tasks("alice")]
    assert ids == ["t4", "t3", "t2", "t1", "t0"]
    open_ids = [t.id for t in store.list_tasks("alice", statuses=[TaskStatus.WAITING_USER])]
    assert open_ids == ["t4", "t2", "t0"]
    assert [t.id for t in store.list_tasks("alice", limit=2)] == ["t4", "t3"]
    assert store.list_tasks("alice", statuses=[]) == []
    assert {t.id for t in store.list_tasks(None)} == {"t0", "t1", "t2", "t3", "t4", "other"}


def test_open_actions_are_the_unsettled_ones(store: Store) -> None:
    first = create(store, new_task())
    change(
        store,
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
    assert sorted(a.seq for a in store.open_actions()) == [2, 3, 5]
    assert len(store.open_actions(limit=1)) == 1


def test_journal_is_ordered_and_paged_by_version(store: Store) -> None:
    state = create(store, new_task())
    for i in range(4):
        state = change(store, state, lambda s, i=i: s.task.slots.update(n=i))
    assert [e.version for e in store.journal("t1")] == [1, 2, 3, 4, 5]
    assert [e.version for e in store.journal("t1", after_version=3)] == [4, 5]
    last = store.journal("t1")[-1]
    assert last.changes == [{"path": ["task", "slots", "n"], "before": 2, "after": 3}]


def test_compaction_keeps_a_baseline_and_drops_folded_entries(store: Store) -> None:
    state = create(store, new_task())
    for i in range(3):
        state = change(store, state, lambda s, i=i: s.task.slots.update(n=i))
    assert store.tasks_with_entries_before(T0 + timedelta(seconds=2)) == ["t1"]
    assert store.tasks_with_entries_before(T0 - timedelta(days=1)) == []
    snap = Snapshot("t1", 3, T0 + timedelta(seconds=2), {"task": {"id": "t1"}, "actions": {}})
    assert store.compact(snap) == 3
    assert [e.version for e in store.journal("t1")] == [4]
    assert store.baseline("t1") == snap
    assert store.baseline("other") is None


def test_sessions_are_scoped_and_owned(store: Store) -> None:
    session = Session(id="s1", user_id="alice", language="zh", created_at=T0, updated_at=T0)
    store.put_session(session)
    assert store.get_session("s1", user_id="alice") == session
    assert store.get_session("s1", user_id="mallory") is None
    with pytest.raises(NotFound):
        store.put_session(Session(id="s1", user_id="mallory", created_at=T0, updated_at=T0))
    stored = store.get_session("s1", user_id="alice")
    assert stored is not None and stored.language == "zh"


def test_messages_commit_with_the_task_and_after_it(store: Store) -> None:
    session = Session(id="s1", user_id="alice", created_at=T0, updated_at=T0)
    said = [
        Message("s1", "alice", "user", "hi", "t1", T0),
        Message("s1", "alice", "bot", "yo", "t1", T0),
    ]
    first = create(store, new_task(), session=session, messages=said)
    stored = store.get_session("s1", user_id="alice")
    assert stored is not None and stored.id == "s1"
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["hi", "yo"]
    assert store.messages("s1", user_id="mallory") == []
    change(store, first, lambda s: s.task.slots.update(x=1))
    with pytest.raises(VersionConflict):  # a failed commit writes no messages either
        change(
            store,
            first,
            lambda s: s.task.slots.update(x=2),
            messages=[Message("s1", "alice", "user", "lost", "t1", T0)],
        )
    assert [m.text for m in store.messages("s1", user_id="alice")] == ["hi", "yo"]
    store.append_messages([Message("s1", "alice", "user", str(i), None, T0) for i in range(3)])
    assert [m.text for m in store.messages("s1", user_id="alice", limit=2)] == ["1", "2"]


def test_workers_register_and_deregister(store: Store) -> None:
    store.register_worker(WorkerInfo("w1", "host", 1, "b1", T0))
    store.register_worker(WorkerInfo("w2", "host", 2, "b1", T0))
    assert store.stopped_workers(["w1", "w2", "w3"]) == frozenset()
    store.deregister_worker("w1", T0)
    assert store.stopped_workers(["w1", "w2", "w3"]) == frozenset({"w1"})
    assert store.stopped_workers([]) == frozenset()


def test_recovery_claims_split_work_and_expire(store: Store) -> None:
    for i in range(4):
        create(store, new_task(f"t{i}"))
    later = T0 + timedelta(minutes=1)
    ids = ["t0", "t1", "t2", "t3"]
    assert store.claim_for_recovery(ids[:2], "a", until=later, now=T0) == ["t0", "t1"]
    assert store.claim_for_recovery(ids, "b", until=later, now=T0) == ["t2", "t3"]
    assert store.claim_for_recovery(ids, "a", until=later, now=T0) == ["t0", "t1"]  # mine again
    assert store.claim_for_recovery(ids, "c", until=later, now=later) == ids  # all expired
    store.release_recovery("c")
    assert store.claim_for_recovery(ids, "b", until=later, now=T0) == ids
    assert store.claim_for_recovery([], "b", until=later, now=T0) == []


def test_open_actions_page_by_id_to_the_end(store: Store) -> None:
    state = create(store, new_task())
    change(
        store,
        state,
        lambda s: s.actions.extend(
            action(i, status=ActionStatus.UNKNOWN if i % 3 else ActionStatus.SUCCESS)
            for i in range(1, 11)
        ),
    )
    seen, after = [], None
    while page := store.open_actions(limit=3, after=after):
        seen.extend(a.id for a in page)
        after = page[-1].id
    assert seen == sorted(f"a{i}" for i in range(1, 11) if i % 3)
