"""Demo agents (flight booking, refund, after-sales) and their downstream ledger."""

from __future__ import annotations

from pathlib import Path

from ..task.templates import TaskTemplate
from .after_sales import after_sales
from .flights import flight_booking
from .ledger import Ledger
from .refund import refund

__all__ = ["Ledger", "after_sales", "flight_booking", "refund", "templates"]


def templates(ledger_path: str | Path) -> list[TaskTemplate]:
    """The demo task types, sending their side effects to the ledger at ``ledger_path``."""
    ledger = Ledger(ledger_path)
    return [flight_booking(ledger), refund(ledger), after_sales(ledger)]
