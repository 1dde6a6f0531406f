"""The refund agent of the articles: find the order, check the amount, submit the refund.

The order look-up is read-only; submitting the refund is a side effect sent to the
downstream ledger under the action's idempotency key, checkable by that key. A refund
larger than what the order cost is refused for good (no retry), and the task says why.
"""

from __future__ import annotations

from typing import Any

from ..task.problems import Problem
from ..task.retry import Retry
from ..task.spec import ActionContext, Completes, Outcome, PermanentError, RejectedInput
from ..task.templates import Slot, Stage, TaskTemplate, all_required_slots, user_confirmed
from .ledger import Ledger

ORDERS: dict[str, dict[str, Any]] = {
    "ORD-10001": {"item": "wireless earbuds", "total": 299.0},
    "ORD-10002": {"item": "phone case", "total": 49.0},
    "ORD-10003": {"item": "smart watch", "total": 1299.0},
}
"""The demo shop's orders (orders the flight agent created are looked up in the ledger)."""


def _positive(value: Any) -> float | int:
    amount = float(str(value).strip().lstrip("¥$").removesuffix("元"))
    if amount <= 0:
        raise ValueError("the amount must be more than zero")
    return int(amount) if amount.is_integer() else amount


def refund(ledger: Ledger) -> TaskTemplate:
    template = TaskTemplate(
        "refund",
        version=1,
        goal="Refund (part of) an order",
        titles={"en": "refund", "zh": "退款"},
        triggers={
            "en": [
                "refund",
                "money back",
                "return it",
                "reimburse",
                "don't want it anymore",
                "send it back",
            ],
            "zh": ["退款", "退钱", "退货款", "退货", "退一下", "退"],
        },
        keywords={"en": ["order"], "zh": ["订单"]},
        slots=[
            Slot(
                "order_number",
                labels={"zh": "订单号"},
                pattern=r"ORD-\d{5}",
                why={
                    "en": "The order number tells which purchase to refund.",
                    "zh": "需要订单号才能找到要退款的那笔订单。",
                },
                ask={
                    "en": "What is the order number (like ORD-10001)?",
                    "zh": "订单号是多少（例如 ORD-10001）？",
                },
            ),
            Slot(
                "reason",
                labels={"zh": "原因"},
                ask={"en": "Why do you want a refund?", "zh": "退款原因是什么？"},
                why={
                    "en": "The shop needs the reason to approve the refund.",
                    "zh": "商家需要知道退款原因才能审核退款。",
                },
            ),
            Slot(
                "amount",
                kind="number",
                labels={"zh": "金额"},
                parser=_positive,
                synonyms={
                    "全退": "all",
                    "全额": "all",
                    "全部退": "all",
                    "全部退款": "all",
                    "都退": "all",
                    "refund it all": "all",
                    "all of it": "all",
                    "the full amount": "all",
                    "full amount": "all",
                    "full refund": "all",
                    "the whole amount": "all",
                    "whole amount": "all",
                    "in full": "all",
                    "all the money": "all",
                    "全款": "all",
                    "全部金额": "all",
                    "everything": "all",
                },
                value_labels={"zh": {"all": "全额"}, "en": {"all": "the full amount"}},
                why={
                    "en": "The amount says how much of the order to refund.",
                    "zh": "需要知道退多少钱（可以全额，也可以部分）。",
                },
                ask={"en": "How much should be refunded?", "zh": "需要退多少钱？"},
            ),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots, labels={"zh": "收集信息"}),
            Stage("checking", actions=["lookup_order"], labels={"zh": "核对中"}),
            Stage("confirming", exit=user_confirmed, labels={"zh": "待确认"}),
            Stage("executing", actions=["submit_refund"], labels={"zh": "办理中"}),
            Stage("done", labels={"zh": "已完成"}),
        ],
    )

    @template.action
    def lookup_order(ctx: ActionContext) -> dict[str, Any] | Completes:
        """Read-only: the order from the shop, or one the flight agent created. An unknown
        order, or an amount above its total, is asked for again (the task does not fail)."""
        number = str(ctx.input["order_number"])
        order = ORDERS.get(number)
        if order is None:
            made = next(
                (
                    e["effect"]
                    for e in ledger.entries()
                    if e["effect"] and e["effect"].get("id") == number
                ),
                None,
            )
            if made is None:
                reason = Problem("unknown", f"there is no order {number}", value=number)
                raise RejectedInput("order_number", reason)
            order = {"item": f"flight {made.get('flight', '')}".strip(), "total": 880.0}
        if ctx.input["amount"] == "all":  # "全退": the whole order
            found = {"order_number": number, **order}
            return Completes(found, {"amount": order["total"]})
        amount = float(ctx.input["amount"])
        if amount > float(order["total"]):
            total = float(order["total"])
            reason = Problem(
                "too_large",
                f"the refund of {amount:g} is more than the order total of {total:g}",
                value=f"{amount:g}",
                options=[f"{total:g}"],
            )
            raise RejectedInput("amount", reason)
        return {"order_number": number, **order}

    def refund_input(task: Any, outputs: Any) -> dict[str, Any]:
        return {**task.slots, "order_total": outputs["lookup_order"]["total"]}

    @template.action(
        side_effect=True, idempotent=True, retry=Retry(max_attempts=3), input=refund_input
    )
    def submit_refund(ctx: ActionContext) -> dict[str, Any]:
        if float(ctx.input["amount"]) > float(ctx.input["order_total"]):
            raise PermanentError(
                f"the refund of {ctx.input['amount']:g} is more than the order total of "
                f"{ctx.input['order_total']:g}"
            )
        return ledger.apply(ctx.idempotency_key, "refund", dict(ctx.input))

    @submit_refund.check
    def refund_status(ctx: ActionContext) -> Outcome:
        effect = ledger.status(ctx.idempotency_key)
        return Outcome.not_found() if effect is None else Outcome.succeeded(effect)

    return template
