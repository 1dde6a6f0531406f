"""The demo agents run end to end through the runtime: refund and after-sales."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from relaystate import InvalidSlot, Runtime, Scope, TaskLocked, TaskStatus, open_store
from relaystate.demo import Ledger, after_sales, refund, templates


def test_the_demo_set_has_three_agents_with_titles_and_triggers(tmp_path: Path) -> None:
    found = {t.type: t for t in templates(tmp_path / "l.db")}
    assert set(found) == {"flight_booking", "refund", "after_sales"}
    assert found["refund"].title("zh") == "退款" and "退款" in found["refund"].triggers["zh"]
    assert found["flight_booking"].title() == "flight booking"


def test_a_refund_looks_up_the_order_then_refunds_once(ledger: Ledger) -> None:
    rt = Runtime(open_store("memory://"), [refund(ledger)])
    state = rt.start(
        Scope.user("bob"), "refund", slots={"order_number": "ORD-10001", "reason": "broken"}
    )
    with pytest.raises(InvalidSlot, match="more than zero"):
        rt.fill(Scope.user("bob"), state.task.id, {"amount": "-5"})
    with pytest.raises(InvalidSlot, match="expected form"):
        rt.fill(Scope.user("bob"), state.task.id, {"order_number": "10001"})
    state = rt.fill(Scope.user("bob"), state.task.id, {"amount": "¥120"})
    assert state.task.stage == "confirming"
    assert state.actions[0].output["total"] == 299.0
    state = rt.confirm(Scope.user("bob"), state.task.id)
    assert state.task.status == TaskStatus.DONE
    [entry] = ledger.entries()
    assert (entry["kind"], entry["effect"]["amount"], entry["requests"]) == ("refund", 120, 1)


def test_a_refund_above_the_order_total_or_of_an_unknown_order_is_asked_again(
    ledger: Ledger,
) -> None:
    """The look-up refuses the value; the task goes back to asking for it (it does not
    fail), the journal says why, and nothing reaches the downstream."""
    rt = Runtime(open_store("memory://"), [refund(ledger)])
    bob = Scope.user("bob")
    slots = {"order_number": "ORD-10002", "reason": "late", "amount": 500}
    state = rt.start(bob, "refund", slots=slots)
    assert state.task.status == TaskStatus.WAITING_USER and "amount" not in state.task.slots
    assert state.task.missing_slots == ["amount"]
    assert state.task.context["rejected"]["code"] == "too_large"
    assert "more than the order total of 49" in state.task.context["rejected"]["reason"]
    _, journal = rt.history(bob, state.task.id)
    assert any("refused amount" in e.reason for e in journal)
    state = rt.fill(bob, state.task.id, {"amount": 40})
    assert state.task.stage == "confirming" and "rejected" not in state.task.context
    assert rt.confirm(bob, state.task.id).task.status == TaskStatus.DONE
    unknown = rt.start(bob, "refund", slots={**slots, "order_number": "ORD-99999"})
    assert unknown.task.status == TaskStatus.WAITING_USER
    assert unknown.task.missing_slots == ["order_number"]
    assert "there is no order ORD-99999" in unknown.task.context["rejected"]["reason"]
    assert [e["kind"] for e in ledger.entries()] == ["refund"]


@pytest.mark.parametrize(
    ("bought", "kind"), [("2026-06-01", "repair"), ("2024-01-15", "paid_return")]
)
def test_after_sales_opens_a_repair_or_a_paid_return(
    ledger: Ledger, bought: str, kind: str
) -> None:
    rt = Runtime(open_store("memory://"), [after_sales(ledger, today=date(2026, 11, 29))])
    slots = {"symptoms": "手机充不进电", "model": "mate60", "purchase_date": bought}
    state = rt.start(Scope.user("li"), "after_sales", slots=slots)
    assert state.task.stage == "confirming" and state.task.slots["model"] == "Mate 60"
    assert [a.name for a in state.actions] == ["diagnose", "check_warranty"]
    state = rt.confirm(Scope.user("li"), state.task.id)
    assert state.task.status == TaskStatus.DONE
    assert [e["kind"] for e in ledger.entries()] == [kind]


def test_a_changed_order_number_looks_the_order_up_again(ledger: Ledger) -> None:
    rt = Runtime(open_store("memory://"), [refund(ledger)])
    slots = {"order_number": "ORD-10001", "reason": "broken", "amount": 100}
    state = rt.start(Scope.user("bob"), "refund", slots=slots)
    assert state.actions[0].output["item"] == "wireless earbuds"
    state = rt.fill(Scope.user("bob"), state.task.id, {"order_number": "ORD-10003"})
    assert state.task.stage == "confirming" and state.actions[0].attempts == 1
    assert state.actions[0].output["item"] == "smart watch"
    state = rt.confirm(Scope.user("bob"), state.task.id)
    assert state.task.status == TaskStatus.DONE
    with pytest.raises(TaskLocked, match="is done"):
        rt.fill(Scope.user("bob"), state.task.id, {"amount": 5})
