"""The runtime end to end on every durable store: turns, actions, recovery, journal."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from relaystate import (
    ActionContext,
    ActionStatus,
    HistoryCompacted,
    InvalidSlot,
    NotFound,
    Outcome,
    OutcomeUnknown,
    PermanentError,
    Runtime,
    SchemaTooNew,
    Scope,
    TaskLocked,
    TaskStatus,
    TemplateError,
    open_store,
)
from relaystate.demo.ledger import Ledger
from relaystate.errors import TaskTooNew
from relaystate.task.machine import MAX_CHECKS
from relaystate.task.next_step import AskConfirmation, AskSlot, Finished

from .support import Clock, Script, order_template

ADMIN = Scope.admin("test")
ALICE = Scope.user("alice")

FULL = {"item": "tea", "size": "M"}


class Crash(BaseException):
    """Stands for the process dying inside an action (escapes every except Exception)."""


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def script() -> Script:
    return Script()


def make(store_url: str, ledger: Ledger, script: Script, clock: Clock, **options: Any) -> Runtime:
    return Runtime(
        open_store(store_url),
        [order_template(ledger, script, **options)],
        clock=clock,
        sleep=clock.sleep,
    )


@pytest.fixture
def rt(any_store_url: str, ledger: Ledger, script: Script, clock: Clock) -> Iterator[Runtime]:
    runtime = make(any_store_url, ledger, script, clock)
    yield runtime
    runtime.close()


def effects(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    return [e for e in ledger.entries() if e["kind"] == kind]


def test_happy_path_reaches_done_with_one_effect_each(rt: Runtime, ledger: Ledger) -> None:
    session = rt.open_session(Scope.user("alice"))
    state = rt.start(
        Scope.user("alice"),
        "order",
        session_id=session.id,
        slots={"item": "tea"},
        messages=[("user", "tea")],
    )
    assert (state.task.stage, state.task.status) == ("collecting", TaskStatus.WAITING_USER)
    assert state.task.missing_slots == ["size"]
    assert "waiting for size" in state.task.status_text
    state = rt.fill(Scope.user("alice"), state.task.id, {"size": "medium"}, session_id=session.id)
    assert state.task.slots == FULL and state.task.stage == "confirming"
    assert isinstance(rt.resume(Scope.user("alice"), state.task.id).step, AskConfirmation)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    assert (state.task.stage, state.task.status) == ("done", TaskStatus.DONE)
    assert (state.task.progress.done, state.task.progress.total) == (3, 3)
    assert [a.status for a in state.actions] == [ActionStatus.SUCCESS] * 3
    assert [(e["requests"], e["effects"]) for e in ledger.entries()] == [(1, 1), (1, 1)]
    assert rt.replay(ADMIN, state.task.id).to_dict() == state.to_dict()
    assert [m.text for m in rt.messages(Scope.user("alice"), session.id)] == ["tea"]
    stored = rt.session(Scope.user("alice"), session.id)
    assert stored is not None and stored.active_task_ids == [state.task.id]


def test_every_version_replays_to_the_state_it_had(rt: Runtime, clock: Clock) -> None:
    seen = {}
    state = rt.start(Scope.user("alice"), "order", slots={"item": "tea"})
    seen[state.task.version] = state.to_dict()
    for step in (
        lambda tid: rt.fill(Scope.user("alice"), tid, {"size": "S"}),
        lambda tid: rt.fill(Scope.user("alice"), tid, {"size": "L", "note": "hot"}),
        lambda tid: rt.confirm(Scope.user("alice"), tid, False),
        lambda tid: rt.confirm(Scope.user("alice"), tid, True, run=False),
    ):
        clock.advance(seconds=1)
        state = step(state.task.id)
        seen[state.task.version] = state.to_dict()
    state = rt.advance(ADMIN, state.task.id)
    seen[state.task.version] = state.to_dict()
    _, entries = rt.history(ADMIN, state.task.id)
    assert [e.version for e in entries] == list(range(1, state.task.version + 1))
    for version, expected in seen.items():
        assert rt.replay(ADMIN, state.task.id, version).to_dict() == expected
    for entry in entries:  # every point replays, and time points agree with versions
        by_version = rt.replay(ADMIN, state.task.id, entry.version)
        assert by_version.task.version == entry.version
        assert rt.replay(ADMIN, state.task.id, entry.at).task.version >= entry.version


def test_a_turn_journals_only_its_delta(rt: Runtime) -> None:
    state = rt.start(Scope.user("alice"), "order", slots={"item": "tea"})
    rt.fill(Scope.user("alice"), state.task.id, {"note": "no sugar"})
    _, entries = rt.history(ADMIN, state.task.id)
    paths = {tuple(c["path"]) for c in entries[-1].changes}
    assert paths == {("task", "slots", "note"), ("task", "status_text")}  # "2 of 3 filled"


def test_invalid_values_change_nothing(rt: Runtime) -> None:
    state = rt.start(Scope.user("alice"), "order", slots={"item": "tea"})
    with pytest.raises(InvalidSlot, match="not one of S, M, L"):
        rt.fill(Scope.user("alice"), state.task.id, {"size": "XXL"})
    with pytest.raises(InvalidSlot, match="no such slot"):
        rt.fill(Scope.user("alice"), state.task.id, {"colour": "red"})
    with pytest.raises(InvalidSlot):
        rt.start(Scope.user("alice"), "order", slots={"size": "huge"})
    assert rt.task(ADMIN, state.task.id).task.version == state.task.version
    with pytest.raises(TemplateError, match="unknown task type"):
        rt.start(Scope.user("alice"), "nope")


def test_a_correction_replaces_the_value_and_asks_to_confirm_again(rt: Runtime) -> None:
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    assert state.task.stage == "confirming"
    state = rt.fill(Scope.user("alice"), state.task.id, {"size": "L"})
    assert state.task.slots["size"] == "L" and state.task.confirmed is False
    state = rt.confirm(Scope.user("alice"), state.task.id, False)
    assert isinstance(rt.resume(Scope.user("alice"), state.task.id).step, AskConfirmation)
    _, entries = rt.history(ADMIN, state.task.id)
    size_history = [
        c.get("after")
        for e in entries
        for c in e.changes
        if c["path"][:3] == ["task", "slots", "size"] or c["path"] == ["task"]
    ]
    assert "L" in size_history and any(isinstance(v, dict) for v in size_history)


def test_slots_are_locked_once_actions_ran(rt: Runtime) -> None:
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    with pytest.raises(TaskLocked):
        rt.fill(Scope.user("alice"), state.task.id, {"size": "S"})
    with pytest.raises(TaskLocked):
        rt.cancel(Scope.user("alice"), state.task.id)


def test_transient_failures_retry_with_backoff(
    rt: Runtime, ledger: Ledger, script: Script, clock: Clock
) -> None:
    def flaky(ctx: ActionContext) -> Any:
        raise ConnectionError("downstream busy")

    script.plans["reserve"] = [flaky, flaky]
    start = clock.now
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    reserve = state.actions[0]
    assert state.task.status == TaskStatus.DONE
    assert reserve.attempts == 3 and reserve.status == ActionStatus.SUCCESS
    assert clock.now - start >= timedelta(seconds=3)  # 1 s then 2 s of backoff
    assert len(effects(ledger, "reservation")) == 1


def test_a_retry_too_far_away_waits_for_resume(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    from relaystate import Retry

    rt = make(
        any_store_url, ledger, script, clock, retry=Retry(max_attempts=2, initial_interval=60)
    )
    script.plans["reserve"] = [lambda ctx: (_ for _ in ()).throw(ConnectionError("busy"))]
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    assert state.task.status == TaskStatus.RUNNING
    assert "waiting to retry reserve" in state.task.status_text
    clock.advance(seconds=61)
    state = rt.resume(Scope.user("alice"), state.task.id).state
    assert state.task.status == TaskStatus.DONE


def test_failure_for_good_compensates_in_reverse_order(
    rt: Runtime, ledger: Ledger, script: Script
) -> None:
    script.plans["notify"] = [lambda ctx: (_ for _ in ()).throw(PermanentError("no address"))]
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    assert state.task.status == TaskStatus.FAILED
    assert script.calls == ["reserve", "pay", "notify", "pay.compensate", "reserve.compensate"]
    statuses = {a.name: a.status for a in state.actions}
    assert statuses["reserve"] == statuses["pay"] == ActionStatus.COMPENSATED
    assert statuses["notify"] == ActionStatus.FAILED
    assert "notify failed" in state.task.status_text and "undone" in state.task.status_text
    assert len(effects(ledger, "refund")) == len(effects(ledger, "release")) == 1


def test_a_timeout_is_unknown_and_checked_before_any_retry(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    rt = make(any_store_url, ledger, script, clock, timeout=0.05)

    def slow(ctx: ActionContext) -> Any:
        effect = ledger.apply(ctx.idempotency_key, "payment", dict(ctx.input))
        time.sleep(0.3)
        return effect

    script.plans["pay"] = [slow]
    state = rt.start(Scope.user("alice"), "order", slots=FULL)
    state = rt.confirm(Scope.user("alice"), state.task.id)
    assert state.task.status == TaskStatus.DONE
    assert script.calls.count("pay") == 1 and "pay.check" in script.calls
    pay = next(a for a in state.actions if a.name == "pay")
    assert pay.output is not None and pay.output["id"].startswith("PAY")
    assert effects(ledger, "payment")[0]["requests"] == 1


def test_not_found_downstream_is_repeated_with_the_same_key(
    rt: Runtime, ledger: Ledger, script: Script
) -> None:
    def lost(ctx: ActionContext) -> Any:
        raise OutcomeUnknown("connection reset")

    script.plans["pay"] = [lost]
    state = rt.confirm(
        Scope.user("alice"), rt.start(Scope.user("alice"), "order", slots=FULL).task.id
    )
    pay = next(a for a in state.actions if a.name == "pay")
    assert state.task.status == TaskStatus.DONE and pay.attempts == 2
    assert script.calls.count("pay") == 2 and script.calls.count("pay.check") == 1
    assert [(e["requests"], e["effects"]) for e in effects(ledger, "payment")] == [(1, 1)]


def test_an_unknown_unsafe_effect_without_check_needs_a_person(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    rt = make(any_store_url, ledger, script, clock, pay_idempotent=False, pay_check=False)

    def applied_then_lost(ctx: ActionContext) -> Any:
        ledger.apply(ctx.idempotency_key, "payment", {}, deduplicate=False)
        raise RuntimeError("socket closed")

    script.plans["pay"] = [applied_then_lost]
    state = rt.confirm(
        Scope.user("alice"), rt.start(Scope.user("alice"), "order", slots=FULL).task.id
    )
    assert state.task.status == TaskStatus.NEEDS_ATTENTION
    assert "neither be checked nor safely repeated" in state.task.status_text
    again = rt.recover(ADMIN)
    assert rt.task(ADMIN, state.task.id).task.status == TaskStatus.NEEDS_ATTENTION
    assert script.calls.count("pay") == 1 and again.errors == {}
    pay = next(a for a in state.actions if a.name == "pay")
    state = rt.resolve(ADMIN, state.task.id, pay.seq, succeeded=True, output={"by": "hand"})
    assert state.task.status == TaskStatus.DONE
    assert effects(ledger, "payment")[0]["effects"] == 1


def test_an_unsafe_effect_that_raised_is_checked_not_repeated(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    rt = make(any_store_url, ledger, script, clock, pay_idempotent=False)

    def applied_then_error(ctx: ActionContext) -> Any:
        ledger.apply(ctx.idempotency_key, "payment", {}, deduplicate=False)
        raise RuntimeError("502 from the gateway")

    script.plans["pay"] = [applied_then_error]
    state = rt.confirm(
        Scope.user("alice"), rt.start(Scope.user("alice"), "order", slots=FULL).task.id
    )
    assert state.task.status == TaskStatus.DONE
    assert script.calls.count("pay") == 1
    assert effects(ledger, "payment")[0]["effects"] == 1


def test_a_check_without_answer_backs_off_then_asks_a_person(
    rt: Runtime, script: Script, clock: Clock
) -> None:
    rt.templates["order"].spec("pay").check_fn = lambda ctx: Outcome.pending("still processing")
    script.plans["pay"] = [lambda ctx: (_ for _ in ()).throw(OutcomeUnknown("timeout"))]
    rt.max_inline_wait = 1e9
    state = rt.confirm(
        Scope.user("alice"), rt.start(Scope.user("alice"), "order", slots=FULL).task.id
    )
    pay = next(a for a in state.actions if a.name == "pay")
    assert state.task.status == TaskStatus.NEEDS_ATTENTION
    assert pay.status == ActionStatus.UNKNOWN and pay.checks == MAX_CHECKS
    assert script.calls.count("pay") == 1


def test_cancel_before_effects_and_not_after(rt: Runtime) -> None:
    first = rt.start(Scope.user("alice"), "order", slots={"item": "tea"})
    state = rt.cancel(Scope.user("alice"), first.task.id)
    assert state.task.status == TaskStatus.CANCELLED
    assert isinstance(rt.resume(Scope.user("alice"), first.task.id).step, Finished)
    with pytest.raises(TaskLocked):
        rt.cancel(Scope.user("alice"), first.task.id)
    with pytest.raises(TaskLocked):
        rt.fill(Scope.user("alice"), first.task.id, {"size": "S"})
    assert rt.open_tasks(Scope.user("alice")) == []


def test_no_user_can_touch_another_users_task(rt: Runtime) -> None:
    tid = rt.start(Scope.user("alice"), "order", slots={"item": "tea"}).task.id
    for attempt in (
        lambda: rt.task(Scope.user("mallory"), tid),
        lambda: rt.fill(Scope.user("mallory"), tid, {"size": "S"}),
        lambda: rt.confirm(Scope.user("mallory"), tid),
        lambda: rt.cancel(Scope.user("mallory"), tid),
        lambda: rt.history(Scope.user("mallory"), tid),
        lambda: rt.replay(Scope.user("mallory"), tid, 1),
        lambda: rt.resume(Scope.user("mallory"), tid),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert rt.open_tasks(Scope.user("mallory")) == []
    assert rt.task(Scope.user("alice"), tid).task.version == 1


def test_tasks_outlive_sessions_and_are_found_by_user(rt: Runtime, clock: Clock) -> None:
    phone = rt.open_session(Scope.user("alice"), "phone", ttl=timedelta(minutes=30))
    tid = rt.start(Scope.user("alice"), "order", session_id=phone.id, slots={"item": "tea"}).task.id
    clock.advance(hours=5)
    again = rt.open_session(Scope.user("alice"), "phone")
    assert again.created_at == clock.now  # the expired session was rebuilt, empty
    laptop = rt.open_session(Scope.user("alice"), "laptop")
    assert [t.id for t in rt.open_tasks(Scope.user("alice"))] == [tid]
    resumed = rt.resume(Scope.user("alice"), tid)
    assert resumed.step == AskSlot("size") and resumed.task.origin_session_id == phone.id
    rt.fill(Scope.user("alice"), tid, {"size": "S"}, session_id=laptop.id)
    with pytest.raises(NotFound):
        rt.open_session(Scope.user("mallory"), "laptop")


def test_concurrent_writers_retry_on_fresh_state(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock, tmp_path: Path
) -> None:
    if any_store_url == "memory://":
        pytest.skip("two runtimes share one store only through a file")
    one = make(any_store_url, ledger, script, clock)
    two = make(any_store_url, ledger, script, clock)
    tid = one.start(Scope.user("alice"), "order", slots={"item": "tea"}).task.id
    interfered = []

    def change(draft: Any) -> bool:
        if not interfered:  # another process commits between our read and our write
            interfered.append(True)
            two.fill(Scope.user("alice"), tid, {"note": "from two"})
        draft.task.slots["size"] = "S"
        return True

    one._writer.mutate(tid, Scope.user("alice"), change, actor="test", reason="racing")
    final = one.task(ADMIN, tid).task
    assert final.slots == {"item": "tea", "note": "from two", "size": "S"}
    assert [e.version for e in one.history(ADMIN, tid)[1]] == [1, 2, 3]


def test_recover_reconciles_a_dead_workers_action(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    def crash_after_effect(ctx: ActionContext) -> Any:
        ledger.apply(ctx.idempotency_key, "payment", dict(ctx.input))
        raise Crash()

    first = make(any_store_url, ledger, script, clock)
    script.plans["pay"] = [crash_after_effect]
    tid = first.start(Scope.user("alice"), "order", slots=FULL).task.id
    with pytest.raises(Crash):
        first.confirm(Scope.user("alice"), tid)
    second = Runtime(first.stores, first.templates.values(), clock=clock, sleep=clock.sleep)
    report = second.recover(ADMIN)
    assert report.skipped == 1 and first.task(ADMIN, tid).task.status == TaskStatus.RUNNING
    first.stores.coordination.deregister_worker(first._worker(), clock.now)  # it is gone
    report = second.recover(ADMIN)
    assert report.outcomes == {tid: "done"}
    assert script.calls.count("pay") == 1 and "pay.check" in script.calls
    assert effects(ledger, "payment")[0]["requests"] == 1


def test_an_expired_lease_is_reconciled_by_time(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    first = make(any_store_url, ledger, script, clock)
    script.plans["reserve"] = [lambda ctx: (_ for _ in ()).throw(Crash())]
    tid = first.start(Scope.user("alice"), "order", slots=FULL).task.id
    with pytest.raises(Crash):
        first.confirm(Scope.user("alice"), tid)
    second = Runtime(first.stores, first.templates.values(), clock=clock, sleep=clock.sleep)
    assert second.recover(ADMIN).outcomes == {}
    clock.advance(minutes=2)
    assert second.recover(ADMIN).outcomes == {tid: "done"}
    assert len(effects(ledger, "reservation")) == 1


def test_resume_is_the_same_from_any_process(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock, tmp_path: Path
) -> None:
    if any_store_url == "memory://":
        pytest.skip("a second process needs a file")
    one = make(any_store_url, ledger, script, clock)
    tid = one.start(Scope.user("alice"), "order", slots={"item": "tea"}).task.id
    two = make(any_store_url, ledger, script, clock)
    a, b = one.resume(Scope.user("alice"), tid), two.resume(Scope.user("alice"), tid)
    assert a.step == b.step == AskSlot("size")
    assert a.state.to_dict() == b.state.to_dict()


def test_compaction_folds_old_entries_and_replay_still_works(rt: Runtime, clock: Clock) -> None:
    tid = rt.start(Scope.user("alice"), "order", slots={"item": "tea"}).task.id
    rt.fill(Scope.user("alice"), tid, {"size": "S"})
    rt.fill(Scope.user("alice"), tid, {"note": "one"})
    clock.advance(days=8)
    rt.fill(Scope.user("alice"), tid, {"note": "two"})
    current = rt.task(ADMIN, tid).to_dict()
    assert rt.compact(ADMIN) == 3
    baseline, entries = rt.history(ADMIN, tid)
    assert baseline is not None and baseline.version == 3 and [e.version for e in entries] == [4]
    assert rt.replay(ADMIN, tid).to_dict() == current
    assert rt.replay(ADMIN, tid, 3).task.slots["note"] == "one"
    with pytest.raises(HistoryCompacted):
        rt.replay(ADMIN, tid, 2)
    assert rt.compact(ADMIN) == 0


def test_state_from_a_newer_build_is_refused(rt: Runtime) -> None:
    newer = copy.copy(rt.templates["order"])
    newer.version = 3  # a newer build, over the same store, starts the task
    tid = Runtime(rt.stores, [newer], build="v2").start(ALICE, "order", slots={"item": "tea"})
    before = rt.history(ADMIN, tid.task.id)
    with pytest.raises(TaskTooNew, match="version 3"):
        rt.fill(ALICE, tid.task.id, {"size": "S"})
    assert rt.history(ADMIN, tid.task.id) == before  # nothing written
    state = rt.task(ADMIN, tid.task.id)  # reading it is fine
    assert state.task.template_version == 3
    state.task.schema_version = 99
    with pytest.raises(SchemaTooNew):
        rt.template_of(state)


def test_recover_walks_every_page_of_interrupted_tasks(
    any_store_url: str, ledger: Ledger, script: Script, clock: Clock
) -> None:
    first = make(any_store_url, ledger, script, clock)
    ids = []
    for _ in range(7):
        script.plans["reserve"] = [lambda ctx: (_ for _ in ()).throw(Crash())]
        tid = first.start(Scope.user("alice"), "order", slots=FULL).task.id
        with pytest.raises(Crash):
            first.confirm(Scope.user("alice"), tid)
        ids.append(tid)
    first.stores.coordination.deregister_worker(first._worker(), clock.now)
    second = Runtime(first.stores, first.templates.values(), clock=clock, sleep=clock.sleep)
    report = second.recover(ADMIN, page=2)
    assert report.outcomes == dict.fromkeys(ids, "done") and report.examined == 7


def _lookup_template(script: Script) -> Any:
    """collecting -> checking (a look-up) -> confirming -> executing (pay) -> done."""
    from relaystate import RejectedInput, Slot, Stage, TaskTemplate, all_required_slots
    from relaystate import user_confirmed as confirmed

    template = TaskTemplate(
        "checked",
        slots=[Slot("code")],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("checking", actions=["lookup"]),
            Stage("confirming", exit=confirmed),
            Stage("executing", actions=["pay"]),
            Stage("done"),
        ],
    )

    @template.action
    def lookup(ctx: ActionContext) -> Any:
        script.calls.append("lookup")
        if ctx.input["code"] != "good":
            raise RejectedInput("code", f"no such code {ctx.input['code']}")
        return {"ok": True}

    @template.action(side_effect=True, idempotent=True)
    def pay(ctx: ActionContext) -> Any:
        script.calls.append("pay")
        raise RejectedInput("code", "refused after all")

    return template


def test_a_refused_value_is_asked_again_and_a_refused_side_effect_fails(
    any_store_url: str, script: Script, clock: Clock
) -> None:
    rt = Runtime(
        open_store(any_store_url), [_lookup_template(script)], clock=clock, sleep=clock.sleep
    )
    alice = Scope.user("alice")
    state = rt.start(alice, "checked", slots={"code": "bad"})
    assert state.task.status == TaskStatus.WAITING_USER and state.task.slots == {}
    assert state.task.context["rejected"]["value"] == "bad"
    assert [a.status for a in state.actions] == [ActionStatus.PENDING]
    state = rt.fill(alice, state.task.id, {"code": "good"})
    assert state.task.stage == "confirming" and "rejected" not in state.task.context
    assert [a.status for a in state.actions] == [ActionStatus.SUCCESS]
    state = rt.confirm(alice, state.task.id)  # a side effect that refuses: a failure
    assert state.task.status == TaskStatus.FAILED
    assert script.calls == ["lookup", "lookup", "pay"]
    assert rt.replay(alice, state.task.id).to_dict() == state.to_dict()
    rt.close()
