"""An agent whose understanding and replies use a language model when one is configured,
through relaystate's OpenAI-compatible client, and rules when none is (or when it fails).

The model only understands and phrases: it is asked for slot values the rules could not read
("me, Mulder and Skinner" -> 3 people) and to reword each reply; every answer is checked
(its JSON against the schema sent, each value by the slot's own rules, every number of a reply
kept). The state machine decides what happens, with or without it.

    export RELAYSTATE_MODEL_BASE_URL=http://localhost:11434/v1   # any OpenAI-compatible server
    export RELAYSTATE_MODEL_NAME=qwen2.5:7b-instruct           # (and RELAYSTATE_MODEL_API_KEY)
    relaystate chat --app examples.llm_agent.agent:templates   # from the repo root
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from relaystate import (
    ActionContext,
    Outcome,
    Runtime,
    Slot,
    Stage,
    TaskTemplate,
    all_required_slots,
    user_confirmed,
)
from relaystate.conversation import Conversation
from relaystate.demo import Ledger
from relaystate.llm import Model, default_model


def table_booking(bookings: Ledger) -> TaskTemplate:
    """collecting (people, day, name) -> confirming -> booking -> done."""
    template = TaskTemplate(
        "table_booking",
        titles={"en": "table booking", "zh": "订座"},
        triggers={"en": ["book a table", "a table for", "reservation"], "zh": ["订座", "订位"]},
        slots=[
            Slot(
                "people",
                kind="number",
                ask={"en": "For how many people?", "zh": "几位？"},
                labels={"en": "people", "zh": "人数"},
            ),
            Slot(
                "date",
                kind="date",
                ask={"en": "Which day?", "zh": "哪天？"},
                labels={"en": "day", "zh": "日期"},
            ),
            Slot(
                "name",
                extractor="person",
                ask={"en": "Under which name?", "zh": "留哪位的名字？"},
                labels={"en": "name", "zh": "姓名"},
            ),
        ],
        stages=[
            Stage("collecting", exit=all_required_slots),
            Stage("confirming", exit=user_confirmed),
            Stage("booking", actions=["book_table"]),
            Stage("done"),
        ],
    )

    @template.action(side_effect=True, idempotent=True)
    def book_table(ctx: ActionContext) -> dict[str, Any]:
        return bookings.apply(ctx.idempotency_key, "booking", dict(ctx.input))

    @book_table.check
    def booked(ctx: ActionContext) -> Outcome:
        found = bookings.status(ctx.idempotency_key)
        return Outcome.succeeded(found) if found else Outcome.not_found()

    return template


def templates() -> list[TaskTemplate]:
    """What ``--app examples.llm_agent.agent:templates`` loads (``relaystate chat`` then
    takes the model from the environment, as below)."""
    return [table_booking(Ledger(Path(os.environ.get("TABLE_BOOKINGS", "table-bookings.db"))))]


def conversation(runtime: Runtime, environ: Mapping[str, str] | None = None) -> Conversation:
    """The conversation engine with the model the environment configures (rules if none)."""
    model: Model = default_model(environ)
    return Conversation(runtime, model)
