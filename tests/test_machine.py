"""The state machine alone: the next step from stored state, with no store and no model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from relaystate import (
    Action,
    ActionKind,
    ActionStatus,
    Slot,
    Stage,
    Task,
    TaskState,
    TaskStatus,
    TaskTemplate,
    all_required_slots,
    condition,
    user_confirmed,
)
from relaystate.task.machine import first_stage, settle
from relaystate.task.next_step import (
    AskConfirmation,
    AskSlot,
    Finished,
    InProgress,
    NeedsAttention,
    Reconcile,
    RunAction,
    WaitRetry,
    WaitUser,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def template(check: bool = True, idempotent: bool = True) -> TaskTemplate:
    t = TaskTemplate(
        "trip",
        slots=[Slot("city"), Slot("vip", required=False)],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("upgrade", entry=condition(lambda task: bool(task.slots.get("vip")))),
            Stage("confirming", exit=user_confirmed),
            Stage("executing", actions=["look", "book"]),
            Stage("done"),
        ],
    )
    t.action(name="look")(lambda ctx: None)
    book = t.action(name="book", side_effect=True, idempotent=idempotent)(lambda ctx: None)
    if check:
        book.check(lambda ctx: None)  # type: ignore[arg-type, return-value]
    book.compensate(lambda ctx: None)
    return t


def state(**slots: object) -> TaskState:
    return TaskState(Task(id="t", type="trip", user_id="u", stage="collecting", slots=dict(slots)))


def act(seq: int, name: str, status: ActionStatus, **fields: object) -> Action:
    a = Action(
        id=str(seq), task_id="t", seq=seq, name=name, stage="executing", idempotency_key=str(seq)
    )
    a.status = status
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def test_collecting_then_confirming_then_actions_in_order() -> None:
    t, s = template(), state()
    assert settle(t, s, NOW) == AskSlot("city")
    assert s.task.status == TaskStatus.WAITING_USER and s.task.missing_slots == ["city"]
    s.task.slots["city"] = "Paris"
    assert settle(t, s, NOW) == AskConfirmation() and s.task.stage == "confirming"
    s.task.confirmed = True
    assert settle(t, s, NOW) == RunAction("executing", "look")
    assert s.task.status == TaskStatus.RUNNING and s.task.stage == "executing"
    s.actions.append(act(1, "look", ActionStatus.SUCCESS))
    assert settle(t, s, NOW) == RunAction("executing", "book")
    s.actions.append(act(2, "book", ActionStatus.SUCCESS))
    assert settle(t, s, NOW) == Finished(TaskStatus.DONE)
    assert s.task.stage == "done" and (s.task.progress.done, s.task.progress.total) == (2, 2)


def test_a_stage_whose_entry_fails_is_skipped_and_custom_exits_wait_for_the_user() -> None:
    t = template()
    s = state(city="Paris")
    settle(t, s, NOW)
    assert s.task.stage == "confirming"  # "upgrade" skipped: no vip
    t.stages[1] = Stage(
        "upgrade",
        entry=condition(lambda task: bool(task.slots.get("vip"))),
        exit=condition(lambda task: False),
    )
    s = state(city="Paris", vip=True)
    assert settle(t, s, NOW) == WaitUser("<lambda>") and s.task.stage == "upgrade"
    s = state(city="Paris")
    assert first_stage(t, s) == "collecting"


def test_recorded_actions_map_to_steps() -> None:
    t = template()
    base = state(city="Paris")
    base.task.confirmed = True
    base.task.stage = "executing"
    look = act(1, "look", ActionStatus.SUCCESS)
    later = NOW + timedelta(seconds=5)
    cases = [
        (act(2, "book", ActionStatus.PENDING), RunAction("executing", "book", seq=2)),
        (act(2, "book", ActionStatus.PENDING, next_attempt_at=later), WaitRetry(2, later)),
        (act(2, "book", ActionStatus.RUNNING), InProgress(2)),
        (act(2, "book", ActionStatus.UNKNOWN), Reconcile(2)),
        (act(2, "book", ActionStatus.UNKNOWN, next_attempt_at=later), WaitRetry(2, later)),
    ]
    for row, expected in cases:
        s = base.copy()
        s.actions = [look, row]
        assert settle(t, s, NOW) == expected, row


def test_an_unknown_effect_that_cannot_be_checked_or_repeated_needs_a_person() -> None:
    s = state(city="Paris")
    s.task.confirmed, s.task.stage = True, "executing"
    s.actions = [act(1, "look", ActionStatus.SUCCESS), act(2, "book", ActionStatus.UNKNOWN)]
    step = settle(template(check=False, idempotent=False), s, NOW)
    assert isinstance(step, NeedsAttention) and step.seq == 2
    assert s.task.status == TaskStatus.NEEDS_ATTENTION
    s.actions[1].attempts = 3  # idempotent, no check, attempts exhausted: a person again
    assert isinstance(settle(template(check=False, idempotent=True), s, NOW), NeedsAttention)


def test_a_failed_step_unwinds_successes_in_reverse_then_fails() -> None:
    t = template()
    t.stages[3] = Stage("executing", actions=["look", "book", "pay"])
    t.action(name="pay")(lambda ctx: None)
    s = state(city="Paris")
    s.task.confirmed, s.task.stage = True, "executing"
    s.actions = [
        act(1, "look", ActionStatus.SUCCESS),
        act(2, "book", ActionStatus.SUCCESS),
        act(3, "pay", ActionStatus.FAILED, error="card declined"),
    ]
    step = settle(t, s, NOW)
    assert step == RunAction("executing", "book.compensate", ActionKind.COMPENSATION, 2)
    comp = act(4, "book.compensate", ActionStatus.SUCCESS, kind=ActionKind.COMPENSATION)
    comp.compensates = 2
    s.actions[1].status = ActionStatus.COMPENSATED
    s.actions.append(comp)
    assert settle(t, s, NOW) == Finished(TaskStatus.FAILED)
    assert "pay failed: card declined" in s.task.status_text
    comp.status = ActionStatus.FAILED
    assert isinstance(settle(t, s, NOW), NeedsAttention)


def test_the_same_state_gives_the_same_step_and_text() -> None:
    t = template()
    one, two = state(city="Rome"), state(city="Rome")
    assert settle(t, one, NOW) == settle(t, two, NOW)
    assert one.task.status_text == two.task.status_text
    assert "confirm" in one.task.status_text and "city=Rome" in one.task.status_text
