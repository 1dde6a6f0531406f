"""A human approval step: a slot an operator fills (``filled_by="operator"``) and a stage
that waits for it (``operator_sets``). The user is never asked for it and cannot give it, in
words or through the API; an operator's value sends nothing back to be confirmed again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from relaystate import (
    ActionContext,
    Runtime,
    Scope,
    ScopeError,
    Slot,
    Stage,
    TaskStatus,
    TaskTemplate,
    WaitOperator,
    all_required_slots,
    open_store,
    operator_sets,
    user_confirmed,
)
from relaystate.conversation import Conversation
from relaystate.server import create_app
from relaystate.server.api_keys import issue

ALICE, OPS = Scope.user("alice"), Scope.admin("ops")


def expense(made: list[dict[str, Any]]) -> TaskTemplate:
    template = TaskTemplate(
        "expense",
        triggers={"en": ["expense claim"]},
        slots=[
            Slot("amount", kind="number", ask={"en": "How much?"}),
            Slot("approval", choices=["approved", "rejected"], filled_by="operator"),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("approval", exit=operator_sets("approval", "approved")),
            Stage("paying", actions=["pay"]),
            Stage("done"),
        ],
    )

    @template.action(side_effect=True, idempotent=True)
    def pay(ctx: ActionContext) -> dict[str, Any]:
        made.append(dict(ctx.input))
        return {"paid": ctx.input["amount"]}

    return template


@pytest.fixture
def paid() -> list[dict[str, Any]]:
    return []


@pytest.fixture
def rt(any_store_url: str, paid: list[dict[str, Any]]) -> Iterator[Runtime]:
    with Runtime(open_store(any_store_url), [expense(paid)]) as runtime:
        yield runtime


def waiting(rt: Runtime) -> str:
    task = rt.start(ALICE, "expense", slots={"amount": 120}).task
    state = rt.confirm(ALICE, task.id)
    assert state.task.status == TaskStatus.NEEDS_ATTENTION
    assert rt.next_step(state) == WaitOperator("approval", "approved")
    assert state.task.status_text == (
        "The expense waits for an operator to set approval (approved to go on)."
    )
    assert state.task.missing_slots == []  # never asked in collecting
    return task.id


def test_an_operator_approves_and_nothing_is_confirmed_again(
    rt: Runtime, paid: list[dict[str, Any]]
) -> None:
    task_id = waiting(rt)
    assert [t.id for t in rt.tasks(OPS, statuses=[TaskStatus.NEEDS_ATTENTION])] == [task_id]
    state = rt.fill(OPS, task_id, {"approval": "approved"})
    assert state.task.status == TaskStatus.DONE and state.task.confirmed
    assert paid == [{"amount": 120, "approval": "approved"}]
    _, entries = rt.history(OPS, task_id)
    assert any(e.actor == "admin:ops" and "approval" in e.reason for e in entries)


def test_a_rejection_keeps_it_waiting_and_the_user_cannot_approve(
    rt: Runtime, paid: list[dict[str, Any]]
) -> None:
    task_id = waiting(rt)
    with pytest.raises(ScopeError, match="filled by an operator"):
        rt.fill(ALICE, task_id, {"approval": "approved"})
    state = rt.fill(OPS, task_id, {"approval": "rejected"})
    assert state.task.status == TaskStatus.NEEDS_ATTENTION and paid == []
    assert rt.cancel(OPS, task_id).task.status == TaskStatus.CANCELLED


def test_the_users_words_never_give_an_operators_slot(rt: Runtime) -> None:
    chat = Conversation(rt)
    chat.handle(ALICE, "expense claim", "s1")
    chat.handle(ALICE, "120", "s1")
    turn = chat.handle(ALICE, "yes", "s1")
    assert turn.reply.startswith("Your expense is with a colleague now, for its approval")
    turn = chat.handle(ALICE, "approved, please pay it", "s1")
    assert turn.state is not None and "approval" not in turn.state.task.slots
    assert turn.state.task.status == TaskStatus.NEEDS_ATTENTION


def test_the_api_takes_an_operators_slot_from_an_admin_key_only(
    tmp_path: Path, paid: list[dict[str, Any]]
) -> None:
    runtime = Runtime(open_store(f"sqlite:///{tmp_path}/api.db"), [expense(paid)])
    keys = {
        who: issue(runtime, OPS, who, name=who, admin=who == "ops", now=runtime.clock())[1]
        for who in ("alice", "ops")
    }
    client = TestClient(create_app(runtime, recover_on_start=False))
    task_id = waiting(runtime)

    def post(who: str, slots: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {keys[who]}"}
        return client.post(f"/v1/tasks/{task_id}/slots", json={"slots": slots}, headers=headers)

    refused = post("alice", {"approval": "approved"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    bad = post("ops", {"approval": "maybe"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_slot"
    done = post("ops", {"approval": "approved"})
    assert done.status_code == 200 and done.json()["task"]["status"] == "done"
    runtime.close()


def test_an_operator_slot_is_declared_by_name() -> None:
    slot = Slot("approval", choices=["approved"], filled_by="operator")
    assert slot.required is False
    with pytest.raises(Exception, match="filled_by"):
        Slot("x", filled_by="robot")
