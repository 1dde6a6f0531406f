"""What builds v1 and v2 of the upgrade test's app share: the downstream ledger, the slow
side effect both task types make, and the pinned refund template (version 1).

Every effect the ledger records names the build and the process that made it (the build
from ``RELAYSTATE_BUILD``, set on each process), the task and the action, so a test can
tell who ran what and count effects per task action.

Environment (read when the action runs):

- ``RELAYSTATE_LEDGER``: the ledger file, shared by every process.
- ``UPGRADE_ACTION_SECONDS``: ``LOW:HIGH`` seconds the downstream call takes (uniform,
  default ``0.3:1.5``); half before the effect lands, half after.
- ``UPGRADE_BLOCK_DIR`` and ``UPGRADE_BLOCK_AT`` (``before`` or ``after`` the effect): the
  action writes ``started-<task id>`` in that folder, then waits until ``release`` appears
  there (a test SIGKILLs the process meanwhile).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

from relaystate import ActionContext, Outcome, Stage, TaskTemplate
from relaystate.demo.ledger import Ledger
from relaystate.task.templates import Slot, all_required_slots, user_confirmed

TRIP = "trip"
REFUND = "refund"


def ledger() -> Ledger:
    return Ledger(os.environ["RELAYSTATE_LEDGER"])


def _seconds() -> tuple[float, float]:
    low, _, high = os.environ.get("UPGRADE_ACTION_SECONDS", "0.3:1.5").partition(":")
    return float(low), float(high or low)


def _hold(where: str, ctx: ActionContext) -> None:
    folder = os.environ.get("UPGRADE_BLOCK_DIR")
    if not folder or os.environ.get("UPGRADE_BLOCK_AT", "after") != where:
        return
    (Path(folder) / f"started-{ctx.task_id}").write_text(str(os.getpid()))
    while not (Path(folder) / "release").exists():
        time.sleep(0.05)


def side_effect(ctx: ActionContext, kind: str) -> dict[str, Any]:
    """A slow downstream call that makes one effect (never deduplicated by the downstream:
    a second call with the same key would make a second effect, and the test would see it)."""
    low, high = _seconds()
    took = random.uniform(low, high)
    time.sleep(took / 2)
    _hold("before", ctx)
    payload = {
        "task_id": ctx.task_id,
        "action": ctx.name,
        "seq": ctx.seq,
        "build": os.environ.get("RELAYSTATE_BUILD", "?"),
        "pid": os.getpid(),
        "at": time.time(),
        "slots": dict(ctx.input),
    }
    effect = ledger().apply(ctx.idempotency_key, kind, payload, deduplicate=False)
    _hold("after", ctx)
    time.sleep(took / 2)
    return {"effect_id": effect["id"], "build": payload["build"]}


def check(ctx: ActionContext) -> Outcome:
    """What the downstream says about a call whose outcome is unknown (its holder died)."""
    found = ledger().status(ctx.idempotency_key)
    if found is None:
        return Outcome.not_found()
    return Outcome.succeeded({"effect_id": found["id"], "build": found["build"]})


def refund_v1() -> TaskTemplate:
    """A refund: pinned, so a task runs to its end on version 1 and on the build that
    started it (its action only in that build's workers)."""
    return _refund(1, [])


def refund_v2() -> TaskTemplate:
    """Version 2 of the refund (build v2 starts new refunds on it): an optional note."""
    return _refund(2, [Slot("note", required=False, ask={"en": "Anything to add?"})])


def _refund(version: int, extra: list[Slot]) -> TaskTemplate:
    template = TaskTemplate(
        REFUND,
        version=version,
        upgrade="pinned",
        goal="Refund an order",
        titles={"en": "refund"},
        triggers={"en": ["refund", "money back"]},
        keywords={"en": ["order"]},
        slots=[
            Slot(
                "order_number",
                pattern=r"ORD-\d{5}",
                ask={"en": "What is the order number (like ORD-10001)?"},
            ),
            Slot("amount", kind="number", ask={"en": "How much should be refunded?"}),
            *extra,
        ],
        stages=stages_for("pay_refund"),
    )
    add_effect(template, "pay_refund", "refund")
    return template


def trip_slots_v1() -> list[Slot]:
    return [
        Slot("destination", ask={"en": "Where are you going?"}),
        Slot("passenger_name", ask={"en": "Who is travelling?"}),
        Slot("bags", kind="number", ask={"en": "How many bags?"}),
    ]


def trip_v1() -> TaskTemplate:
    """A trip booking, version 1: one passenger_name. ``auto``: a newer build lifts it."""
    template = TaskTemplate(
        TRIP,
        version=1,
        goal="Book a trip",
        titles={"en": "trip"},
        triggers={"en": ["book a trip", "plan a trip"]},
        keywords={"en": ["trip"]},
        slots=trip_slots_v1(),
        stages=stages_for("reserve_trip"),
    )
    add_effect(template, "reserve_trip", "reservation")
    return template


def stages_for(action: str) -> list[Stage]:
    return [
        Stage("collecting", exit=all_required_slots),
        Stage("confirming", exit=user_confirmed),
        Stage("executing", actions=[action]),
        Stage("done"),
    ]


def add_effect(template: TaskTemplate, name: str, kind: str) -> None:
    def act(ctx: ActionContext) -> dict[str, Any]:
        return side_effect(ctx, kind)

    spec = template.action(name=name, side_effect=True, idempotent=False)(act)
    spec.check(check)
