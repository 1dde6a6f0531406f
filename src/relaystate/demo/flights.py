"""The flight booking agent of the articles, as a task template with real actions.

Searching is read-only; creating the order is a side effect sent to the downstream ledger
with the action's idempotency key, declared idempotent and checkable, with a compensation
that cancels the order if a later step fails for good.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..task.retry import Retry
from ..task.spec import ActionContext, Outcome
from ..task.templates import Slot, Stage, TaskTemplate, all_required_slots, user_confirmed
from .ledger import Ledger


def flight_booking(ledger: Ledger, *, version: int = 1) -> TaskTemplate:
    """Version 2 (the demo's "new build") adds an optional seat preference; a booking
    stored by version 1 is lifted by a migration that gives it the seat "any"."""
    seat = [
        Slot(
            "seat",
            required=False,
            choices=["window", "aisle", "any"],
            labels={"zh": "座位"},
            ask={"en": "Window or aisle?", "zh": "靠窗还是靠过道？"},
        )
    ]
    booking = TaskTemplate(
        "flight_booking",
        version=version,
        goal="Book a flight",
        titles={"en": "flight booking", "zh": "机票预订"},
        triggers={
            "en": ["book a flight", "flight", "fly to", "plane ticket", "air ticket", "fly from"],
            "zh": ["订机票", "机票", "航班", "飞", "订张票", "买张票"],
        },
        keywords={"en": ["trip", "booking"], "zh": ["行程", "订票"]},
        slots=[
            Slot(
                "origin",
                labels={"zh": "出发地"},
                ask={"en": "Where are you flying from?", "zh": "您从哪里出发？"},
            ),
            Slot(
                "destination",
                labels={"zh": "目的地"},
                ask={"en": "Where are you flying to?", "zh": "您要去哪里？"},
            ),
            Slot(
                "date",
                kind="date",
                labels={"zh": "日期"},
                ask={"en": "On which date?", "zh": "哪天出发？"},
            ),
            Slot(
                "cabin_class",
                labels={"zh": "舱位"},
                choices=["economy", "business", "first"],
                synonyms={
                    "经济舱": "economy",
                    "商务舱": "business",
                    "头等舱": "first",
                    "普通舱": "economy",
                    "经济仓": "economy",
                    "商务仓": "business",
                    "公务舱": "business",
                    "头等仓": "first",
                    "coach": "economy",
                    "econ": "economy",
                    "cheapest": "economy",
                    "economy class": "economy",
                    "business class": "business",
                    "first class": "first",
                    "1st class": "first",
                    "1st": "first",
                    "biz": "business",
                    "biz class": "business",
                    "最便宜": "economy",
                    "最便宜的": "economy",
                    "便宜的": "economy",
                    "经济": "economy",
                    "商务": "business",
                    "商舱": "business",
                    "公务": "business",
                    "头等": "first",
                },
                ask={"en": "Economy, business or first?", "zh": "经济舱、商务舱还是头等舱？"},
            ),
            Slot(
                "passenger_name",
                labels={"zh": "乘机人"},
                ask={"en": "Who is travelling?", "zh": "乘机人姓名？"},
            ),
            *(seat if version >= 2 else []),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots, labels={"zh": "收集信息"}),
            Stage("confirming", exit=user_confirmed, labels={"zh": "待确认"}),
            Stage("executing", actions=["search_flights", "create_order"], labels={"zh": "办理中"}),
            Stage("done", labels={"zh": "已完成"}),
        ],
    )

    @booking.action
    def search_flights(ctx: ActionContext) -> dict[str, Any]:
        """Read-only: a deterministic timetable, so repeats give the same answer."""
        slots = ctx.input
        seed = hashlib.sha256(f"{slots['origin']}{slots['destination']}{slots['date']}".encode())
        n = int(seed.hexdigest()[:4], 16)
        flights = [
            {"flight": f"RS{100 + (n + i * 37) % 900}", "departs": f"{7 + i * 4:02d}:{n % 60:02d}"}
            for i in range(3)
        ]
        return {"flights": flights, "chosen": flights[0]["flight"]}

    def order_input(task: Any, outputs: Any) -> dict[str, Any]:
        return {**task.slots, "flight": outputs["search_flights"]["chosen"]}

    @booking.action(
        side_effect=True, idempotent=True, retry=Retry(max_attempts=3), input=order_input
    )
    def create_order(ctx: ActionContext) -> dict[str, Any]:
        return ledger.apply(ctx.idempotency_key, "order", dict(ctx.input))

    @create_order.check
    def order_status(ctx: ActionContext) -> Outcome:
        effect = ledger.status(ctx.idempotency_key)
        return Outcome.not_found() if effect is None else Outcome.succeeded(effect)

    @create_order.compensate
    def cancel_order(ctx: ActionContext) -> dict[str, Any]:
        return ledger.apply(ctx.idempotency_key, "cancellation", {"order": ctx.original_output})

    if version >= 2:

        @booking.migration(from_version=1)
        def any_seat(task: dict[str, Any]) -> dict[str, Any]:
            task["slots"].setdefault("seat", "any")
            return task

    return booking
