"""A support ticket with a human approval step: a ticket is collected in a conversation,
confirmed by the user, and opened in the ticket system; an urgent one first waits for a
supervisor's approval (an operator's slot), and is opened only once it is given.

    relaystate chat --app examples.support_ticket.agent:templates          # from the repo root
    relaystate tasks list --app examples.support_ticket.agent:templates   # what waits (operator)
    relaystate tasks fill TASK approval=approved --app examples.support_ticket.agent:templates
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from relaystate import (
    ActionContext,
    Outcome,
    Retry,
    Slot,
    Stage,
    Task,
    TaskTemplate,
    all_required_slots,
    condition,
    operator_sets,
    user_confirmed,
)
from relaystate.demo import Ledger


@condition
def urgent(task: Task) -> bool:
    """Only an urgent ticket needs a supervisor's approval (the approval stage's entry)."""
    return task.slots.get("severity") == "urgent"


def support_ticket(tickets: Ledger) -> TaskTemplate:
    """collecting -> confirming -> approval (urgent ones only) -> opening -> done."""
    template = TaskTemplate(
        "support_ticket",
        titles={"en": "support ticket", "zh": "工单"},
        triggers={
            "en": ["support ticket", "open a ticket", "is down", "not working", "broken"],
            "zh": ["工单", "报修", "坏了", "不能用"],
        },
        opening_slot="subject",
        slots=[
            Slot(
                "subject",
                ask={"en": "What is the problem?", "zh": "遇到了什么问题？"},
                labels={"en": "problem", "zh": "问题"},
            ),
            Slot(
                "severity",
                choices=["low", "normal", "urgent"],
                synonyms={
                    "critical": "urgent",
                    "asap": "urgent",
                    "blocking": "urgent",
                    "紧急": "urgent",
                    "很急": "urgent",
                    "一般": "normal",
                    "不急": "low",
                },
                ask={
                    "en": "How urgent is it: low, normal or urgent?",
                    "zh": "有多急：不急、一般还是紧急？",
                },
                labels={"en": "severity", "zh": "紧急程度"},
            ),
            Slot(
                "email",
                pattern=r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}",
                ask={"en": "Which email should we reply to?", "zh": "回复到哪个邮箱？"},
                labels={"en": "email", "zh": "邮箱"},
            ),
            Slot("approval", choices=["approved", "rejected"], filled_by="operator"),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("approval", entry=urgent, exit=operator_sets("approval", "approved")),
            Stage("opening", actions=["open_ticket"]),
            Stage("done"),
        ],
    )

    @template.action(side_effect=True, idempotent=True, retry=Retry(max_attempts=3))
    def open_ticket(ctx: ActionContext) -> dict[str, Any]:
        # the ticket system deduplicates by the key: a retry never opens a second ticket
        return tickets.apply(ctx.idempotency_key, "ticket", dict(ctx.input))

    @open_ticket.check
    def ticket_status(ctx: ActionContext) -> Outcome:
        found = tickets.status(ctx.idempotency_key)
        return Outcome.succeeded(found) if found else Outcome.not_found()

    return template


def templates() -> list[TaskTemplate]:
    """What ``--app examples.support_ticket.agent:templates`` loads."""
    where = Path(os.environ.get("SUPPORT_TICKETS", "support-tickets.db"))
    return [support_ticket(Ledger(where))]
