"""Build v1 of the upgrade test's app (``--app tests.upgrade.app_v1:templates``): a trip
booking (``auto``) and a refund (``pinned``), both at version 1."""

from __future__ import annotations

from relaystate import TaskTemplate

from .common import refund_v1, trip_v1


def templates() -> list[TaskTemplate]:
    return [trip_v1(), refund_v1()]
