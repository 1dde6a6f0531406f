"""A bug in an executor is not a flaky downstream: a programming error (NameError, TypeError,
AttributeError...) stops the Action at once, journaled with where it was raised, and its Task
waits for a person, who reruns it once the code is fixed (or resolves it)."""

from __future__ import annotations

from typing import Any

import pytest

from relaystate import (
    ActionContext,
    ActionStatus,
    NotFound,
    Outcome,
    Retry,
    Runtime,
    Scope,
    Slot,
    Stage,
    TaskLocked,
    TaskStatus,
    TaskTemplate,
    all_required_slots,
    open_store,
    user_confirmed,
)
from relaystate.demo.ledger import Ledger
from relaystate.runtime.views import action_view

ALICE = Scope.user("alice")
OPS = Scope.admin("ops")


def refunds(ledger: Ledger, state: dict[str, Any], *, retry: Retry | None = None) -> TaskTemplate:
    """A refund whose ``submit`` has a bug until ``state["fixed"]``; ``lookup`` (read-only)
    has one while ``state["lookup_fixed"]`` is false."""
    template = TaskTemplate(
        "refund",
        slots=[Slot("order_id"), Slot("amount", kind="number")],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("executing", actions=["lookup", "submit"]),
            Stage("done"),
        ],
    )
    state.setdefault("fixed", False)
    state.setdefault("lookup_fixed", True)
    state.setdefault("calls", 0)

    @template.action(retry=retry or Retry(max_attempts=3, initial_interval=0))
    def lookup(ctx: ActionContext) -> Any:
        state["calls"] += 1
        if not state["lookup_fixed"]:
            return ctx.slots["order_id"].upper(1)  # TypeError: a wrong argument
        return {"order": ctx.slots["order_id"]}

    @template.action(
        side_effect=True, idempotent=True, retry=retry or Retry(max_attempts=3, initial_interval=0)
    )
    def submit(ctx: ActionContext) -> Any:
        if not state["fixed"]:
            return payments.refund(ctx.input["amount"])  # type: ignore[name-defined]  # noqa: F821
        return ledger.apply(ctx.idempotency_key, "refund", {"amount": ctx.input["amount"]})

    @submit.check
    def submitted(ctx: ActionContext) -> Outcome:
        found = ledger.status(ctx.idempotency_key)
        return Outcome.succeeded(found) if found else Outcome.not_found()

    return template


def confirmed(rt: Runtime) -> str:
    task = rt.start(ALICE, "refund", slots={"order_id": "ord-1", "amount": 30}).task
    rt.confirm(ALICE, task.id)
    return task.id


def test_a_name_error_stops_the_action_at_once_and_a_fix_then_rerun_finishes_it(
    sql_store_url: str, ledger: Ledger
) -> None:
    flags: dict[str, Any] = {}
    template = refunds(ledger, flags)
    with Runtime(open_store(sql_store_url), [template]) as rt:
        task_id = confirmed(rt)
        state = rt.task(ALICE, task_id)
        submit = next(a for a in state.actions if a.name == "submit")
        assert state.task.status == TaskStatus.NEEDS_ATTENTION
        assert submit.attempts == 1  # not retried as if the downstream had failed
        assert submit.status == ActionStatus.UNKNOWN  # a side effect: it may have landed
        assert submit.error_kind == "programming"
        assert "NameError" in (submit.error or "") and "payments" in (submit.error or "")
        assert "error in its own code" in state.task.status_text
        assert action_view(submit)["error_kind"] == "programming"
        _, entries = rt.history(ALICE, task_id)
        reason = entries[-1].reason
        assert "programming error, not retried" in reason
        assert "Traceback (most recent call last)" in reason and "in submit" in reason
        assert rt.resume(ALICE, task_id).task.status == TaskStatus.NEEDS_ATTENTION
        assert rt.task(ALICE, task_id).action(submit.seq).attempts == 1  # resume repeats no bug
        assert ledger.entries() == []

        flags["fixed"] = True  # the fix is deployed
        done = rt.rerun(OPS, task_id, submit.seq)
        assert done.task.status == TaskStatus.DONE
        rerun = done.action(submit.seq)
        assert rerun.status == ActionStatus.SUCCESS and rerun.error_kind is None
        assert [e["effects"] for e in ledger.entries()] == [1]
        _, entries = rt.history(ALICE, task_id)
        assert any(e.reason.startswith(f"action {submit.seq} rerun after a fix") for e in entries)
        assert any(e.reason.startswith("reconciled submit: not_found") for e in entries)


