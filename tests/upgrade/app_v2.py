"""Build v2 of the upgrade test's app (``--app tests.upgrade.app_v2:templates``).

The trip booking moves to version 2: ``passenger_name`` becomes ``first_name`` and
``last_name`` and a new slot, ``meal``, is asked; a migration lifts a stored version-1 task
(the issue's example). The build also carries trip version 1 (beside the migration: what
it runs while a version-1 action is still in flight elsewhere) and refund version 1 (pinned
tasks v1 started stay on it); new refunds start on refund version 2.
"""

from __future__ import annotations

from typing import Any

from relaystate import TaskTemplate
from relaystate.task.templates import Slot

from .common import TRIP, add_effect, refund_v1, refund_v2, stages_for, trip_v1

MEALS = ["standard", "vegetarian", "vegan"]


def trip_v2() -> TaskTemplate:
    template = TaskTemplate(
        TRIP,
        version=2,
        goal="Book a trip",
        titles={"en": "trip"},
        triggers={"en": ["book a trip", "plan a trip"]},
        keywords={"en": ["trip"]},
        slots=[
            Slot("destination", ask={"en": "Where are you going?"}),
            Slot("first_name", ask={"en": "What is the passenger's first name?"}),
            Slot("last_name", ask={"en": "And the passenger's last name?"}),
            Slot("bags", kind="number", ask={"en": "How many bags?"}),
            Slot("meal", choices=MEALS, ask={"en": "Which meal: standard, vegetarian or vegan?"}),
        ],
        stages=stages_for("reserve_trip"),
    )
    add_effect(template, "reserve_trip", "reservation")

    @template.migration(from_version=1)
    def split_name(task: dict[str, Any]) -> dict[str, Any]:
        """passenger_name -> first_name + last_name; a task that already had its name gets
        the standard meal (it was booked without asking), one still collecting is asked."""
        slots = task["slots"]
        name = slots.pop("passenger_name", None)
        if name:
            first, _, last = str(name).strip().partition(" ")
            slots["first_name"] = first
            if last.strip():
                slots["last_name"] = last.strip()
            slots.setdefault("meal", "standard")
        return task

    return template


def templates() -> list[TaskTemplate]:
    return [trip_v1(), trip_v2(), refund_v1(), refund_v2()]