def test_a_read_only_bug_waits_for_a_person_instead_of_unwinding(ledger: Ledger) -> None:
    flags: dict[str, Any] = {}
    template = refunds(ledger, flags)
    flags["lookup_fixed"] = False
    with Runtime(open_store("memory://"), [template]) as rt:
        task_id = confirmed(rt)
        state = rt.task(ALICE, task_id)
        lookup = state.actions[0]
        assert (lookup.name, lookup.status, lookup.error_kind) == (
            "lookup",
            ActionStatus.FAILED,
            "programming",
        )
        assert lookup.attempts == 1 and flags["calls"] == 1
        assert "TypeError" in (lookup.error or "")
        assert state.task.status == TaskStatus.NEEDS_ATTENTION  # not failed: nothing unwound
        flags.update(lookup_fixed=True, fixed=True)
        assert rt.rerun(OPS, task_id, lookup.seq).task.status == TaskStatus.DONE
        with pytest.raises(TaskLocked, match="nothing to rerun"):  # only a stopped one
            rt.rerun(OPS, task_id, lookup.seq)
        with pytest.raises(NotFound):
            rt.rerun(OPS, task_id, 99)


def test_resolving_a_bug_as_failed_unwinds_as_any_failure(ledger: Ledger) -> None:
    flags: dict[str, Any] = {}
    template = refunds(ledger, flags)
    flags["lookup_fixed"] = False
    with Runtime(open_store("memory://"), [template]) as rt:
        task_id = confirmed(rt)
        state = rt.resolve(OPS, task_id, 1, succeeded=False)
        assert state.task.status == TaskStatus.FAILED
        assert state.action(1).error_kind is None


def test_a_downstream_failure_is_still_retried(ledger: Ledger) -> None:
    flags: dict[str, Any] = {}
    template = refunds(ledger, flags)
    calls: list[int] = []

    def flaky(ctx: ActionContext) -> Any:
        calls.append(ctx.attempt)
        raise ConnectionError("the payments service is away")

    template.spec("lookup").fn = flaky
    with Runtime(open_store("memory://"), [template]) as rt:
        task_id = confirmed(rt)
        lookup = rt.task(ALICE, task_id).actions[0]
        assert calls == [1, 2, 3] and lookup.status == ActionStatus.FAILED
        assert lookup.error_kind is None


def test_a_template_may_declare_an_error_type_retryable(ledger: Ledger) -> None:
    flags: dict[str, Any] = {"lookup_fixed": False}
    retry = Retry(max_attempts=2, initial_interval=0, retry_on=(TypeError,))
    template = refunds(ledger, flags, retry=retry)
    with Runtime(open_store("memory://"), [template]) as rt:
        task_id = confirmed(rt)
        lookup = rt.task(ALICE, task_id).actions[0]
        assert flags["calls"] == 2
        assert lookup.error_kind is None and lookup.status == ActionStatus.FAILED
    with pytest.raises(ValueError, match="exception types"):
        Retry(retry_on=("TypeError",))  # type: ignore[arg-type]


def test_a_bug_in_a_check_asks_a_person_at_once(ledger: Ledger) -> None:
    flags: dict[str, Any] = {}
    template = refunds(ledger, flags)
    checks: list[int] = []

    def broken_check(ctx: ActionContext) -> Outcome:
        checks.append(ctx.attempt)
        return Outcome.succeeded(ledger.status(ctx.idempotency_key).get("id"))  # type: ignore[union-attr]

    template.spec("submit").check_fn = broken_check
    with Runtime(open_store("memory://"), [template]) as rt:
        task_id = confirmed(rt)  # submit raises NameError: unknown, needs attention
        flags["fixed"] = False
        state = rt.rerun(OPS, task_id, 2)  # reconciling calls the broken check once
        submit = state.action(2)
        assert checks == [1]
        assert submit.status == ActionStatus.UNKNOWN and submit.error_kind == "programming"
        assert "its check raised AttributeError" in (submit.error or "")
        assert state.task.status == TaskStatus.NEEDS_ATTENTION
